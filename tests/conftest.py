"""Shared test configuration; the real-peer fixtures live in tests/plugins/ (sshd test bed, PostgreSQL, Slurm)."""

pytest_plugins = [
    "tests.plugins.timing", "tests.plugins.sshd", "tests.plugins.pg", "tests.plugins.browser", "tests.plugins.slurm",
]  # fmt: skip


import sys  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _cli_consoles_per_test() -> Iterator[None]:
    """orch's consoles (``render.console``, ``render.err_console``) are made once per process, at the width of their
    first use: right for one command per process, but a test calling ``main`` in-process read its output at the
    width of whichever earlier test made them first (100 columns, ``PIPE_WIDTH``, where that test set no COLUMNS).
    Since run's and runs show's notes wrap at the width (prose.say), a phrase could then be split across lines
    depending on the order tests ran in (CI: ``test_h200_telemetry_replay`` at COLUMNS=200 after
    ``test_h200_quant_replay``). Each test makes its own, at its own COLUMNS."""
    render = sys.modules.get("orchestrator.cli.render")
    if render is not None:
        render.console.cache_clear()
        render.err_console.cache_clear()
    yield
