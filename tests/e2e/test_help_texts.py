"""Every help text that takes a run names the same forms (``RUN_REF_FORMS``: short id or its 4+ digit start, full
id or a prefix, latest, latest~N); ``orch project --help`` said "id or 8+ char prefix". The real ``orch``."""

from __future__ import annotations

import re

import pytest

from orchestrator.store.compute import RUN_REF_FORMS
from tests.e2e.conftest import Orch, local_orch

orch = pytest.fixture(local_orch, name="orch")


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (("project",), ("--run", "--overheads", "--check")),
        (("cancel",), ("RUN_ID",)),
        (("run",), ("--resume",)),
        (("runs", "show"), ("RUN_ID",)),
        (("runs", "compare"), ("BASE", "HEAD")),
        (("runs", "check"), ("HEAD", "--base")),
        (("runs", "plot"), ("RUNS",)),
    ],
)
def test_run_references_are_worded_alike(orch: Orch, argv: tuple[str, ...], options: tuple[str, ...]) -> None:
    res = orch(*argv, "--help", columns=400)
    assert res.returncode == 0, res.stderr
    flat = _flat(res.stdout)
    assert "8+ char" not in flat
    assert flat.count(RUN_REF_FORMS) >= len(options), flat
