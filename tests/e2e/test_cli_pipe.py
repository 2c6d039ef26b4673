"""``orch … | head``: a reader that goes away before orch has written everything. Before, a table cut so ended
with exit 1 (rich's default; in orch's exit status "a host or run failed") and a JSON document cut by the pipe
ended with exit 0 (Python's buffered stdout took the pipe's partial write). Now both end as the shell's own tools
do: killed by SIGPIPE, silently; a reader that takes everything gets everything, exit 0."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")

RUNS = 300  # sweep-0 .. sweep-299


def _fill(store: Store) -> None:
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    for i in range(RUNS):
        store.create_run(suite="noop", params={}, preset=None, label=f"sweep-{i}", hosts=["h1"],
                         started_by="t@box", started_on="box")  # fmt: skip


@pytest.mark.parametrize("args", [("runs", "list", "--limit", str(RUNS)), ("runs", "list", "--limit", str(RUNS),
                                                                             "--json")])  # fmt: skip
def test_a_reader_that_goes_away_ends_orch_by_sigpipe_silently(orch: Orch, store: Store, args: tuple[str, ...]) -> None:
    _fill(store)
    proc = subprocess.Popen(orch.argv(*args), cwd=orch.cwd, env=orch.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| true`: the reader is gone before orch (still importing) writes its first byte

    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == -signal.SIGPIPE, err
    assert err == ""  # no traceback, no "Aborted", no "Exception ignored"
    whole = orch(*args)  # a reader that takes everything: the whole output, exit 0
    assert whole.returncode == 0, whole.stderr
    if "--json" in args:
        assert len(json.loads(whole.stdout)["items"]) == RUNS
    else:
        assert "sweep-0" in whole.stdout and f"sweep-{RUNS - 1}" in whole.stdout
