"""A worker stopped by a SIGTERM from outside orch (agent worker.py: ``done`` failed, ``stopped_by: "sigterm"``)
is a failed host with the hint to rerun, never a cancel — pure: ``done_record`` and ``host_verdict``."""

from __future__ import annotations

from orchestrator.ingest import TERMINATED_HINT, done_record, host_verdict
from orchestrator.protocol import Event

REASON = "the agent worker was terminated by SIGTERM from outside orch (not orch cancel: an admin's kill, ...)"


def _done(**data: object) -> Event:
    return Event(seq=5, type="done", ts=1.0, v=1, data={"counts": {"lines": 5, "results": 3, "errors": 0}, **data})


def test_a_terminated_worker_is_a_failed_host_with_the_rerun_hint() -> None:
    rec = done_record(_done(status="failed", reason=REASON, stopped_by="sigterm"))
    assert rec["stopped_by"] == "sigterm" and rec["reason"] == REASON
    v = host_verdict(rec, results=3, errors=0)
    assert (v.status, v.error, v.hint) == ("failed", REASON, TERMINATED_HINT)
    assert "--resume cannot continue a terminated worker: rerun" in TERMINATED_HINT


def test_a_cancel_and_another_reason_keep_their_verdicts() -> None:
    assert host_verdict(done_record(_done(status="cancelled")), results=3, errors=0).status == "cancelled"
    other = host_verdict(done_record(_done(status="failed", reason="cannot write x: ENOSPC")), results=3, errors=0)
    assert (other.status, other.hint) == ("failed", None)
    assert "stopped_by" not in done_record(_done(status="failed", stopped_by="something else"))
