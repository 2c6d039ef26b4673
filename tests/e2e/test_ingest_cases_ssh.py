"""A live command-suite run over real SSH (sshd test bed), SQLite and PostgreSQL, whose host spool gets a line of a
type the agent never writes while the run goes on (issue 10): the line is one error row at its position, shown as
such, and the host is not ``completed`` — never a line the store skipped in silence.

The tool of case 0 waits for a file the test creates once it has planted the line (no sleep, no timing): the line
is appended as the agent's own appenders do it (under the spool's flock, numbered by its position), so the
agent goes on numbering its lines after it."""

from __future__ import annotations

import fcntl
import json
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

GATED = """\
import os, sys, time
if sys.argv[1] == "1":  # case 0 waits until the test has planted its line
    deadline = time.monotonic() + 300
    while not os.path.exists(GO) and time.monotonic() < deadline:
        time.sleep(0.05)
print("tput: " + sys.argv[1])
"""

GATED_SUITE = """\
name: gated
description: case 0 waits for the test's file, then each case prints its figure
command: ["PYTHON", "SCRIPT", "{tput}"]
params:
  tput: {type: list, default: [1, 2, 3], help: "the figure printed"}
timeout_s: 400
repeat: 1
parser: {name: regex, pattern: 'tput: (?P<tput>[\\d.]+)'}
metrics:
  tput: {path: tput, unit: "1/s"}
"""


@pytest.fixture
def bed(one_host_any_db: tuple[Orch, SshdHost]) -> tuple[Orch, SshdHost]:
    return one_host_any_db


def _wait_for_case_start(runs: Path, deadline_s: float = 240.0) -> Path:
    """The host's spool once it holds the case_start of case 0 (the agent then runs case 0's tool)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for spool in runs.glob("*/*/events.jsonl"):
            if b'"case_start"' in spool.read_bytes():
                return spool
        time.sleep(0.1)
    raise AssertionError(f"no case_start in a spool under {runs} within {deadline_s} s")


def _append_as_a_writer(spool: Path, type_: str) -> int:
    """Append one line of ``type_`` at the spool's end, under its flock, its seq its position; returns it."""
    with open(spool, "ab+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0)
            pos = f.read().count(b"\n")
            doc = {"v": 1, "seq": pos, "type": type_, "ts": time.time(), "note": "planted by the test"}
            f.write((json.dumps(doc, separators=(",", ":")) + "\n").encode())
            f.flush()
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    return pos


def test_a_line_of_an_unknown_type_planted_in_a_live_spool_is_an_error_row_at_its_position(
    bed: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    orch, host = bed
    go = tmp_path / "go"
    script = tmp_path / "gated.py"
    script.write_text(GATED.replace("GO", repr(str(go))))
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "gated.yaml").write_text(GATED_SUITE.replace("PYTHON", sys.executable).replace("SCRIPT", str(script)))
    proc = orch.popen("run", "gated", "--hosts", "ct200", "--suite-dir", str(suites), "--json")
    try:
        spool = _wait_for_case_start(host.home / ".orch" / "runs")
        planted = _append_as_a_writer(spool, "zzz")
    finally:
        go.touch()
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 1, err[-3000:] + out[-2000:]
    doc = json.loads(out)
    [h] = doc["hosts"]
    assert (doc["status"], h["status"], h["results"], h["errors"]) == ("partial", "failed", 3, 1), doc
    assert "0 errors on the host, 1 stored" in h["error"], h["error"]
    store = Store.from_url(orch.db_url)
    try:
        rows = store.results(doc["run_id"], limit=20).items
        errors = [(r.seq, r.case_index, r.error) for r in rows if r.status == "error"]
        assert len(errors) == 1 and errors[0][:2] == (planted, None), errors
        assert (errors[0][2] or "").startswith(f"agent line {planted} (zzz): unknown event type 'zzz'; the agent "
                                               "writes only case_start, done, error, hello, log, result")  # fmt: skip
        assert sorted(r.metrics["tput"]["value"] for r in rows if r.status == "ok") == [1.0, 2.0, 3.0]
    finally:
        store.close()
