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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.linecheck import CASE_INDEX_MAX, checked_fields
from orchestrator.protocol import (
    EVENT_TYPES,
    JUDGED_KEY,
    Event,
    case_fields,
    error_event,
    oversize_event,
    parse_line,
    unholdable_problem,
)
from orchestrator.store.compute import CleanMetrics, clean_metrics
from orchestrator.suites.secrets import REDACTED
from orchestrator.transport.lines import MAX_LINE_BYTES, Line, OversizeLine
from orchestrator.wording import counted

UNFINISHED_KEY = "orch_unfinished_cases"
"""Key that :class:`SpoolLines` sets on a ``done`` event's data (and strips from any done line that writes it): the
cases whose ``case_start`` was stored with no result or error row for them before ``done``, as
``[{"case_index": int, "line": position of the case_start, "case": parameters}]``. The store makes them one error
row at the done line's position (:func:`unfinished_error`) and keeps ``unfinished`` in the done record
(:func:`done_record`), which :func:`host_verdict` reads."""
_TYPE_SHOWN = 60  # characters of an unknown type (or a second hello's run and host) shown in its error row


def line_event(line: Line, position: int, *, cap: int = MAX_LINE_BYTES, shift: int = 0) -> Event:
    """The event of the spool line at ``position + shift`` (0-based; ``shift``: blank lines before it, see
    :class:`SpoolLines`), its seq expected to be ``position``: parsed, or an error event for an oversize line.
    Stateless: the ingest paths go through :class:`SpoolLines`, which also checks field types and case order."""
    if isinstance(line, OversizeLine):
        return oversize_event(position + shift, line.size, line.head, cap)
    return parse_line(line, expected_seq=position, shift=shift)


class CaseList:
    """The case list a run sent to a host's agent: its resolved spec's ``cases``, as the runner stores it in the
    host run's ``info["spec"]`` when the host starts (``suites.secrets.redact_spec``: each secret ``env`` value
    replaced by :data:`suites.secrets.REDACTED`). The agent writes ``cases[i]`` as the ``case`` of case ``i``'s
    ``case_start`` and ``result`` or ``error`` lines, unchanged (``agents/orch_agent/worker.py``), so a line whose
    ``case`` is not the list's entry at its ``case_index`` (or whose index the list does not have) was not written
    by this run's agent for that case: a spool edited consistently in both lines of a case would otherwise store
    its numbers under parameters the run never measured.

    Values are compared as JSON text (Python's ``1 == 1.0 == True`` are three parameters); a redacted ``env``
    value of the list matches any value of the line (the secret is not kept, and never stored)."""

    def __init__(self, cases: Sequence[Mapping[str, Any]]) -> None:
        self.cases = [dict(c) for c in cases]
        self._texts = [_params_shown(c, cut=False) for c in self.cases]

    @classmethod
    def from_info(cls, info: Mapping[str, Any] | None) -> CaseList | None:
        """The case list recorded in a host run's ``info`` (``info["spec"]["cases"]``), or None when it holds none
        (a run made by ``orch runs import``, which never sent a spec: its cases cannot be checked)."""
        spec = (info or {}).get("spec")
        cases = spec.get("cases") if isinstance(spec, Mapping) else None
        if not isinstance(cases, list) or not all(isinstance(c, Mapping) for c in cases):
            return None
        return cls(cases)

    def problem(self, case_index: int, case: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None] | None:
        """Why ``case`` cannot be case ``case_index``'s parameters, and the list's entry for that index (None
        when it has none); None when they agree."""
        if not 0 <= case_index < len(self.cases):
            return (f"case {case_index} is not in the case list the run sent to the agent "
                    f"({counted(len(self.cases), 'case')})"), None  # fmt: skip
        want = self.cases[case_index]
        mine = _as_listed(case, want)
        text = _params_shown(mine, cut=False)
        if text == self._texts[case_index]:
            return None
        return (f"its case parameters {_params_shown(mine)} are not those of case {case_index} in the case list the "
                f"run sent to the agent, {_params_shown(want)}"), want  # fmt: skip


def _as_listed(case: Mapping[str, Any], want: Mapping[str, Any]) -> Mapping[str, Any]:
    """``case`` with each ``env`` value that ``want`` (a case list's entry) keeps redacted redacted too."""
    env, listed = case.get("env"), want.get("env")
    if not isinstance(env, Mapping) or not isinstance(listed, Mapping):
        return case
    return {**case, "env": {k: REDACTED if listed.get(k) == REDACTED else v for k, v in env.items()}}


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
      without them) only the second-line rule applies;
    - a line whose ``type`` is not one the agent writes (:data:`protocol.EVENT_TYPES`: ``zzz``, ``Result``) is one
      ``error`` row at its position: orch deploys its agent itself, content-addressed, so no newer agent writes
      here, and a line the store would skip must not pass as stored. A ``hello`` anywhere but line 0 (a second
      hello, another run's or host's) is one ``error`` row too;
    - at a ``done`` line (not ``cancelled``, without a ``reason``: those stop mid-case by design), every case whose
      ``case_start`` was stored without a result or error row for that case after it is named in the done event
      (:data:`UNFINISHED_KEY`): the store makes that one error row at the done line's position, and the host is
      ``failed`` (:func:`host_verdict`). A refused result line that names its case (a seq mismatch, a wrong field,
      an unknown type) is such a row;
    - with ``cases`` (:class:`CaseList`, the case list the run sent to the agent), a ``case_start``, ``result`` or
      case ``error`` whose ``case`` is not the list's entry at its ``case_index`` is one ``error`` row naming both
      parameter sets, stored under the list's (a result's is on the agent's side of the counts, as any refused
      result line's): its numbers are never stored under parameters the run did not send. Without ``cases`` (a run
      made by ``orch runs import`` records none) the parameters are not checked against a list.

    The blank-line shift is counted from ``start``: a follow reattached past a blank line sees the lines after
    it as seq mismatches (error rows), which the reconciliation reports as well.
    """

    def __init__(self, start: int = 0, *, cap: int = MAX_LINE_BYTES, cases: CaseList | None = None) -> None:
        self.position = start
        self.cap = cap
        self.shift = 0
        self.cases = cases
        self._listed: dict[str, Any] | None = None  # the case list's entry for a line refused for its parameters
        self._open: int | None = None  # the case whose case_start came last, until its result or error
        # case -> the position of the line that ended it, and the cases an error line ended (the others: a result);
        # no tuple per case: each container held for the run is one more object for the garbage collector to walk
        self._finished: dict[int, int] = {}
        self._ended_by_error: set[int] = set()
        self._unanswered: dict[int, tuple[int, dict[str, Any]]] = {}  # started case -> its case_start's line, case

    def event(self, line: Line) -> Event:
        """The event of the next line; advances the position by one."""
        pos = self.position
        self.position += 1
        if isinstance(line, bytes) and (not line or line.isspace()):  # bytes.isspace: strip()'s ASCII whitespace
            self.shift += 1
            return error_event(pos, f"agent line {pos} is blank; the agent writes one JSON event per line",
                               kind="protocol")  # fmt: skip
        ev = line_event(line, pos - self.shift, cap=self.cap, shift=self.shift)
        if ev.type == "result" and ev.plain and (cleaned := _well_formed_result(ev.data)) is not None:
            # the hot path, a well-formed result line: the checks of _checked that apply to it, at once
            problem = self._case_order(ev)
            if problem is None:
                ev.clean_metrics = cleaned  # the event parse_line just built, which no one else holds
                self._unanswered.pop(ev.data["case_index"], None)  # a row for the case from its result line
                return ev
            out = self._refused(ev, pos, problem, {})
        else:
            out = self._checked(ev, pos)
        typ = out.type  # the hot path (a result line): one case_index read, no tuple built
        if typ == "result" or typ == "error":
            ci = out.case_index
            if ci is not None and (typ == "result" or out.data.get("line_type") != "case_start"):
                self._unanswered.pop(ci, None)  # a row for the case from its result or error line
        elif typ == "case_start":
            ci = out.case_index
            if ci is not None:
                self._unanswered[ci] = (pos, out.case or {})
        elif typ == "done":
            out = self._with_unfinished(out)
        return out

    def _checked(self, ev: Event, pos: int) -> Event:
        problem = _type_problem(ev, pos)
        # a number past a double's range or a lone surrogate, anywhere in a line orjson refused: checked before the
        # fields, whose checks would turn the number into a float (OverflowError) or the text into U+FFFD
        if problem is None and not ev.plain:
            problem = unholdable_problem(ev.data)
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
        return self._refused(ev, pos, problem, extra)

    def _refused(self, ev: Event, pos: int, problem: str, extra: dict[str, Any]) -> Event:
        """The error row of the line at ``pos`` refused for ``problem`` (``extra``: more of its data)."""
        fields = case_fields(ev.data)
        if self._listed is not None:  # stored under the parameters the run sent, never the line's
            fields["case"], self._listed = self._listed, None
        return error_event(pos, f"agent line {pos} ({ev.type[:_TYPE_SHOWN]}): {problem}; its content is not trusted",
                           kind="protocol", line_type=ev.type[:_TYPE_SHOWN], **fields, **extra)  # fmt: skip

    def _with_unfinished(self, ev: Event) -> Event:
        """The done event with :data:`UNFINISHED_KEY` set to the started cases without a row (when its status is
        not ``cancelled`` and it gives no ``reason``), and any such key the line wrote itself dropped."""
        data = {k: v for k, v in ev.data.items() if k != UNFINISHED_KEY}
        stopped = ev.data.get("status") == "cancelled" or bool(ev.data.get("reason"))
        if self._unanswered and not stopped:
            data[UNFINISHED_KEY] = [{"case_index": ci, "line": line, "case": case}
                                    for ci, (line, case) in sorted(self._unanswered.items())]  # fmt: skip
        if data == ev.data:
            return ev
        return Event(ev.seq, ev.type, ev.ts, ev.v, data, ev.plain, ev.clean_metrics)

    def _case_order(self, ev: Event) -> str | None:
        ci = ev.case_index
        if ev.type == "case_start":
            assert ci is not None  # field_problem checked it
            if ci in self._finished:
                return f"case {ci} was started again after it ended"
            listed = self._list_problem(ci, ev.case)
            self._open = None if listed else ci
            return listed
        if ev.type not in ("result", "error") or ci is None:
            return None
        open_case = self._open
        self._open = None
        if ci in self._finished:
            ended, at = ("error" if ci in self._ended_by_error else "result"), self._finished[ci]
            what = f"a second {ev.type}" if ended == ev.type else f"an {ev.type}" if ev.type == "error" else \
                f"a {ev.type}"  # fmt: skip
            return (f"{what} for case {ci}, which line {at} already ended with its {ended} (the agent writes one "
                    "result or error per case)")  # fmt: skip
        if open_case is not None and ci != open_case:
            return f"it is for case {ci}, but the case started last is case {open_case}"
        started = self._unanswered.get(ci) if open_case is not None else None
        if started is not None and ev.case is not None and _params_shown(ev.case, cut=False) != _params_shown(
            started[1], cut=False
        ):  # the agent writes one case object in both lines; compared as JSON (Python's 1 == 1.0 == True)
            return (f"its case parameters {_params_shown(ev.case)} are not those of case {ci}'s case_start on "
                    f"line {started[0]}, {_params_shown(started[1])}")  # fmt: skip
        if started is None:  # else its case_start's parameters, checked against the list, are the line's
            listed = self._list_problem(ci, ev.case)
            if listed:
                return listed
        self._finished[ci] = ev.seq  # only a line that is stored ends its case
        if ev.type == "error":
            self._ended_by_error.add(ci)
        return None

    def _list_problem(self, ci: int, case: dict[str, Any] | None) -> str | None:
        """Why the line's ``case`` is not case ``ci`` of :attr:`cases` (keeping the list's entry for the error
        row), or None; never a problem without a list or without a ``case`` on the line."""
        if self.cases is None or case is None:
            return None
        found = self.cases.problem(ci, case)
        if found is None:
            return None
        problem, self._listed = found
        return problem


def _well_formed_result(data: dict[str, Any]) -> CleanMetrics | None:
    """A ``result`` line's metrics as :func:`linecheck.checked_fields` cleans them when every field it checks is
    well-typed (exact types, as orjson reads them), else None: then :meth:`SpoolLines._checked`, the general
    checks, finds and names the problem. The hot path of ingest (one call per result line): the same checks as
    ``checked_fields("result", data)`` without its chain over the event types (tests/unit/test_ingest_fast.py
    holds the two to the same outcomes)."""
    ci = data.get("case_index")
    if type(ci) is not int or not 0 <= ci <= CASE_INDEX_MAX or type(data.get("case")) is not dict:
        return None
    metrics, info = data.get("metrics"), data.get("info")
    if type(metrics) is not dict or (info is not None and type(info) is not dict):
        return None
    try:
        return clean_metrics(metrics)
    except ValueError:
        return None


def _params_shown(case: Mapping[str, Any], cut: bool = True) -> str:
    """Case parameters as an error row names them: their JSON, keys sorted, cut to 200 characters (``cut``)."""
    text = json.dumps(case, sort_keys=True, default=str)
    return text if len(text) <= 200 or not cut else text[:199] + "…"


def _shown(x: Any) -> str:
    """A hello's run id or host as its error row names it: text cut to :data:`_TYPE_SHOWN` characters, else its
    JSON type (a value :func:`protocol.unholdable_problem` refuses is never put in a message)."""
    if isinstance(x, str) and unholdable_problem(x) is None:
        return repr(x[:_TYPE_SHOWN])
    return "none" if x is None else f"a {type(x).__name__}"


def _type_problem(ev: Event, pos: int) -> str | None:
    """Why the line at ``pos`` is refused for its type, or None: a type the agent never writes, or a hello after
    line 0 (the agent writes one, first; orch reads the run and host from it)."""
    if ev.type not in EVENT_TYPES:
        return (f"unknown event type {ev.type[:_TYPE_SHOWN]!r}; the agent writes only "
                f"{', '.join(sorted(EVENT_TYPES))}, and orch deployed this agent itself (content-addressed), so no "
                "newer agent writes other types here")  # fmt: skip
    if ev.type == "hello" and pos > 0:
        return (f"a second hello (run {_shown(ev.data.get('run_id'))}, host {_shown(ev.data.get('host'))}); the "
                "agent writes one hello, as line 0 of its spool: this line is not this run's agent's")  # fmt: skip
    return None


def is_done_line(ev: Event) -> bool:
    """Whether ``ev`` is the spool's done line: the agent's ``done``, or the error row orch made of a done line it
    refused (at the wrong position, a bad field): either way the end of what the agent wrote."""
    return ev.type == "done" or (ev.type == "error" and ev.data.get("line_type") == "done")


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
    unfinished = _unfinished(ev)
    if unfinished:  # set by SpoolLines only: started cases without a row, one error row at this line (below)
        out["unfinished"] = [{"case_index": u.get("case_index"), "line": u.get("line")} for u in unfinished]
    return out


def _unfinished(ev: Event) -> list[dict[str, Any]]:
    raw = ev.data.get(UNFINISHED_KEY) if ev.type == "done" else None
    return [u for u in raw if isinstance(u, dict)] if isinstance(raw, list) else []


def _unfinished_text(cases: Sequence[Mapping[str, Any]], done_line: Any) -> str:
    named = ", ".join(f"case {u.get('case_index')} (started at line {u.get('line')})" for u in cases)
    return (f"{named} {'has' if len(cases) == 1 else 'have'} no result or error before the done line "
            f"(line {done_line}); the agent writes one per case it starts, so the spool lacks "
            f"{'its line' if len(cases) == 1 else 'their lines'}")  # fmt: skip


def unfinished_error(ev: Event) -> Event | None:
    """The error row the store keeps at a ``done`` line's position for the started cases without a row
    (:data:`UNFINISHED_KEY`, set by :class:`SpoolLines`), naming each case and its ``case_start`` line; the row
    carries the first such case's ``case_index`` and parameters. None when there is none."""
    cases = _unfinished(ev)
    if not cases:
        return None
    first = cases[0]
    return error_event(ev.seq, _unfinished_text(cases, ev.seq), kind="protocol", line_type="done",
                       **case_fields({"case_index": first.get("case_index"), "case": first.get("case")}))  # fmt: skip


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


def _counts_differ(problems: list[str], done: Mapping[str, Any], done_seq: int, results: int, errors: int, judged: int,
                   first_error: str | None) -> str:  # fmt: skip
    """The sentence for counts that disagree (:func:`reconcile`'s ``problems``): what the difference means, and
    the first error row, which often explains it (a line refused, a line past the cap)."""
    if not _only_more_stored(done, done_seq, results, errors, judged):
        why = "the store does not hold what the agent wrote"
    elif _count(done.get("lines")) == done_seq:  # every line is the agent's: one it wrote was refused
        why = ("a line counted as neither result nor error on the host could not be taken as written (past the "
               "line cap, not valid, or not the agent's) and is stored as an error row")  # fmt: skip
    else:
        why = "the spool holds lines the agent did not write"
    cause = f"; the first error row: {first_error[:300]}" if first_error else ""
    return "; ".join(problems) + f" ({why}){cause}"


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


_INDICES_SHOWN = 8  # case indices named in a coverage problem; the rest are counted


def _indices_text(indices: Sequence[int]) -> str:
    shown = ", ".join(map(str, indices[:_INDICES_SHOWN]))
    return shown + (f" and {len(indices) - _INDICES_SHOWN} more" if len(indices) > _INDICES_SHOWN else "")


def coverage_problem(cases_total: int | None, case_indices: Sequence[int]) -> str | None:
    """Why the stored rows do not give each of the run's cases its one outcome, or None when they do.

    ``cases_total``: the ``cases_total`` of the host's ``hello`` (the cases the agent was given; None for a spool
    without it: nothing to judge). ``case_indices``: the distinct case indices of the host run's stored result and
    error rows (``Store.case_indices``). The agent writes, for each case 0 .. cases_total-1, one result or one
    error line (``agents/orch_agent/worker.py``), so a ``done`` whose counts agree can still hide a case that has
    no row (a result line standing in for another case's, a spool rewritten with the counts kept) or a row for a
    case the run never had. One sentence naming up to :data:`_INDICES_SHOWN` indices of each kind."""
    total = _count(cases_total)
    if total is None:
        return None
    held = set(case_indices)
    missing = [i for i in range(total) if i not in held]
    beyond = sorted(i for i in held if not 0 <= i < total)
    if not missing and not beyond:
        return None
    parts = []
    if missing:
        parts.append(f"no result or error stored for {counted(len(missing), 'case')} ({_indices_text(missing)})")
    if beyond:
        parts.append(f"rows stored for {counted(len(beyond), 'case')} the run does not have ({_indices_text(beyond)})")
    return f"the agent's hello announced {counted(total, 'case')}: " + " and ".join(parts)


def host_verdict(
    done: Mapping[str, Any] | None,
    *,
    results: int,
    errors: int,
    judged: int = 0,
    first_error: str | None = None,
    cases_total: int | None = None,
    case_indices: Sequence[int] | None = None,
) -> HostVerdict:
    """The verdict for a host whose spool was followed to its end. ``done``: :func:`done_record` of the stored
    ``done`` event, None when none was stored (the host did not finish, or its done line was not trusted);
    ``results``/``errors``: the host run's stored counts; ``judged``: see :func:`reconcile`; ``first_error``:
    the text of the host run's first error row, shown with the count of failed cases (cut to 300 characters).
    ``cases_total`` and ``case_indices`` (:func:`coverage_problem`): a host that would be ``completed`` or
    ``partial`` is ``failed`` when some case has no stored outcome, or a stored row names a case the run does not
    have — the counts alone cannot show that a row stands in for another case's.
    A done record naming ``unfinished`` cases (:func:`done_record`) is ``failed`` naming them (unless the agent gave
    a ``reason``, which comes first); their one error row is orch's, not on the agent's side of the counts."""
    if done is None:
        return HostVerdict("failed", "the agent's done line was not stored: the host's end of the run is unknown")
    position = done.get("position")
    done_seq = position if isinstance(position, int) else -1
    unfinished = done.get("unfinished")
    # the row orch made for started cases without one (unfinished_error): not the agent's, so not on its side
    orch_rows = 1 if isinstance(unfinished, list) and unfinished else 0
    errors -= orch_rows
    problems = reconcile(done, done_seq=done_seq, results=results, errors=errors, judged=judged)
    if done.get("status") == "cancelled":  # stopped on request; what it wrote before is still counted
        return HostVerdict("cancelled", _counts_differ(problems, done, done_seq, results, errors, judged, first_error)
                           if problems else None)  # fmt: skip
    if orch_rows and not done.get("reason"):
        assert isinstance(unfinished, list)
        cases = [u for u in unfinished if isinstance(u, Mapping)]
        return HostVerdict("failed", "; ".join([_unfinished_text(cases, done_seq), *problems]))
    reason = done.get("reason")
    if isinstance(reason, str) and reason:
        hint = TERMINATED_HINT if done.get("stopped_by") == "sigterm" else None
        return HostVerdict("failed", "; ".join([reason, *problems]), hint)
    if problems:
        return HostVerdict("failed", _counts_differ(problems, done, done_seq, results, errors, judged, first_error))
    failed = f"{counted(errors, 'case')} failed" + (f": {first_error[:300]}" if first_error else "")
    if done.get("status") == "failed" or (results == 0 and errors > 0):
        return HostVerdict("failed", failed if errors else "the agent reported failure")
    uncovered = coverage_problem(cases_total, case_indices) if case_indices is not None else None
    if uncovered is not None:
        return HostVerdict("failed", "; ".join([uncovered, *([failed] if errors else [])]) +
                           " (the store does not hold one outcome per case)")  # fmt: skip
    if errors:
        return HostVerdict("partial", failed)
    return HostVerdict("completed")
