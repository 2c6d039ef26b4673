"""A run's life over real sshd with command suites whose output is known in advance: what the runner derives and
stores (the plateau of a batch sweep, next to the spec, preset and GPU spec recorded at start), and a run whose
orch died, collected by ``orch run --resume`` — on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.killed_run import killed_after_first_result
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

# time_ms = min(M, 8): slower with M up to 8, flat from there — the plateau starts at M=8 (10% band).
STEP_SUITE = """\
name: step-sweep
description: a batch sweep whose time per call stops growing at M=8
command: ["/bin/sh", "-c", "m=$1; if [ $m -gt 8 ]; then m=8; fi; echo \\"time: $m\\"", "sh", "{M}"]
params:
  M: {type: list, default: [1, 2, 4, 8, 16, 32, 64], help: "batch size"}
parser: {name: regex, pattern: 'time: (?P<time_ms>[0-9.]+)'}
metrics:
  time_ms: {path: time_ms, unit: ms}
"""


def test_the_stored_plateau_is_where_the_measured_times_flatten(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """Issue 19: the plateau the runner stores was never read by a test (a tiny CPU moe-sweep's times are too
    noisy to pin it)."""
    orch, _ = two_hosts
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "step.yaml").write_text(STEP_SUITE)
    doc = orch.json("run", "step-sweep", "--hosts", "ct200", "--suite-dir", str(suites))
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    rows = store.results(doc["run_id"], limit=100).items
    assert sorted((r.case["M"], r.metrics["time_ms"]["value"]) for r in rows) == [
        (1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0), (16, 8.0), (32, 8.0), (64, 8.0)
    ]  # fmt: skip
    hr = store.get_run(doc["run_id"]).host_run("gpu-a")
    assert hr is not None
    assert hr.info["plateau"] == {"plateau_from_m": 8, "compute_bound_from_m": None, "level_ms": 8.0,
                                  "metric": "time_ms", "tol": 0.10, "reason": None}  # fmt: skip
    assert (hr.info["reconnects"], hr.info["preset"], hr.info["gpu_spec"]) == (0, None, None)
    assert [c["M"] for c in hr.info["spec"]["cases"]] == [1, 2, 4, 8, 16, 32, 64]
    store.close()


# Each case takes 2 s (a sleeping command): a run of 6 cases is still going when its first result is stored.
SLOW_SUITE = """\
name: slow-steps
description: six cases of two seconds each
command: ["/bin/sh", "-c", "sleep 2; echo \\"step: $1\\"", "sh", "{step}"]
params:
  step: {type: list, default: [1, 2, 3, 4, 5, 6], help: "case number"}
parser: {name: regex, pattern: 'step: (?P<step>[0-9]+)'}
metrics:
  step: {path: step, unit: count}
"""


def test_resume_collects_an_unfinished_run_once(two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    """Issue 19: no test resumed an unfinished run. orch dies mid-run; the agent goes on on the host;
    ``orch run --resume`` follows the spool from the last stored line to the end: each case exactly once, the
    agent not started again."""
    orch, hosts = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slow.yaml").write_text(SLOW_SUITE)
    store = Store.from_url(orch.db_url)
    run_id = killed_after_first_result(orch, store, "slow-steps", "--hosts", "gpu-a", "--suite-dir", str(suites),
                                       "--timeout", str(scaled(30)))  # fmt: skip
    before = store.get_run(run_id)
    assert before.status == "running" and 1 <= before.results < 6, before

    # without --suite-dir the user suite is unknown: exit 2 before any host is touched, naming the suite file
    res = orch("run", "--resume", run_id, "--timeout", str(scaled(30)), timeout=scaled(120))
    assert res.returncode == 2, res.stdout + res.stderr
    said = " ".join(res.stderr.split())  # free text wraps at words to the width (a path is never broken)
    assert f"error: run {run_id[-8:]} is of suite 'slow-steps', which is not known without its suite file" in said
    assert (
        f"hint: the run was started from {(suites / 'slow.yaml').resolve()}: pass --suite-dir {suites.resolve()} "
        "(or set ORCH_SUITE_DIR); suites known now: "
    ) in said, res.stderr
    after = store.get_run(run_id)
    assert (after.status, [(h.host, h.status) for h in after.host_runs]) == (
        "running", [(h.host, h.status) for h in before.host_runs]
    )

    doc = orch.json("run", "--resume", run_id, "--suite-dir", str(suites), "--timeout", str(scaled(30)),
                    timeout=scaled(240))  # fmt: skip
    assert doc["run_id"] == run_id and doc["status"] == "completed", doc
    assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [("gpu-a", "completed", 6)]
    events = next((hosts[0].home / ".orch" / "runs" / run_id).rglob("events.jsonl"))
    lines = events.read_text().splitlines()
    assert sum('"type":"hello"' in x.replace(" ", "") for x in lines) == 1  # resumed, not started again
    detail = store.get_run(run_id)
    hr = detail.host_run("gpu-a")
    assert hr is not None and (hr.status, hr.results, hr.errors, hr.last_seq) == ("completed", 6, 0, len(lines) - 1)
    assert (detail.status, detail.results) == ("completed", 6)
    assert sorted(r.case["step"] for r in store.results(run_id, limit=100).items) == [1, 2, 3, 4, 5, 6]
    # importing the spool needs the suite too: exit 2 naming the spool and --suite-dir
    res = orch("runs", "import", str(events), "--host", "gpu-a", timeout=scaled(120))
    assert res.returncode == 2, res.stdout + res.stderr
    said = " ".join(res.stderr.split())
    assert f"error: {events}:1: the hello names suite 'slow-steps', unknown to orch here" in said
    assert "--suite-dir DIR (or ORCH_SUITE_DIR)" in said and "Traceback" not in res.stderr
    store.close()


# case 1 waits for orch to be gone (the test's flag file), then prints past what a result line carries (its output
# stays on the host, fetched to be parsed); case 2 then appends a figure to case 1's file on the host
CHANGED_SUITE = """\
name: changed-output
description: case 2 changes case 1's kept output on the host before orch fetches it
command: ["/bin/sh", "-c", "{script}", "sh", "{{k}}"]
params:
  k: {{type: list, default: [0, 1, 2], help: "case"}}
parser: {{name: regex, pattern: 't: (?P<t>[0-9.]+)'}}
metrics:
  t: {{unit: ms}}
"""
CHANGED_SCRIPT = (
    'if [ $1 = 0 ]; then echo \\"t: 0.5\\"; '
    'elif [ $1 = 1 ]; then while [ ! -e {flag} ]; do sleep 0.1; done; yes log | head -c 70000; echo \\"t: 1.5\\"; '
    'else for f in {home}/.orch/runs/*/gpu-a/outputs/1/*.stdout; do echo \\"t: 999\\" >> $f; done; '
    'echo \\"t: 2.5\\"; fi'
)


def test_an_output_changed_on_the_host_after_its_result_is_never_parsed(
    two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """Issue 10, a tester's case: the result line of case 1 describes its stdout (70 KB, sha256); orch dies
    before it fetches that file; case 2 appends ``t: 999`` to it; ``orch run --resume`` fetched the changed file
    and stored t = 999 for case 1, run completed, exit 0. Now the fetched file is checked against the result
    line's size and sha256: case 1 is an error naming both, never a figure, and the run is not completed."""
    orch, hosts = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    flag = tmp_path / "orch-is-gone"
    script = CHANGED_SCRIPT.format(home=hosts[0].home, flag=flag)
    (suites / "changed.yaml").write_text(CHANGED_SUITE.format(script=script))
    store = Store.from_url(orch.db_url)
    run_id = killed_after_first_result(orch, store, "changed-output", "--hosts", "gpu-a", "--suite-dir",
                                       str(suites), "--timeout", str(scaled(30)))  # fmt: skip
    flag.touch()
    spool = next((hosts[0].home / ".orch" / "runs" / run_id).rglob("events.jsonl"))
    wait_for(lambda: '"type": "done"' in spool.read_text().replace('"type":"done"', '"type": "done"'),
             timeout_s=scaled(120), what="the agent's done line")  # fmt: skip
    res = orch("run", "--resume", run_id, "--suite-dir", str(suites), "--timeout", str(scaled(30)),
               timeout=scaled(240))  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    rows = {r.case["k"]: r for r in store.results(run_id, limit=100).items}
    assert {k: r.status for k, r in rows.items()} == {0: "ok", 1: "error", 2: "ok"}, rows
    assert rows[0].metrics["t"]["value"] == 0.5 and rows[2].metrics["t"]["value"] == 2.5
    assert "t" not in rows[1].metrics
    err = rows[1].error or ""
    assert "case 1 run 0 stdout: the file on the host is 70014 bytes, sha256 " in err, err
    assert "; the result line says 70007 bytes, sha256 " in err and "changed on the host after the result" in err
    assert store.get_run(run_id).status != "completed"
    store.close()


# case 1 sleeps 6 s: long enough to append a line to the spool between its case_start and its result
APPENDED_SUITE = """\
name: appended
description: three cases sleeping 0, 6 and 0 s
command: ["/bin/sh", "-c", "sleep $1; echo 'v: 1'", "sh", "{s}"]
params:
  s: {type: list, default: [0, 6, 0], help: "seconds to sleep"}
parser: {name: regex, pattern: 'v: (?P<v>[0-9]+)'}
metrics:
  v: {path: v, unit: count}
"""


def _worker(run_id: str) -> int | None:
    """The pid of run ``run_id``'s worker on gpu-a: the agent process leading its own session in the run's
    directory on the host (as tests/e2e/test_worker_signals.py finds it)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            session = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3])
        except (OSError, IndexError, ValueError):
            continue
        if cwd.endswith(f"/runs/{run_id}/gpu-a") and session == int(entry.name):
            return int(entry.name)
    return None


@pytest.mark.parametrize("resumed", [False, True])
def test_a_live_run_and_the_import_of_its_spool_store_the_same_host_error(
    one_host_any_db: tuple[Orch, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resumed: bool
) -> None:
    """Issue 10: the same spool left its host run another ``error`` text live than imported into another store.
    A host-level error line is appended to the spool on the host while the run goes (as another writer may,
    under the spool's flock); ``resumed``: the worker is then stopped until the host fails, and the run is
    collected by ``orch run --resume`` once the worker went on (the failed attempt's error is history then). The
    host run's error and that of ``orch runs import`` of the same spool into a second store are the same text."""
    import fcntl
    import json
    import signal

    monkeypatch.setenv("ORCH_WORKER_STOPPED_S", str(scaled(3)) if resumed else "3600")
    orch, host = one_host_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "appended.yaml").write_text(APPENDED_SUITE)
    proc = orch.popen("run", "appended", "--hosts", "gpu-a", "--suite-dir", str(suites), "--timeout",
                      str(scaled(30)), "--json")  # fmt: skip
    worker = None
    try:
        runs = host.home / ".orch" / "runs"
        spool = wait_for(lambda: next(runs.rglob("events.jsonl"), None), timeout_s=scaled(120), what="the spool")
        assert isinstance(spool, Path)
        wait_for(lambda: len(spool.read_bytes().splitlines()) >= 4, timeout_s=scaled(120),
                 what="case 1's case_start")  # fmt: skip
        with spool.open("ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            seq = len(spool.read_bytes().splitlines())
            f.write(json.dumps({"v": 1, "seq": seq, "type": "error", "ts": time.time(),
                                "message": "nvidia-smi timed out"}).encode() + b"\n")  # fmt: skip
            fcntl.flock(f, fcntl.LOCK_UN)
        if resumed:
            worker = _worker(spool.parent.parent.name)
            assert worker is not None
            os.kill(worker, signal.SIGSTOP)
        out, err = proc.communicate(timeout=scaled(240))
    finally:
        if worker is not None:
            os.kill(worker, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err[-3000:]
    run_id = json.loads(out)["run_id"]
    if resumed:
        wait_for(lambda: b'"done"' in spool.read_bytes().splitlines()[-1], timeout_s=scaled(120),
                 what="the agent's done line")  # fmt: skip
        res = orch("run", "--resume", run_id, "--suite-dir", str(suites), "--timeout", str(scaled(30)),
                   timeout=scaled(240))  # fmt: skip
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stdout + res.stderr
    live = Store.from_url(orch.db_url)
    live_hr = live.get_run(run_id).host_run("gpu-a")
    live.close()
    second = Orch(orch.inventory, f"sqlite:///{tmp_path / 'second.db'}", tmp_path)
    assert second("db", "upgrade").returncode == 0
    res = second("runs", "import", str(spool), "--suite-dir", str(suites), "--json", timeout=scaled(120))
    assert res.returncode == 1, res.stdout + res.stderr
    imported = Store.from_url(second.db_url)
    imported_hr = imported.get_run(run_id).host_run("gpu-a")
    imported.close()
    assert live_hr is not None and imported_hr is not None
    assert (live_hr.status, imported_hr.status) == ("failed", "failed")
    assert live_hr.error == imported_hr.error, (live_hr.error, imported_hr.error)
    assert "the first error row: nvidia-smi timed out" in (live_hr.error or ""), live_hr.error
