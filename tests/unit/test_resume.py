"""orchestrator.resume: what ``orch run --resume`` and a cancel decide per run and per host — exact texts and
statuses (the e2e tests in test_run_lifecycle.py, test_ingest_ssh.py and test_run_ssh.py drive the same decisions
through real sshd, where mutmut cannot see them)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from orchestrator.errors import ConnectError, HostError, OrchError
from orchestrator.resume import (
    AGENT_UNKNOWN_RUN,
    CANCELLED_BY_USER,
    FINAL_RUN_STATUSES,
    HOST_ENDED_STATUSES,
    STOP_UNCONFIRMED,
    CancelVerdict,
    Lost,
    Reattach,
    Refusal,
    StartNow,
    cancel_refusal,
    cancel_verdict,
    dropped_error,
    host_step,
    interrupt_action,
    interrupted_host_error,
    lost_connection_error,
    needs_remote_stop,
    reattach_plan,
    resume_fields,
    resume_refusal,
    run_status,
    stop_unconfirmed,
)
from orchestrator.store.records import HostRunState

RUN = "01a22cce-123d-7432-b20d-4202f905f6cd"  # short id: f905f6cd
SHORT = "f905f6cd"


def test_the_status_sets_and_texts() -> None:
    assert FINAL_RUN_STATUSES == {"completed", "partial", "failed", "cancelled"}
    assert HOST_ENDED_STATUSES == {"completed", "partial", "failed"}
    assert CANCELLED_BY_USER == "cancelled by the user"
    assert AGENT_UNKNOWN_RUN == "unknown"  # what the runner sets for the agent's exit 4 (no such run)


# --- resume: refused or not -------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["running", "pending"])
@pytest.mark.parametrize("open_hosts", [[], ["gpu-a"]])
def test_a_run_not_finished_is_resumed(status: str, open_hosts: list[str]) -> None:
    assert resume_refusal(RUN, status, open_hosts) is None


@pytest.mark.parametrize("status", ["completed", "partial", "failed"])
def test_a_finished_run_with_a_host_whose_done_line_is_missing_is_resumed(status: str) -> None:
    assert resume_refusal(RUN, status, ["gpu-b"]) is None
    assert resume_refusal(RUN, status, ["gpu-a", "gpu-b"]) is None


@pytest.mark.parametrize("status", ["completed", "partial", "failed"])
def test_a_finished_run_whose_every_done_line_is_stored_is_refused(status: str) -> None:
    assert resume_refusal(RUN, status, []) == Refusal(
        f"run {SHORT} already finished ({status}): every host's done line is stored; there is nothing to resume",
        f"orch runs show {SHORT}",
    )


def test_a_cancelled_run_is_resumed_to_collect_while_a_hosts_done_line_is_missing() -> None:
    assert resume_refusal(RUN, "cancelled", ["gpu-a"]) is None
    assert resume_refusal(RUN, "cancelled", ["gpu-a", "gpu-b"]) is None


def test_a_cancelled_run_whose_every_done_line_is_stored_is_refused() -> None:
    assert resume_refusal(RUN, "cancelled", []) == Refusal(
        f"run {SHORT} already finished (cancelled): it was cancelled; there is nothing to resume",
        f"orch runs show {SHORT}",
    )


# --- cancel: refused or not ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["running", "pending"])
def test_a_run_not_finished_is_cancelled(status: str) -> None:
    assert cancel_refusal(RUN, status) is None


@pytest.mark.parametrize("status", ["completed", "partial", "failed", "cancelled"])
def test_cancel_of_a_finished_run_is_refused(status: str) -> None:
    assert cancel_refusal(RUN, status) == Refusal(
        f"run {SHORT} already finished ({status}); there is nothing to cancel", f"orch runs show {SHORT}"
    )


# --- the resumed request --------------------------------------------------------------------------------------


def test_the_resumed_request_is_what_the_store_recorded() -> None:
    sets = {"M": "1,2", "dtype": "fp8"}
    case = {"M": 2}
    fields = resume_fields(
        {"sets": sets, "repeat": 7, "seed": 11, "preset": "tiny"},
        {"replays": "abc", "replayed_cases": [case], "orch": {"version": "1"}},
    )
    assert fields == {"sets": sets, "repeat": 7, "seed": 11, "replays": "abc", "only_cases": ({"M": 2},)}
    assert fields["sets"] is not sets  # a copy: the request never aliases the stored params
    assert type(fields["only_cases"]) is tuple


@pytest.mark.parametrize(
    ("params", "info"),
    [(None, None), ({}, {}), ({"sets": None, "repeat": None, "seed": None}, {"replays": None, "replayed_cases": None})],
)
def test_missing_or_null_stored_values_are_a_plain_runs_defaults(params: dict[str, None] | None,
                                                                 info: dict[str, None] | None) -> None:  # fmt: skip
    fields = resume_fields(params, info)
    assert fields == {"sets": {}, "repeat": None, "seed": None, "replays": None, "only_cases": ()}
    assert type(fields["sets"]) is dict and type(fields["only_cases"]) is tuple


# --- per host: what to do -----------------------------------------------------------------------------------------


def _state(status: str = "running", *, done: bool = False, started: bool = True) -> HostRunState:
    return HostRunState(host="gpu-a", status=status, last_seq=4, done=done, started=started)


@pytest.mark.parametrize("status", ["running", "completed", "failed", "cancelled"])
def test_a_new_run_follows_every_host(status: str) -> None:
    assert host_step(None, resume=False) == "follow"
    assert host_step(_state(status, done=True), resume=False) == "follow"
    assert host_step(_state(status, done=False), resume=False) == "follow"


def test_on_resume_a_host_without_its_done_line_is_followed() -> None:
    assert host_step(None, resume=True) == "follow"  # no host run stored: started now
    assert host_step(_state("running"), resume=True) == "follow"
    assert host_step(_state("failed"), resume=True) == "follow"  # lost, its done line never came


def test_on_resume_a_host_whose_done_line_is_stored_is_judged_or_finished() -> None:
    assert host_step(_state("running", done=True), resume=True) == "finish"  # orch stopped before judging it
    for status in ("completed", "failed", "partial", "cancelled", "pending"):
        assert host_step(_state(status, done=True), resume=True) == "judge"


@pytest.mark.parametrize("state", ["running", "finished", "None", "exited"])
def test_a_run_the_agent_knows_is_followed_from_the_first_line_not_stored(state: str) -> None:
    for started in (True, False):
        plan = reattach_plan(state, started=started, last_seq=41, run_id=RUN, host="gpu-a")
        assert plan == Reattach(42)
        assert isinstance(plan, Reattach) and plan.detail == "collecting from line 42"
    assert reattach_plan(state, started=True, last_seq=-1, run_id=RUN, host="gpu-a") == Reattach(0)


def test_a_started_run_whose_spool_is_gone_is_lost_with_the_count_stored_and_the_import_hint() -> None:
    plan = reattach_plan("unknown", started=True, last_seq=41, run_id=RUN, host="gpu-b", spool="~/x/events.jsonl")
    assert plan == Lost(
        f"the run's spool ~/x/events.jsonl is gone from the host (moved or deleted; no run {RUN} under its orch "
        "home): the lines after the 42 stored cannot be collected",
        "if the spool was copied off the host, orch runs import SPOOL --host gpu-b",
    )
    assert isinstance(plan, Lost)
    err = plan.error("gpu-b")
    assert type(err) is HostError and err.host == "gpu-b"
    assert err.message == f"gpu-b: {plan.message}" and err.hint == plan.hint


def test_a_run_never_started_on_the_host_is_started_now() -> None:
    assert reattach_plan("unknown", started=False, last_seq=-1, run_id=RUN, host="gpu-a") == StartNow(0)
    assert reattach_plan("unknown", started=False, last_seq=3, run_id=RUN, host="gpu-a") == StartNow(4)


# --- a connection lost for good -----------------------------------------------------------------------------------


def test_a_dropped_connection_of_a_started_host_names_the_resume() -> None:
    exc = ConnectError("h9", "closed", "the SSH session dropped: no exit status came back")
    out = dropped_error(exc, host="h9", started=True, run_id=RUN)
    assert type(out) is HostError and out.host == "h9"
    assert out.message == "h9: the SSH session dropped: no exit status came back; its agent was started and may " \
        "still run there"  # fmt: skip
    assert out.hint == "go on with: orch run --resume f905f6cd"


def test_a_dropped_connection_of_a_host_never_started_says_so() -> None:
    out = dropped_error(ConnectError("h9", "closed", "connection lost"), host="h9", started=False, run_id=RUN)
    assert out.message == "h9: connection lost; nothing was started there"
    assert out.hint == "start it again: orch run --resume f905f6cd when the run was stored, else the same orch run"


@pytest.mark.parametrize("exc", [ConnectError("h9", "refused", "connection refused"), HostError("h9", "GPUs busy"),
                                 OrchError("other")])  # fmt: skip
def test_other_errors_are_left_alone(exc: OrchError) -> None:
    for started in (True, False):
        assert dropped_error(exc, host="h9", started=started, run_id=RUN) is exc


def test_every_reconnect_failed_says_whether_the_run_goes_on() -> None:
    going = lost_connection_error("connection refused", host="h9", start_answered=True, run_id=RUN)
    assert type(going) is HostError and going.host == "h9"
    assert going.message == ("h9: lost the connection and could not reattach: connection refused; the run goes on "
                             "there (its agent is detached)")  # fmt: skip
    assert going.hint == "collect it later with: orch run --resume f905f6cd"
    unknown = lost_connection_error("timed out", host="h9", start_answered=False, run_id=RUN)
    assert unknown.message == ("h9: lost the connection and could not reattach: timed out; whether its run started "
                               "there is not known")  # fmt: skip
    assert unknown.hint == "collect it later with: orch run --resume f905f6cd"


# --- the run's status ---------------------------------------------------------------------------------------------


@dataclass
class _Out:
    status: str
    results: int = 0


@pytest.mark.parametrize(
    ("hosts", "status"),
    [
        ([_Out("completed", 3)], "completed"),
        ([_Out("completed", 3), _Out("completed", 0)], "completed"),
        ([], "completed"),
        ([_Out("completed", 3), _Out("cancelled", 1)], "cancelled"),
        ([_Out("failed", 0), _Out("cancelled", 0)], "cancelled"),
        ([_Out("failed", 0)], "failed"),
        ([_Out("failed", 0), _Out("failed", 0)], "failed"),
        ([_Out("failed", 2)], "partial"),  # a host that failed after some results
        ([_Out("failed", 0), _Out("completed", 5)], "partial"),
        ([_Out("partial", 4), _Out("completed", 5)], "partial"),
        ([_Out("partial", 0)], "partial"),
    ],
)
def test_run_status(hosts: list[_Out], status: str) -> None:
    assert run_status(hosts) == status


# --- cancel per host ----------------------------------------------------------------------------------------------


def test_the_remote_stop_goes_only_where_the_agent_was_started() -> None:
    assert needs_remote_stop(deployed=True, started=True) is True
    assert needs_remote_stop(deployed=True, started=False) is False
    assert needs_remote_stop(deployed=False, started=True) is False
    assert needs_remote_stop(deployed=False, started=False) is False


@pytest.mark.parametrize("stored", [None, "running", "pending", "cancelled"])
def test_a_host_still_running_is_stored_cancelled(stored: str | None) -> None:
    assert cancel_verdict(stored, None, RUN) == CancelVerdict(store=True, stored_error=None, status="cancelled",
                                                              error=None)  # fmt: skip
    v = cancel_verdict(stored, "gpu-a: connection refused", RUN)
    assert v == CancelVerdict(
        store=True, stored_error=interrupted_host_error(RUN, "gpu-a: connection refused"), status="failed",
        error="gpu-a: connection refused",
    )  # fmt: skip
    # a stop that failed is noted as not confirmed: orch cancel may send it again (it was refused as finished)
    assert stop_unconfirmed([v.stored_error]) and cancel_refusal(RUN, "cancelled", unconfirmed=True) is None


@pytest.mark.parametrize("stored", [None, "running", "cancelled"])
def test_a_spool_cut_on_the_host_is_stored_and_reported_failed_without_inviting_another_cancel(
    stored: str | None,
) -> None:
    cut = "gpu-a: the spool has 2 lines, fewer than the 4 orch stored"
    v = cancel_verdict(stored, cut, RUN, spool_cut=True)
    said = f"{CANCELLED_BY_USER}; cancel failed: {cut}"
    assert v == CancelVerdict(store=True, stored_error=said, status="failed", error=said, stored_status="failed")
    assert not stop_unconfirmed([v.stored_error])  # the worker was stopped: a second cancel finds the same spool


@pytest.mark.parametrize("stored", ["completed", "partial", "failed"])
def test_a_host_that_already_ended_keeps_its_verdict(stored: str) -> None:
    assert cancel_verdict(stored, None, RUN) == CancelVerdict(store=False, stored_error=None, status="cancelled",
                                                              error=None)  # fmt: skip
    assert cancel_verdict(stored, "boom", RUN) == CancelVerdict(
        store=False, stored_error=interrupted_host_error(RUN, "boom"), status="failed", error="boom"
    )


# --- Ctrl-C: each press, what an interrupted host run stores, a stop that was not confirmed ----------------------


def test_the_first_ctrl_c_cancels_the_second_is_absorbed_a_third_and_later_abandon_waiting() -> None:
    assert [interrupt_action(n) for n in (0, 1, 2, 3, 4, 10)] == [
        "cancel", "cancel", "absorb", "abandon", "abandon", "abandon"]


def test_a_host_run_whose_stop_was_confirmed_stores_cancelled_by_the_user() -> None:
    assert interrupted_host_error(RUN, None) == "cancelled by the user"


def test_a_host_run_whose_stop_was_not_confirmed_says_why_and_the_command_that_stops_it() -> None:
    assert STOP_UNCONFIRMED == "the remote stop was not confirmed"
    assert interrupted_host_error(RUN, "no answer within 40 s") == (
        "cancelled by the user; the remote stop was not confirmed (no answer within 40 s): run orch cancel f905f6cd"
    )


def test_stop_unconfirmed_finds_the_note_in_any_host_runs_error() -> None:
    noted = interrupted_host_error(RUN, "gpu-b: connection refused")
    assert stop_unconfirmed([None, "cancelled by the user", noted]) is True
    assert stop_unconfirmed([noted]) is True
    assert stop_unconfirmed([f"earlier error\n{noted}"]) is True  # errors are appended to what was stored
    assert stop_unconfirmed([None, "cancelled by the user", "cancel failed: refused"]) is False
    assert stop_unconfirmed([]) is False


def test_a_cancelled_run_with_a_stop_not_confirmed_may_be_cancelled_again() -> None:
    assert cancel_refusal(RUN, "cancelled", unconfirmed=True) is None
    assert cancel_refusal(RUN, "running", unconfirmed=True) is None
    for status in ("completed", "partial", "failed"):  # only a cancel left a stop unconfirmed
        assert cancel_refusal(RUN, status, unconfirmed=True) == Refusal(
            f"run {SHORT} already finished ({status}); there is nothing to cancel", f"orch runs show {SHORT}"
        )
    assert cancel_refusal(RUN, "cancelled", unconfirmed=False) is not None
