"""A run whose spool was cut on the host (``head -n 2 events.jsonl > t; cat t > events.jsonl``) after orch stored
more lines than are left, then stopped: by ``orch cancel`` and by Ctrl-C (SIGINT) to ``orch run``. Before, the
agent's cancel appended ``done`` numbered from what was left (seq 2, a position orch had stored as a result), and
the Ctrl-C path did not pass the stored position at all. orch now passes its stored position on both paths and the
host says the spool changed; no ``done`` goes in, and both paths store the host ``failed`` (the Ctrl-C path stored
it ``cancelled`` while ``orch cancel`` reported it ``failed``). The suite's first case ends at once, its second
sleeps until cancelled (tests/e2e/cancel_counts.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cancel_counts import counts_run, cut_spool, spool_cut_text, stored_four
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]


def test_cancel_writes_no_done_into_a_spool_cut_below_the_stored_lines(sshd_bed: SshdBed, tmp_path: Path) -> None:
    with counts_run(sshd_bed, tmp_path) as bed:
        run_id = bed.wait(stored_four, "the first case's result and the second's start stored")
        bed.proc.kill()  # the orch that started the run dies; the worker goes on sleeping
        bed.proc.communicate()
        spool, lines = cut_spool(bed.host, run_id, keep=2)
        assert len(lines) == 4, lines
        res = bed.orch("cancel", run_id, "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
        assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]  # the host's stop failed: exit 1
        [h] = json.loads(res.stdout)["hosts"]
        assert h["status"] == "failed" and (h["results"], h["errors"]) == (1, 0), h
        assert h["error"].endswith(spool_cut_text(spool, 2, 4)), h
        rec = bed.store.get_run(run_id).host_run("gpu-a")  # stored as reported, and as the Ctrl-C path stores it
        assert rec is not None and (rec.status, rec.error) == ("failed", h["error"]), rec
        assert "not confirmed" not in rec.error  # the worker was stopped: no second cancel is invited
        assert spool.read_bytes() == b"".join(lines[:2])  # no done numbered from what was left
        assert bed.store.last_seq(run_id, "gpu-a") == 3


def _followers(run_id: str, worker: int) -> list[int]:
    """The pids of the agent processes on the (local) host that stream ``run_id``'s spool to orch: the run's
    agent processes outside the worker's session (the worker's pid is its session id)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,sid=,args="], capture_output=True, text=True, check=True).stdout
    pids = []
    for line in out.splitlines():
        pid, sid, args = line.split(None, 2)
        words = args.split()
        if run_id in args and int(sid) != worker and ("--follow" in words or "follow" in words):
            pids.append(int(pid))
    return pids


def test_ctrl_c_passes_the_stored_lines_and_names_a_spool_cut_on_the_host(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """orch run's Ctrl-C path sends ``agent cancel --stored N`` as ``orch cancel`` does. The follower on the host
    is stopped (SIGSTOP) before the cut, so that orch run's own follow does not see the cut first; its silence
    limit is raised so that nothing else ends the follow before the SIGINT."""
    stopped: list[int] = []
    with counts_run(sshd_bed, tmp_path, new_session=True, env={"ORCH_FOLLOWER_SILENT_S": "3600"}) as bed:
        try:
            run_id = bed.wait(stored_four, "the first case's result and the second's start stored")
            run_dir = bed.host.home / ".orch" / "runs" / run_id / "gpu-a"
            worker = int((run_dir / "pid").read_text())
            stopped = wait_for(lambda: _followers(run_id, worker), timeout_s=60, what="the run's follower on the host")
            for pid in stopped:
                os.kill(pid, signal.SIGSTOP)
            spool, lines = cut_spool(bed.host, run_id, keep=2)
            assert len(lines) == 4, lines
            os.killpg(bed.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: orch's whole process group
            _, err = bed.proc.communicate(timeout=scaled(240))
            assert bed.proc.returncode != 0, err[-3000:]
            rec = bed.store.get_run(run_id).host_run("gpu-a")
            assert rec is not None and rec.status == "failed" and (rec.results, rec.errors) == (1, 0), rec
            assert rec.error is not None and rec.error.endswith(spool_cut_text(spool, 2, 4)), rec.error
            assert "not confirmed" not in rec.error, rec.error  # the worker was stopped: only the done is refused
            assert spool.read_bytes() == b"".join(lines[:2])  # no done numbered from what was left
            assert bed.store.last_seq(run_id, "gpu-a") == 3
        finally:
            for pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
