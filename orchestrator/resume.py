"""What ``orch run --resume`` and a cancel decide — pure; ``runner`` does the I/O around these decisions.

Resume (``orch run --resume RUN_ID``):

1. :func:`resume_refusal`: a finished run whose every host's ``done`` line is stored is refused with the text and
   hint the user sees; anything else (a run still ``running``, or one ended ``partial``/``failed`` because a
   connection was lost, or ``cancelled`` before every stopped agent's lines were stored) is resumed — a cancelled
   one only to collect (no agent is started, and a host that cannot be reached stays ``cancelled``);
2. :func:`resume_fields`: the run's request rebuilt from what the store recorded at start (``params``: the
   ``--set`` values, ``--repeat``, ``--seed``; ``info``: the replayed run and cases of ``orch runs rerun``);
3. per host, :func:`host_step` from the stored state: ``judge`` (its done line is stored: the verdict is judged
   again from the store), ``finish`` (done stored while the host run still says ``running``: orch stopped between
   storing ``done`` and judging) or ``follow``;
4. a host to follow asks its agent ``status RUN_ID``; :func:`reattach_plan` turns the answer and the store's
   ``last_seq`` into :class:`Reattach` (follow from ``last_seq + 1``), :class:`Lost` (the store says the agent was
   started, but the host has no spool: the lines after the stored ones cannot be collected) or :class:`StartNow`
   (the agent was never started there: start it, from ``last_seq + 1``);
5. the run's status is :func:`run_status` of the hosts' outcomes.

A host whose connection drops for good is reported with :func:`dropped_error` / :func:`lost_connection_error`:
what state the host may be in and the exact command that goes on.

Cancel (Ctrl-C, ``orch cancel RUN_ID``): :func:`interrupt_action` says what each Ctrl-C of ``orch run`` does (the
first cancels, the second is absorbed, a third stops waiting for remote stops); :func:`interrupted_host_error` is
what a host run cancelled by Ctrl-C stores (naming a remote stop that was not confirmed, and the command that
sends it again); :func:`cancel_refusal` for a run already finished (a cancelled run whose remote stop was not
confirmed on some host, :func:`stop_unconfirmed`, may be cancelled again);
:func:`needs_remote_stop` says whether a host's agent has to be stopped (only where it was started);
:func:`cancel_verdict` what is stored and reported per host after ``agent cancel`` (a host run that already
ended keeps its verdict; a failed remote stop is named in the host run's error; a spool cut on the host below
what orch stored makes the host ``failed``); the run itself always ends ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from orchestrator.errors import ConnectError, HostError, OrchError
from orchestrator.store.compute import short_run_id

FINAL_RUN_STATUSES = frozenset({"completed", "partial", "failed", "cancelled"})
HOST_ENDED_STATUSES = frozenset({"completed", "partial", "failed"})  # a host run that cancel leaves as it is
CANCELLED_BY_USER = "cancelled by the user"  # the host run's error after Ctrl-C
AGENT_UNKNOWN_RUN = "unknown"  # the state the runner gives a host whose agent has no such run (exit 4)
STOP_UNCONFIRMED = "the remote stop was not confirmed"  # in a host run's error: orch cancel RUN may send it again

Step = Literal["follow", "finish", "judge"]
InterruptAction = Literal["cancel", "absorb", "abandon"]


@dataclass(frozen=True)
class Refusal:
    """Why a command leaves the run alone (a UsageError: exit 2): ``message`` and the ``hint`` shown under it."""

    message: str
    hint: str


class _StoredHost(Protocol):
    """What the store says of a host run (``store.records.HostRunState``)."""

    @property
    def status(self) -> str: ...

    @property
    def done(self) -> bool: ...


class _Outcome(Protocol):
    """A host's end of a run (``runner.HostOutcome``): its status and its stored result count."""

    @property
    def status(self) -> str: ...

    @property
    def results(self) -> int: ...


def resume_refusal(run_id: str, status: str, open_hosts: Sequence[str]) -> Refusal | None:
    """None when the run can be resumed; else why not. ``status``: the run's stored status; ``open_hosts``: the
    hosts whose ``done`` line is not stored. A run in a final status (cancelled too: its stopped agents' spools
    may hold lines written after orch stopped reading) is resumed only while some host's done line is missing."""
    if status not in FINAL_RUN_STATUSES or open_hosts:
        return None
    why = "it was cancelled" if status == "cancelled" else "every host's done line is stored"
    short = short_run_id(run_id)
    return Refusal(f"run {short} already finished ({status}): {why}; there is nothing to resume",
                   f"orch runs show {short}")  # fmt: skip


def cancel_refusal(run_id: str, status: str, *, unconfirmed: bool = False) -> Refusal | None:
    """None when the run can be cancelled: it is not in a final status, or it is ``cancelled`` while some host's
    remote stop was not confirmed (``unconfirmed``, see :func:`stop_unconfirmed`); else why not."""
    if status not in FINAL_RUN_STATUSES or (unconfirmed and status == "cancelled"):
        return None
    short = short_run_id(run_id)
    return Refusal(f"run {short} already finished ({status}); there is nothing to cancel", f"orch runs show {short}")


def resume_fields(params: Mapping[str, Any] | None, info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields of the resumed run's request that come from the store: ``sets`` (a dict of the ``--set``
    strings), ``repeat`` and ``seed`` (None when not given) from the run's ``params``; ``replays`` (a run id or
    None) and ``only_cases`` (a tuple of stored cases) from its ``info``. Missing or null values are the
    defaults of a plain run."""
    p = params or {}
    i = info or {}
    return {
        "sets": dict(p.get("sets") or {}),
        "repeat": p.get("repeat"),
        "seed": p.get("seed"),
        "replays": i.get("replays"),
        "only_cases": tuple(i.get("replayed_cases") or ()),
    }


def host_step(state: _StoredHost | None, *, resume: bool) -> Step:
    """What the runner does with a host: ``follow`` its agent (start or reattach), or — on resume, when the
    host's ``done`` line is stored — ``finish`` (judge and record the verdict: the host run still says
    ``running``) or ``judge`` (its verdict was recorded: judged again from the store, nothing written)."""
    if not resume or state is None or not state.done:
        return "follow"
    return "finish" if state.status == "running" else "judge"


@dataclass(frozen=True)
class Reattach:
    """Follow the host's spool from ``from_seq`` (the first line not stored); ``detail`` is the progress text."""

    from_seq: int

    @property
    def detail(self) -> str:
        return f"collecting from line {self.from_seq}"


@dataclass(frozen=True)
class Lost:
    """The host's run cannot be collected: ``message`` (without the host name) and ``hint``."""

    message: str
    hint: str

    def error(self, host: str) -> HostError:
        return HostError(host, self.message, self.hint)


@dataclass(frozen=True)
class StartNow:
    """The agent was never started on the host: start it, following its spool from ``from_seq`` (the first line
    not stored: 0 unless lines were stored without a start, which the store's ``last_seq`` would say)."""

    from_seq: int


def reattach_plan(
    agent_state: str, *, started: bool, last_seq: int, run_id: str, host: str, spool: str = "events.jsonl"
) -> Reattach | Lost | StartNow:
    """On resume, what to do with a host whose done line is not stored. ``agent_state``: the ``state`` of the
    agent's ``status RUN_ID`` answer (:data:`AGENT_UNKNOWN_RUN` when the host has no such run); ``started``: the
    store says the agent was started there; ``last_seq``: the last stored position (-1: none); ``spool``: the run's
    spool on the host as the user would type it (``~/.orch/runs/RUN_ID/HOST/events.jsonl``).

    A run the agent knows (running or finished) is followed from the first line not stored; a run it does not
    know is :class:`Lost` when it was started (its spool is gone), else :class:`StartNow`."""
    from_seq = last_seq + 1
    if agent_state != AGENT_UNKNOWN_RUN:
        return Reattach(from_seq)
    if not started:
        return StartNow(from_seq)
    return Lost(
        f"the run's spool {spool} is gone from the host (moved or deleted; no run {run_id} under its orch home): "
        f"the lines after the {from_seq} stored cannot be collected",
        "if the spool was copied off the host, orch runs import SPOOL --host " + host,
    )


def dropped_error(exc: OrchError, *, host: str, started: bool, run_id: str) -> OrchError:
    """``exc`` when it is not a dropped connection; else the host's error saying so, the state the host may be
    in (nothing started there, or its detached agent may still run) and the exact command that goes on."""
    if not isinstance(exc, ConnectError) or exc.kind != "closed":
        return exc
    short = short_run_id(run_id)
    if started:
        msg = f"{exc.reason}; its agent was started and may still run there"
        hint = f"go on with: orch run --resume {short}"
    else:  # a run whose every host failed before starting is not stored: then only running it again helps
        msg, hint = f"{exc.reason}; nothing was started there", (
            f"start it again: orch run --resume {short} when the run was stored, else the same orch run"
        )
    return HostError(host, msg, hint)


def lost_connection_error(reason: str, *, host: str, start_answered: bool, run_id: str) -> HostError:
    """The host's error when every reconnect failed: ``reason`` (the last error's message), whether the run goes
    on there (the start answered: its agent is detached) and the resume command."""
    state = ("the run goes on there (its agent is detached)" if start_answered else
             "whether its run started there is not known")  # fmt: skip
    return HostError(
        host,
        f"lost the connection and could not reattach: {reason}; {state}",
        f"collect it later with: orch run --resume {short_run_id(run_id)}",
    )


def run_status(outcomes: Sequence[_Outcome]) -> str:
    """completed: every host completed; cancelled: any cancelled; failed: none produced results; else partial."""
    if any(o.status == "cancelled" for o in outcomes):
        return "cancelled"
    if all(o.status == "completed" for o in outcomes):
        return "completed"
    if all(o.status == "failed" and o.results == 0 for o in outcomes):
        return "failed"
    return "partial"


def needs_remote_stop(*, deployed: bool, started: bool) -> bool:
    """Whether a cancel sends ``agent cancel`` to a host: only where the agent was found (``deployed``) and the
    run was started (a host that failed before its start has nothing running)."""
    return deployed and started


@dataclass(frozen=True)
class CancelVerdict:
    """A host's end after a cancel (``orch cancel`` or Ctrl-C): ``store`` says whether its host run is written
    (as ``stored_status``, with ``stored_error``); ``status``/``error`` are what the command reports for the
    host."""

    store: bool
    stored_error: str | None
    status: str
    error: str | None
    stored_status: str = "cancelled"


def cancel_verdict(
    stored_status: str | None, failure: str | None, run_id: str, *, spool_cut: bool = False
) -> CancelVerdict:
    """``stored_status``: the host run's status before the cancel (None: no host run stored); ``failure``: the
    error of the host's ``agent cancel``, None when it worked. A host run that already ended (completed,
    partial, failed) keeps its verdict; any other is stored ``cancelled``, naming a failed remote stop as not
    confirmed (:func:`interrupted_host_error`), so that ``orch cancel RUN_ID`` may send it again
    (:func:`cancel_refusal`): stored as plain "cancel failed", a second cancel was refused as "already finished"
    while that host's worker ran on."""
    ended = stored_status in HOST_ENDED_STATUSES
    if failure is None:
        return CancelVerdict(not ended, None, "cancelled", None)
    if spool_cut:  # the worker was stopped, but the host's spool holds fewer lines than orch stored (the agent's
        # exit 6): no done was written, and the host lost lines orch had, so it is failed, on both cancel paths,
        # and no second cancel is invited (it would find the same spool)
        said = f"{CANCELLED_BY_USER}; cancel failed: {failure}"
        return CancelVerdict(not ended, said, "failed", said, stored_status="failed")
    return CancelVerdict(not ended, interrupted_host_error(run_id, failure), "failed", failure)


def interrupt_action(count: int) -> InterruptAction:
    """What the ``count``-th Ctrl-C (SIGINT, counted from 1) of ``orch run`` does: the first ``cancel``s the run (the
    remote stops are sent, what was ingested is kept, the run is stored ``cancelled``); the second is ``absorb``ed
    (the cancel goes on: a terminal's Ctrl-C pressed twice and ``timeout -s INT``, which signals the child and then
    its process group, both send two); the third and later ``abandon`` waiting for the remote stops not yet
    confirmed (the run is still stored ``cancelled``, those hosts naming the stop that was not confirmed)."""
    if count <= 1:
        return "cancel"
    return "absorb" if count == 2 else "abandon"


def interrupted_host_error(run_id: str, failure: str | None) -> str:
    """The error stored for a host run cancelled by Ctrl-C: :data:`CANCELLED_BY_USER` when its agent's stop was
    confirmed (or nothing was started there: ``failure`` None); else that the remote stop was not confirmed,
    ``failure`` (why) and the command that sends it again."""
    if failure is None:
        return CANCELLED_BY_USER
    return f"{CANCELLED_BY_USER}; {STOP_UNCONFIRMED} ({failure}): run orch cancel {short_run_id(run_id)}"


def stop_unconfirmed(errors: Sequence[str | None]) -> bool:
    """Whether any of the host runs' stored ``errors`` says its remote stop was not confirmed."""
    return any(e is not None and STOP_UNCONFIRMED in e for e in errors)
