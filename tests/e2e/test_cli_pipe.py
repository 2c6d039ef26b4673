"""``orch … | head``: a reader that goes away before orch has written everything. Before, a table cut so ended
with exit 1 (rich's default; in orch's exit status "a host or run failed") and a JSON document cut by the pipe
ended with exit 0 (Python's buffered stdout took the pipe's partial write). Now both end as the shell's own tools
do: killed by SIGPIPE, silently; a reader that takes everything gets everything, exit 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

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


LOUD = """\
name: loud
description: prints 200 lines and the figure
command: ["sh", "-c", "seq 200; echo 'v: 1'"]
params: {}
parser: {name: regex, pattern: 'v: (?P<v>\\d+)'}
metrics:
  v: {path: v, unit: count}
warmup: 0
repeat: 1
timeout_s: 60
"""


def _closed_pipe_run(orch: Orch, *args: str) -> tuple[int, str]:
    """``orch ARGS`` with stdout a pipe whose read end is closed before orch starts: its return code and stderr."""
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(orch.argv(*args), cwd=orch.cwd, env=orch.env(), stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=120)  # fmt: skip
    finally:
        os.close(w)
    return proc.returncode, proc.stderr


def test_every_command_and_help_whose_reader_is_gone_ends_by_sigpipe(tmp_path: Path) -> None:
    """``orch runs logs RUN | head -1`` exited 1 silently (click turned its BrokenPipeError into exit 1 before
    orch's boundary saw it), as did ``orch --help`` and ``--version``; now they end as ``runs list`` does."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: "
                   f"{tmp_path / 'home'}}}\n")  # fmt: skip
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    assert orch("db", "upgrade").returncode == 0
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "loud.yaml").write_text(LOUD)
    ran = orch("run", "loud", "--hosts", "localhost", "--suite-dir", str(suites))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    short = orch.json("runs", "show", "latest")["run_id"][-8:]
    assert "==> localhost case 0 run 0 stdout" in orch("runs", "logs", short).stdout  # what the reader misses
    for args in (("runs", "logs", short), ("runs", "show", short), ("runs", "show", short, "--json"), ("--help",),
                 ("runs", "--help"), ("--version",), ("hosts", "list")):  # fmt: skip
        code, err = _closed_pipe_run(orch, *args)
        assert (code, err) == (-signal.SIGPIPE, ""), args
