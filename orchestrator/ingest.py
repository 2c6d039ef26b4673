"""From a spool line to a stored verdict: positions, reconciliation — pure.

The path is the same for a live run (``runner``), a reattached one (``orch run --resume``) and a copied spool
(``orch runs import``):

1. the transport hands whole lines (``transport.lines``); the n-th line of the spool is at position n;
2. :func:`line_event` makes each line an Event *at its position* (``protocol.parse_line``; an oversize line is one
   error event naming its size), so the store's ``last_seq`` advances one line at a time and ingest is
   idempotent on (run, host, position);
3. when the ``done`` line is stored, :func:`host_verdict` compares the agent's own counts (``done.counts``: lines,
   results, errors) with what the store holds for that host run. ``completed`` means every line the agent wrote
   is stored and no case failed; any disagreement makes the host ``failed`` with "N results on the host, M stored".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.linecheck import checked_fields
from orchestrator.protocol import (
    JUDGED_KEY,
    Event,
    case_fields,
    error_event,
    oversize_event,
    parse_line,
    unholdable_problem,
)
from orchestrator.transport.lines import MAX_LINE_BYTES, Line, OversizeLine
from orchestrator.wording import counted


def line_event(line: Line, position: int, *, cap: int = MAX_LINE_BYTES, shift: int = 0) -> Event:
    """The event of the spool line at ``position + shift`` (0-based; ``shift``: blank lines before it, see
    :class:`SpoolLines`), its seq expected to be ``position``: parsed, or an error event for an oversize line.
    Stateless: the ingest paths go through :class:`SpoolLines`, which also checks field types and case order."""
    if isinstance(line, OversizeLine):
        return oversize_event(position + shift, line.size, line.head, cap)
    return parse_line(line, expected_seq=position, shift=shift)


class SpoolLines:
    """The events of one host's spool lines, read in order from position ``start`` — the stateful checks.

    Each line becomes exactly one event at its position (:func:`line_event`), then:

    - a blank line is one ``error`` row at its position; the lines after it are still the agent's, their seq one
      less than their position per blank line before them (``shift``), so one blank line costs one error row —
      and the host's reconciliation then fails on the line count, as it must;
    - a line whose fields have the wrong type (:func:`linecheck.field_problem`), or that holds a number past a
      double's range or a lone surrogate anywhere (:func:`protocol.unholdable_problem`), is one ``error`` row
      naming the field, never stored with that field dropped, coerced or replaced;
    - a ``result`` or case ``error`` right after a ``case_start`` must be for that case, and each case has one
      result or one error, as the agent writes them (``worker.py``: case_start, then one result or one error); a
      line for another case, or a second one for a case, is one ``error`` row naming the cases. Where no
      ``case_start`` is open (a follow reattached mid-case, a refused ``case_start``, spools of older agents
      without them) only the second-line rule applies.

    The blank-line shift is counted from ``start``: a follow reattached past a blank line sees the lines after
    it as seq mismatches (error rows), which the reconciliation reports as well.
    """

    def __init__(self, start: int = 0, *, cap: int = MAX_LINE_BYTES) -> None:
        self.position = start
        self.cap = cap
        self.shift = 0
        self._open: int | None = None  # the case whose case_start came last, until its result or error
        self._finished: set[int] = set()

    def event(self, line: Line) -> Event:
        """The event of the next line; advances the position by one."""
        pos = self.position
        self.position += 1
        if isinstance(line, bytes) and not line.strip():
            self.shift += 1
            return error_event(pos, f"agent line {pos} is blank; the agent writes one JSON event per line",
                               kind="protocol")  # fmt: skip
        ev = line_event(line, pos - self.shift, cap=self.cap, shift=self.shift)
        # a number past a double's range or a lone surrogate, anywhere in a line orjson refused: checked before the
        # fields, whose checks would turn the number into a float (OverflowError) or the text into U+FFFD
        problem = None if ev.plain else unholdable_problem(ev.data)
        cleaned = None
        if problem is None:
            problem, cleaned = checked_fields(ev.type, ev.data)
        extra: dict[str, Any] = {}
        if problem is not None and ev.type == "case_start":
            self._open = None  # which case is open is unknown until the next case_start
        if problem is not None and ev.type == "result":
            # The agent's own result line (its seq is its position), refused for a field (an integer metric past
            # 2**53): the agent counted it as a result, and the reconciliation must too — the case failed, the
            # store holds its line.
            extra["info"] = {JUDGED_KEY: True, "error_kind": "invalid"}
        if problem is None and not (ev.type == "error" and ev.data.get("kind") == "protocol"):
            problem = self._case_order(ev)  # a line orch already refused says nothing about the cases
        if problem is None:
            return ev if cleaned is None else Event(ev.seq, ev.type, ev.ts, ev.v, ev.data, ev.plain, cleaned)
        return error_event(pos, f"agent line {pos} ({ev.type}): {problem}; its content is not trusted",
                           kind="protocol", line_type=ev.type, **case_fields(ev.data), **extra)  # fmt: skip

    def _case_order(self, ev: Event) -> str | None:
        ci = ev.case_index
        if ev.type == "case_start":
            assert ci is not None  # field_problem checked it
            if ci in self._finished:
                return f"case {ci} was started again after it ended"
            self._open = ci
            return None
        if ev.type not in ("result", "error") or ci is None:
            return None
        open_case = self._open
        self._open = None
        if ci in self._finished:
            return f"a second {ev.type} for case {ci} (the agent writes one result or error per case)"
        if open_case is not None and ci != open_case:
            return f"it is for case {ci}, but the case started last is case {open_case}"
        self._finished.add(ci)  # only a line that is stored ends its case
        return None


def done_record(ev: Event) -> dict[str, Any]:
    """What the store keeps of a ``done`` event (``host_runs.done_counts``): the agent's ``counts`` as it sent them
    (``lines``, ``results``, ``errors``; agents before ``lines`` send only the last two), its ``status`` and the
    done line's ``position`` in the spool (the number of lines before it), and its ``reason`` when the agent
    stopped early and said why (``cannot write …/events.jsonl: No space left on device (ENOSPC)``)."""
    counts = ev.data.get("counts")
    out: dict[str, Any] = dict(counts) if isinstance(counts, dict) else {}
    out["status"] = str(ev.data.get("status", "completed"))
    out["position"] = ev.seq
    reason = ev.data.get("reason")
    if isinstance(reason, str) and reason:  # the agent stopped early and says why (e.g. its spool's disk is full)
        out["reason"] = reason
    if ev.data.get("stopped_by") == "sigterm":  # a SIGTERM from outside orch, not orch cancel (agent worker.py)
        out["stopped_by"] = "sigterm"
    return out


def _count(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None


def reconcile(done: Mapping[str, Any], *, done_seq: int, results: int, errors: int, judged: int = 0) -> list[str]:
    """Disagreements between the agent's ``done`` counts and the store, as sentences; empty when they agree.

    ``done_seq``: the stored position of the ``done`` line, i.e. the number of lines before it. ``results``,
    ``errors``: the host run's stored result rows of status ok / error. ``judged``: of those error rows, the ones
    orch made from the agent's result lines (a command suite's parser judged the output: ``Store.judged_errors``)
    — the agent counted them as results, so they count on that side. An agent without ``counts.lines`` is
    checked on results and errors only; a count that is missing or not a non-negative integer is a disagreement.
    """
    problems: list[str] = []
    results, errors = results + judged, errors - judged
    if "lines" in done:
        lines = _count(done.get("lines"))
        if lines != done_seq:
            problems.append(f"{done.get('lines')} lines on the host before done, {done_seq} stored")
    for key, stored in (("results", results), ("errors", errors)):
        agent = _count(done.get(key))
        if agent != stored:
            problems.append(f"{done.get(key, 'no count of')} {key} on the host, {stored} stored")
    return problems


TERMINATED_HINT = (
    "the lines it wrote before are kept; orch run --resume cannot continue a terminated worker: rerun the suite "
    "(find who sent the SIGTERM on the host: journalctl, a watchdog, systemd-oomd)"
)


def _only_more_stored(done: Mapping[str, Any], done_seq: int, results: int, errors: int, judged: int) -> bool:
    """Whether every count that disagrees is larger in the store than the agent's: lines the agent did not write
    (appended by something else, a foreign or repeated line) — nothing it wrote is missing. False when a count is
    smaller, or unknown (missing or not a count)."""
    stored = {"lines": done_seq, "results": results + judged, "errors": errors - judged}
    keys = [k for k in stored if k in done or k != "lines"]
    agent = {k: _count(done.get(k)) for k in keys}
    if any(v is None for v in agent.values()):
        return False
    return all(stored[k] >= v for k, v in agent.items() if v is not None)


@dataclass(frozen=True)
class HostVerdict:
    """A host's end of a run. ``status``: completed | partial (some cases failed) | failed | cancelled."""

    status: str
    error: str | None = None
    hint: str | None = None

    @property
    def stored_status(self) -> str:
        """The host run's stored status: a host with some failed cases is stored ``completed`` with its error
        count and text (the run as a whole is then partial)."""
        return "completed" if self.status == "partial" else self.status


def host_verdict(
    done: Mapping[str, Any] | None, *, results: int, errors: int, judged: int = 0, first_error: str | None = None
) -> HostVerdict:
    """The verdict for a host whose spool was followed to its end. ``done``: :func:`done_record` of the stored
    ``done`` event, None when none was stored (the host did not finish, or its done line was not trusted);
    ``results``/``errors``: the host run's stored counts; ``judged``: see :func:`reconcile`; ``first_error``:
    the text of the host run's first error row, shown with the count of failed cases (cut to 300 characters)."""
    if done is None:
        return HostVerdict("failed", "the agent's done line was not stored: the host's end of the run is unknown")
    if done.get("status") == "cancelled":
        return HostVerdict("cancelled")
    position = done.get("position")
    done_seq = position if isinstance(position, int) else -1
    problems = reconcile(done, done_seq=done_seq, results=results, errors=errors, judged=judged)
    reason = done.get("reason")
    if isinstance(reason, str) and reason:
        hint = TERMINATED_HINT if done.get("stopped_by") == "sigterm" else None
        return HostVerdict("failed", "; ".join([reason, *problems]), hint)
    if problems:
        why = ("the spool holds lines the agent did not write" if _only_more_stored(done, done_seq, results, errors,
               judged) else "the store does not hold what the agent wrote")  # fmt: skip
        return HostVerdict("failed", "; ".join(problems) + f" ({why})")
    failed = f"{counted(errors, 'case')} failed" + (f": {first_error[:300]}" if first_error else "")
    if done.get("status") == "failed" or (results == 0 and errors > 0):
        return HostVerdict("failed", failed if errors else "the agent reported failure")
    if errors:
        return HostVerdict("partial", failed)
    return HostVerdict("completed")
