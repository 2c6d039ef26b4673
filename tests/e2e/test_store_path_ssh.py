"""A tester's reports on the path from a tool's output to the store, end to end over real SSH (sshd test bed) on
SQLite and a real PostgreSQL: nothing lost, nothing misreported.

- a NUL byte in a tool's output lost every result of the host on PostgreSQL ("unsupported Unicode escape
  sequence", 0 of 3 stored, with the hint "check that the database is reachable");
- a parse error of one case (orch turning the agent's result line into an error row) was reported as data the
  store lost ("4 results on the host, 3 stored; 0 errors on the host, 1 stored"), the host failed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

NUL_TOOL = "import sys\nsys.stdout.write('v: ' + sys.argv[1] + '\\n\\x00junk\\n')\n"
OOPS_TOOL = "import sys\nn = sys.argv[1]\nprint('oops' if n == '3' else 'v: ' + n)\n"
SUITE = """\
name: NAME
description: a tool printing its figure
command: ["PYTHON", "SCRIPT", "{n}"]
params:
  n: {type: list, default: CASES, help: "the figure printed"}
timeout_s: 60
repeat: 1
parser: {name: regex, pattern: 'v: (?P<v>\\d+)'}
metrics:
  v: {path: v, unit: "1"}
"""


@pytest.fixture
def bed(one_host_any_db: tuple[Orch, SshdHost]) -> tuple[Orch, SshdHost]:
    return one_host_any_db


def _suite(tmp_path: Path, name: str, tool: str, cases: list[int]) -> Path:
    script = tmp_path / f"{name}.py"
    script.write_text(tool)
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    text = SUITE.replace("NAME", name).replace("PYTHON", sys.executable).replace("SCRIPT", str(script))
    (suites / f"{name}.yaml").write_text(text.replace("CASES", json.dumps(cases)))
    return suites


def test_a_nul_in_a_tools_output_loses_nothing(bed: tuple[Orch, SshdHost], tmp_path: Path) -> None:
    orch, _ = bed
    suites = _suite(tmp_path, "nul", NUL_TOOL, [1, 2, 3])
    res = orch("run", "nul", "--hosts", "ct200", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [
        ("gpu-a", "completed", 3, 0)
    ], doc
    store = Store.from_url(orch.db_url)
    try:
        rows = store.results(doc["run_id"], limit=10).items
        assert sorted(r.metrics["v"]["value"] for r in rows) == [1.0, 2.0, 3.0]
        for r in rows:
            assert r.info["output_tail"] == f"v: {r.case['n']}\n\u2400junk\n"
            assert r.info["stored_as"] == [f"line {r.seq}.info.output_tail: 1 NUL (U+0000) stored as U+2400 (\u2400)"]
    finally:
        store.close()


def test_a_parse_error_is_a_failed_case_not_data_the_store_lost(bed: tuple[Orch, SshdHost], tmp_path: Path) -> None:
    orch, _ = bed
    suites = _suite(tmp_path, "oops", OOPS_TOOL, [1, 2, 3, 4])
    res = orch("run", "oops", "--hosts", "ct200", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-3000:]  # a partial run
    doc = json.loads(res.stdout)
    assert doc["status"] == "partial", doc
    [h] = doc["hosts"]
    assert (h["host"], h["status"], h["results"], h["errors"]) == ("gpu-a", "partial", 3, 1), h
    assert h["error"].startswith("1 case failed: parser regex found no match"), h
    assert "stored" not in h["error"], h  # nothing said to be lost: the store holds every line the agent wrote
    text = orch("runs", "show", doc["run_id"])
    assert "parser regex found no match" in text.stdout, text.stdout
    assert "the store does not hold" not in text.stdout + text.stderr


GATED_TOOL = """\
import os, sys, time
n = int(sys.argv[1])
deadline = time.time() + 300
while n >= 2 and not os.path.exists(GATE) and time.time() < deadline:  # case 2 on waits for the test
    time.sleep(0.05)
print('v: %d' % n)
"""


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_a_spool_changed_mid_run_is_one_error_naming_it_and_resume_stores_nothing_of_it(
    bed: tuple[Orch, SshdHost], tmp_path: Path, how: str
) -> None:
    """A tester truncated the spool in place while a suite ran (``head -n 3 events.jsonl > t; cat t >
    events.jsonl``): orch ingested a half line, five seq mismatches and 'the done line was not stored'. Now the
    agent's follow sees the file shrink (or rewritten, or replaced: ``mv t events.jsonl``) and the host fails with
    that one error; the lines stored before are kept.

    Then ``--resume``: the worker went on numbering its lines from what was left of the file (seq 0 again), and
    resume, following from the stored position, stored them in place of the lost ones — real results, at wrong
    positions, with the lines between them gone. Now the worker refuses to write to a spool changed under it and
    resume names that, storing nothing more. No timing: the tool's case 2 waits for a gate file the test creates
    after the change."""
    orch, host = bed
    gate = tmp_path / "gate"
    suites = _suite(tmp_path, "gated", GATED_TOOL.replace("GATE", repr(str(gate))), [1, 2, 3, 4])
    proc = orch.popen("run", "gated", "--hosts", "ct200", "--suite-dir", str(suites), "--json")
    try:
        spool = _case_one_stored(orch, host)
        head = b"".join(spool.read_bytes().splitlines(keepends=True)[:3])
        (tmp_path / "t").write_bytes(head)
        if how == "in place":
            with open(spool, "r+b") as f:  # cat t > events.jsonl: the same file, cut and written again
                f.truncate(0)
                f.write(head)
        else:
            (tmp_path / "t").replace(spool)  # mv t events.jsonl (one filesystem: the test bed's home)
        gate.touch()
        out, err = proc.communicate(timeout=300)
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err[-3000:]
    doc = json.loads(out)
    [h] = doc["hosts"]
    assert h["status"] == "failed" and (h["results"], h["errors"]) == (1, 0), h
    assert h["error"].startswith(f"the spool {spool} was "), h["error"]
    if how == "in place":
        assert "truncated (to " in h["error"] or "rewritten in place" in h["error"], h["error"]
    else:
        assert "replaced (another file is at its path now)" in h["error"], h["error"]
    assert "on the host while orch followed it" in h["error"]
    assert "the 4 lines already stored are kept; nothing after them is trusted" in h["error"], h["error"]
    for word in ("malformed", "claims seq", "done line was not stored"):
        assert word not in h["error"]

    again = orch("run", "--resume", doc["run_id"], "--suite-dir", str(suites), "--json", timeout=300)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    [h] = json.loads(again.stdout)["hosts"]
    assert h["status"] == "failed" and (h["results"], h["errors"]) == (1, 0), h
    said = "truncated by something other than the agent" if how == "in place" else "removed or replaced by something"
    assert h["error"].startswith(f"the agent worker stopped: cannot write {spool}: the spool was {said}"), h["error"]
    assert h["hint"].startswith("something on the host wrote to the run's events.jsonl"), h
    store = Store.from_url(orch.db_url)
    try:
        assert [(r.seq, r.case["n"]) for r in store.results(doc["run_id"], limit=10).items] == [(2, 1)]
        assert store.last_seq(doc["run_id"], "gpu-a") == 3
    finally:
        store.close()


def test_resume_after_the_spool_was_cut_once_the_worker_had_finished_names_the_change(
    bed: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    """orch is killed mid-run (the worker goes on, as it does when SSH drops), the worker finishes, and then
    the spool is cut to fewer lines than orch stored (``head -n 2 events.jsonl > t; cat t > events.jsonl``).
    ``--resume`` said 'the agent worker exited without finishing and recorded no reason ... the OOM killer';
    now the agent's follow sees a spool shorter than orch's position with no worker left, and the host's one
    error names the change and both counts. Nothing more is stored. No timing: case 2 waits for a gate file."""
    orch, host = bed
    gate = tmp_path / "gate"
    suites = _suite(tmp_path, "gated", GATED_TOOL.replace("GATE", repr(str(gate))), [1, 2, 3])
    proc = orch.popen("run", "gated", "--hosts", "ct200", "--suite-dir", str(suites), "--json")
    try:
        spool = _case_one_stored(orch, host)
    finally:
        proc.kill()  # orch dies without a word to the host; the detached worker goes on
        proc.communicate(timeout=60)
        gate.touch()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and b'"type":"done"' not in spool.read_bytes():
        time.sleep(0.2)
    lines = spool.read_bytes().splitlines(keepends=True)
    assert b'"type":"done"' in lines[-1], "the worker did not finish within 180 s"
    run_id = spool.parent.parent.name
    assert _stored_last_seq(orch, spool) == 3
    with open(spool, "r+b") as f:  # head -n 2 events.jsonl > t; cat t > events.jsonl
        f.truncate(0)
        f.write(b"".join(lines[:2]))

    again = orch("run", "--resume", run_id, "--suite-dir", str(suites), "--json", timeout=300)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    [h] = json.loads(again.stdout)["hosts"]
    assert h["status"] == "failed" and (h["results"], h["errors"]) == (1, 0), h
    assert h["error"] == (
        f"the spool {spool} has 2 lines, orch had stored 4: it was cut or rewritten on the host after orch read it; "
        "the 4 lines already stored are kept; nothing after them is trusted"
    ), h["error"]
    assert h["hint"].startswith("something on the host wrote to the run's events.jsonl"), h
    assert "OOM" not in h["error"] + h["hint"]
    store = Store.from_url(orch.db_url)
    try:
        assert [(r.seq, r.case["n"]) for r in store.results(run_id, limit=10).items] == [(2, 1)]
        assert store.last_seq(run_id, "gpu-a") == 3
    finally:
        store.close()


def _case_one_stored(orch: Orch, host: SshdHost) -> Path:
    """gpu-a's spool of the running gated suite once case 1's result is stored (hello, case_start, result, and case
    2's case_start written; the store's last_seq at 3). Fails the test after 180 s."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = list((host.home / ".orch" / "runs").glob("*/gpu-a/events.jsonl"))
        if found and len(found[0].read_bytes().splitlines()) >= 4 and _stored_last_seq(orch, found[0]) >= 3:
            return found[0]
        time.sleep(0.2)
    raise AssertionError("case 1 was not stored within 180 s")


def _stored_last_seq(orch: Orch, spool: Path) -> int:
    store = Store.from_url(orch.db_url)
    try:
        return store.last_seq(spool.parent.parent.name, "gpu-a")
    except Exception:  # noqa: BLE001 - the run is not stored yet
        return -1
    finally:
        store.close()
