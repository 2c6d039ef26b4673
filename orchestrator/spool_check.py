"""Is this spool the one whose first lines the store holds? One comparison for ``orch runs import`` and for
``orch run --resume`` (and a follow reattached after a dropped connection).

The store keeps a host's spool by position: line N is row ``seq`` N. A spool that was replaced on the host (another
run's ``events.jsonl`` copied over it) or rewritten (a figure changed in a line orch already stored) must never be
taken as the continuation of what is stored: its new lines would sit next to rows of another spool, and the run
would end ``completed`` on numbers that were never measured together. So, before anything of a spool is stored past
the stored prefix, each line at a stored position is compared with the row there (:class:`StoredPrefix`): the
``hello`` must name this run and host, a result or error line must be a row of the same status, case and case
parameters, with the agent's own metric figures equal; any difference is a conflict naming the line, the field and
both values (``line 2: metric wall_ms.value is 123456.0, 8.488603 stored``).

Lines after the ``done`` line are never stored (:func:`past_done_note`), on both paths: the agent writes nothing
after done, so such a line was appended by something else; storing it (as the live follow once did, as an error row)
would put foreign text at a position of the host's account, and leaving it out silently would hide the change. The
host is ``failed`` with the count named, the same words on both paths.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from orchestrator.errors import HostError
from orchestrator.facts import host_facts_summary
from orchestrator.ingest import done_record, unfinished_error
from orchestrator.protocol import Event
from orchestrator.store.compute import LOG_MAX_CHARS, clean_metrics, from_unix, log_entries
from orchestrator.store.records import HostRunRecord, ResultRecord
from orchestrator.store.storable import storable_event
from orchestrator.wording import counted

if TYPE_CHECKING:  # the runner imports this module; SQLAlchemy loads with the store, not before
    from orchestrator.store.repo import Store

# the agent's own figures of a metric, and its unit (stored as written: ms rewritten to s is the same figure read
# a thousand times larger)
COMPARED_FIGURES = ("value", "unit", "median", "p10", "p90", "min", "max", "n")
MAX_PROBLEMS_SHOWN = 5
# the host facts that identify the machine that wrote a spool (``facts.host_facts_summary`` keys); clocks, ECC and
# nvidia-smi's warnings may change between two reads of one machine, these do not
FACT_KEYS = ("hostname", "gpu_name", "gpu_uuids", "driver")


def line_conflicts(raw_ev: Event, ev: Event, row: ResultRecord | None, *, stored_done: Mapping[str, Any] | None,
                   stored_ts: datetime | None = None) -> list[str]:  # fmt: skip
    """How the spool's line at ``ev.seq`` (a stored position) differs from the stored ``row`` there (None: no row).
    ``raw_ev``: the line as the agent wrote it (its metric figures are compared); ``ev``: the same line as the
    ingest would store it (enriched: a command suite's parsed case, status and scrubbed parameters).
    ``stored_done``: the stored ``done`` counts (``done_record``), compared with a done line at that position.
    ``stored_ts``: when the stored row's line was written (its ``ts``), compared with the line's. Besides the
    status, case and parameters, an ok row's metric figures (:data:`COMPARED_FIGURES`), raw samples (``row``
    read with its samples) and the ``info`` keys the agent wrote are compared; ``info`` keys orch adds (the GPU
    spec, references: they follow the inventory, which may change before a resume) are not.
    Returns one text per difference, each naming the line, the field and both values; [] when they agree.

    The line is taken as the store takes it (``Store.ingest``): stand-ins for what a database cannot hold
    (``storable_event``), and a result whose metrics ``clean_metrics`` rejects is an error row. A row saying the
    database refused the line at its place (``store.refusals``) agrees with any line there: it holds nothing of
    the line to compare."""
    where = f"line {ev.seq}"
    problems: list[str] = []
    if row is not None and row.status == "error" and (row.error or "").startswith(refused_line_prefix(ev.seq, ev.type)):
        return problems
    ev, _ = storable_event(ev)
    raw_ev, _ = storable_event(raw_ev)
    if ev.type not in ("result", "error"):
        if row is not None and not (ev.type == "done" and unfinished_error(ev) is not None):  # orch's case row
            problems.append(f"{where} is a {ev.type} line, the store holds a row of status {row.status} there")
        if ev.type == "done" and stored_done is not None:
            mine = done_record(ev)
            diff = sorted(k for k in set(mine) | set(stored_done) if mine.get(k) != stored_done.get(k))
            if diff:
                shown = ", ".join(f"{k} {mine.get(k)!r} vs {stored_done.get(k)!r} stored" for k in diff)
                problems.append(f"{where}: the done line differs ({shown})")
        return problems
    unfetched = _outputs_on_host(raw_ev)
    want = "ok" if ev.type == "result" and _clean(ev) else "error"
    if unfetched and row is not None and row.status == "ok":
        want = "ok"  # the outputs it was parsed from stayed on the host: their digests (info.files) stand in
    if row is None or row.status != want:
        have = f"an {row.status} row" if row is not None else "no row"
        return [f"{where} would be an {want} row, the store holds {have} there"]
    if stored_ts is not None and (ev.ts is None or from_unix(ev.ts) != stored_ts):
        problems.append(f"{where}: ts is {'missing' if ev.ts is None else repr(ev.ts)}, {stored_ts.timestamp()!r} "
                        "stored")  # fmt: skip
    if row.case_index != ev.case_index:
        problems.append(f"{where} is for case {ev.case_index}, the stored row for case {row.case_index}")
    elif (ev.case or {}) != row.case:
        problems.append(f"{where}: case parameters {ev.case or {}} differ from the stored {row.case}")
    agent_error = raw_ev.type == "error" and raw_ev.ts is not None and raw_ev.data.get("kind") != "protocol"
    if agent_error and str(ev.data.get("message", "error")) != row.error:  # orch's own words (a protocol error
        # naming orch's clock) are not the line's
        problems.append(f"{where}: {_difference('its message', ev.data.get('message'), row.error)}")
    if want != "ok":
        return problems
    raw = raw_ev.data.get("metrics")
    raw = raw if isinstance(raw, dict) else {}
    # The agent's own metrics (derived ones depend on the GPU spec): each figure as the line writes it, and one the
    # line leaves out as the store would keep the line (a figure removed from it is a difference too); a line
    # whose outputs stayed on the host is not prepared here, so only its written figures count.
    prepared, samples = ({}, None) if unfetched else clean_metrics(ev.data.get("metrics"))
    for name in map(str, raw):
        written, have_m = raw.get(name), row.metrics.get(name) or {}
        m: dict[str, Any] = written if isinstance(written, dict) else {}
        for key in COMPARED_FIGURES:
            figure = m.get(key) if m.get(key) is not None or unfetched else (prepared.get(name) or {}).get(key)
            if (figure is not None or not unfetched) and figure != have_m.get(key):
                problems.append(f"{where}: metric {name}.{key} is {_shown(figure)}, {_shown(have_m.get(key))} "
                                "stored")  # fmt: skip
        got = m.get("samples") if m.get("samples") is not None or unfetched else (samples or {}).get(name)
        if got is not None or "samples" in have_m:  # rows are read with their samples (StoredPrefix)
            problems.extend(_samples_conflict(f"{where}: metric {name}", got, have_m.get("samples")))
    problems.extend(f"{where}: {text}" for text in _info_conflicts(raw_ev, ev, row.info or {}, unfetched))
    return problems


# info keys that follow the inventory (the GPU spec it names, a group's references), which may change between
# the store and a resume: never compared
INVENTORY_INFO_KEYS = frozenset({"gpu_spec", "peak_mem_gbps", "references"})
# what a command suite's ingest takes out of a result's info (the outputs it parses): absent from the stored row
PARSED_INFO_KEYS = frozenset({"outputs", "outputs_complete", "output", "stdout"})


def _outputs_on_host(raw_ev: Event) -> bool:
    """Whether a command suite's result line left its outputs on the host (``info.outputs_complete`` false) and
    they were not fetched for this comparison."""
    info = raw_ev.data.get("info")
    return raw_ev.type == "result" and isinstance(info, dict) and info.get("outputs_complete") is False \
        and "outputs" not in info  # fmt: skip


def _info_conflicts(raw_ev: Event, ev: Event, stored: Mapping[str, Any], unfetched: bool) -> list[str]:
    """How an ok line's ``info`` differs from the stored row's: every key of the line as the ingest prepared it
    and of the stored row, but :data:`INVENTORY_INFO_KEYS`; for a line whose outputs stayed on the host (not
    parsed here), the keys the agent wrote but :data:`PARSED_INFO_KEYS`."""
    if unfetched:
        raw = raw_ev.data.get("info")
        mine: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        keys = [k for k in mine if k not in PARSED_INFO_KEYS]
    else:
        got = ev.data.get("info")
        mine = got if isinstance(got, dict) else {}
        keys = [k for k in {**mine, **stored} if k not in INVENTORY_INFO_KEYS]
    missing = object()
    return [_difference(f"info.{k}", mine.get(k, missing), stored.get(k, missing), missing=missing)
            for k in keys if mine.get(k, missing) != stored.get(k, missing)]  # fmt: skip


def _difference(name: str, mine: Any, stored: Any, *, missing: object = None) -> str:
    """``"NAME.PATH is A, B stored"`` at the first place where ``mine`` and ``stored`` differ (into dicts and lists:
    ``info.files[0].stdout.sha256``), each value cut to 60 characters; ``missing`` is shown as "missing"."""
    while True:
        if isinstance(mine, dict) and isinstance(stored, dict):
            key = next((k for k in {**mine, **stored} if mine.get(k, missing) != stored.get(k, missing)), None)
            if key is None:
                break
            name, mine, stored = f"{name}.{key}", mine.get(key, missing), stored.get(key, missing)
        elif isinstance(mine, list) and isinstance(stored, list) and len(mine) == len(stored):
            at = next((i for i, (a, b) in enumerate(zip(mine, stored, strict=True)) if a != b), None)
            if at is None:
                break
            name, mine, stored = f"{name}[{at}]", mine[at], stored[at]
        else:
            break
    return f"{name} is {_shown(mine, missing)}, {_shown(stored, missing)} stored"


def _shown(value: Any, missing: object = None) -> str:
    """``repr`` of a value cut to 60 characters; "missing" for ``missing``."""
    if value is missing and missing is not None:
        return "missing"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _samples_conflict(where: str, mine: Any, stored: Any) -> list[str]:
    """How the raw samples ``mine`` of a metric differ from the ``stored`` ones: their count, or the first sample
    that differs (lists of thousands of samples are never written out)."""
    mine = mine if isinstance(mine, list) else []
    stored = stored if isinstance(stored, list) else []
    if len(mine) != len(stored):
        return [f"{where} has {counted(len(mine), 'sample')}, {len(stored)} stored"]
    at = next((i for i, (a, b) in enumerate(zip(mine, stored, strict=True)) if a != b), None)
    return [] if at is None else [f"{where}.samples[{at}] is {mine[at]!r}, {stored[at]!r} stored"]


def _clean(ev: Event) -> bool:
    """Whether the store keeps the result ``ev`` as an ok row (its metrics pass ``clean_metrics``)."""
    try:
        clean_metrics(ev.data.get("metrics"))
    except ValueError:
        return False
    return True


def log_conflict(entries: list[tuple[int, str]], stored: str | None, *, last_seq: int,
                 limit: int = LOG_MAX_CHARS) -> str | None:  # fmt: skip
    """How the log text the spool's lines up to ``last_seq`` give differs from the ``stored`` one, or None.

    ``entries``: ``(position, text)`` of what each line adds to the host run's log (``compute.log_entries``), in
    order. The store keeps log lines as one text, the last ``limit`` characters of the entries joined by newlines
    (``compute.append_bounded``), without their positions or ``ts``: so the comparison covers the levels and
    messages of what that text still holds (entries cut off its start are not compared), and names the first
    entry that does not read the same at its place — from the start, or from the end when the text was cut.
    Positions are not kept: when a line stopped being (or became) a log line, a neighbouring log line is named."""
    full = "\n".join(text for _, text in entries)
    have = stored or ""
    if full[-limit:] == have:
        return None
    if len(full) <= limit and len(have) <= limit:  # both whole: aligned at their start
        pos = 0
        for seq, text in entries:
            end = pos + len(text)
            if have[pos:end] != text or end not in (len(have), have.find("\n", end)):
                return _log_differs(seq, text, have[pos:].split("\n", 1)[0] if pos < len(have) else None)
            pos = end + 1
        return _log_extra(have[len(full) :].lstrip("\n"), "after", entries[-1][0] if entries else None, last_seq)
    tail = len(have)  # cut: aligned at their end
    for seq, text in reversed(entries):
        start = tail - len(text)
        mine, theirs = (text, have[start:tail]) if start >= 0 else (text[-tail:] if tail else "", have[:tail])
        if mine != theirs or (start > 0 and have[start - 1] != "\n"):
            return _log_differs(seq, mine, have[:tail].rsplit("\n", 1)[-1] if tail > 0 else None)
        if start <= 0:
            return None  # the entries before were cut off the stored text
        tail = start - 1
    return _log_extra(have[:tail], "before", entries[0][0] if entries else None, last_seq)


def _log_differs(seq: int, mine: str, theirs: str | None) -> str:
    return f"line {seq}: log text is {_shown(mine)}, {_shown(theirs) if theirs is not None else 'nothing'} stored"


def _log_extra(rest: str, side: str, seq: int | None, last_seq: int) -> str:
    where = f"{side} line {seq}'s log text" if seq is not None else "where the spool's lines give none"
    return f"log: the store holds {_shown(rest)} {where}, which no line of the spool up to line {last_seq} writes"


def refused_line_prefix(seq: int, line_type: str) -> str:
    """How the error row of a line the database refused begins (``store.refusals``)."""
    return f"agent line {seq} ({line_type}) was not stored: "


def hello_conflicts(hello: Event, *, run_id: str, host: str) -> list[str]:
    """How the spool's ``hello`` (line 0) differs from the run and host it is taken for: the run id it names, and
    the host it names (agents since the hello's ``host``; a hello without one is not judged on it)."""
    problems: list[str] = []
    if hello.type != "hello":
        return [f"line 0 is a {hello.type} line, not the agent's hello"]
    named_run, named_host = hello.data.get("run_id"), hello.data.get("host")
    if named_run != run_id:
        problems.append(f"its hello names run {named_run}, not {run_id}")
    if isinstance(named_host, str) and named_host and named_host != host:
        problems.append(f"its hello names host {named_host!r}, not {host!r}")
    return problems


def hello_record_conflicts(hello: Event, *, suite: str, rec: HostRunRecord | None) -> list[str]:
    """How the spool's ``hello`` differs from the stored run (its ``suite``) and host run (``rec``: the agent
    version, the case count and the host facts of :data:`FACT_KEYS` it stored): a spool of this run and host that
    another agent or another machine wrote (a copy swapped in that keeps the run id and host name), or a hello
    rewritten. A field the stored host run holds and the hello leaves out is a difference too; a field the store
    lacks is not judged, nor a version the agent could not name (``"dev"``). The hello of an agent that could not
    read its spec names no suite and 0 cases: not a difference in the suite."""
    problems: list[str] = []
    named_suite, total = hello.data.get("suite"), hello.data.get("cases_total")
    if named_suite != suite and not (named_suite is None and total == 0):
        problems.append(f"its hello names suite {named_suite!r}, the stored run is of suite {suite!r}")
    if rec is None:
        return problems
    version = hello.data.get("agent_version")
    if _known(rec.agent_version) and version not in ("dev", "unknown") and version != rec.agent_version:
        named = str(version)[:12] if isinstance(version, str) and version else "none"
        problems.append(f"its hello names agent {named}, the stored host run agent {str(rec.agent_version)[:12]}")
    if rec.cases_total is not None and total != rec.cases_total:
        problems.append(f"its hello announces {total if total is not None else 'no'} cases, the stored host run "
                        f"{rec.cases_total} cases")  # fmt: skip
    if rec.facts:
        facts = hello.data.get("facts")
        summary = host_facts_summary(facts if isinstance(facts, dict) else {})
        # the store keeps the summary; a hello's own facts stored before it (a host run started without facts)
        # are summarised the same way
        stored = rec.facts if "gpu_uuids" in rec.facts else host_facts_summary(rec.facts)
        for key in FACT_KEYS:
            mine, theirs = summary.get(key), stored.get(key)
            if (_known(mine) or _known(theirs)) and mine != theirs:
                problems.append(f"host fact {key} is {mine!r} in the spool, {theirs!r} stored for {rec.host}")
    return problems


def _known(value: Any) -> bool:
    """A stored or announced field worth comparing: not missing, empty, or the placeholders of an agent that could
    not name its version (``"dev"``, an unpacked source tree) or a spool imported without one (``"unknown"``)."""
    return value not in (None, [], "", "dev", "unknown")


def replaced_spool_error(host: str, spool: str, run_id: str, hello: Event) -> HostError:
    """The host's error for a spool whose hello names another run or host (:func:`hello_conflicts`): another
    spool was put in this one's place; nothing of it is stored. ``spool``: its path on the host as the user types it."""
    named_run, named_host = hello.data.get("run_id"), hello.data.get("host")
    holds = f"run {named_run}" + (f" of host {named_host!r}" if isinstance(named_host, str) and named_host else "")
    if hello.type != "hello":
        holds = f"no hello at line 0 (a {hello.type} line)"
    return HostError(
        host,
        f"the spool {spool} holds {holds} (its first line says so), not run {run_id} of {host}: it was replaced on "
        "the host; nothing of it was stored",
        f"the rows stored for {host} stay as they were; if a copy of this run's spool was kept, orch runs import "
        f"it --host {host}; the spool now there belongs to its own run",
    )


def changed_spool_error(host: str, spool: str, run_id: str, problems: list[str]) -> HostError:
    """The host's error for a spool whose lines at stored positions differ from the stored rows
    (:func:`line_conflicts`): it was rewritten on the host after orch stored them; nothing of it is stored."""
    return HostError(
        host,
        f"the spool {spool} conflicts with the stored run {run_id}: {shown(problems)}; it was changed on the host "
        "after orch stored those lines; nothing more of it was stored",
        f"the rows stored for {host} stay as the agent first wrote them; find what rewrote {spool} (the agent "
        "only appends to it)",
    )


def past_done_note(after_done: int, done_at: int) -> str:
    """The host's error for ``after_done`` lines found after the done line at position ``done_at``: never stored,
    on import and on a live or resumed follow alike."""
    return (f"{counted(after_done, 'line')} after the done line (line {done_at}) were not stored: the agent "
            "writes nothing after done, so the spool was changed or appended to")  # fmt: skip


def shown(problems: list[str]) -> str:
    """The first :data:`MAX_PROBLEMS_SHOWN` problems joined, and how many more there are."""
    more = len(problems) - MAX_PROBLEMS_SHOWN
    return "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + (f"; and {more} more" if more > 0 else "")


@dataclass
class StoredPrefix:
    """A host run's stored rows (by seq) and done counts, against which the spool's lines at stored positions
    (up to ``last_seq``) are compared; ``problems`` collects every difference found (:meth:`compare`)."""

    run_id: str
    host: str
    last_seq: int
    rows: dict[int, ResultRecord]
    stored_done: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    suite: str = ""  # the stored run's suite, and its host run: the hello at line 0 is compared with them
    record: HostRunRecord | None = None
    times: dict[int, datetime] = field(default_factory=dict)  # each stored row's ts, by seq
    log: list[tuple[int, str]] = field(default_factory=list)  # what the spool's lines add to the log, as compared

    @classmethod
    def load(cls, store: Store, run_id: str, host: str) -> StoredPrefix:
        """Read the host run's rows, ``last_seq`` and done counts from ``store`` (one page of 1000 rows at a time).
        Raises NotFoundError for an unknown run or host run."""
        rows: dict[int, ResultRecord] = {}
        offset = 0
        while True:
            page = store.results(run_id, host=host, limit=1000, offset=offset, samples=True)
            rows.update((r.seq, r) for r in page.items)
            offset += len(page.items)
            if not page.items or offset >= page.total:
                break
        detail = store.get_run(run_id)
        rec = detail.host_run(host)
        last = rec.last_seq if rec is not None else -1
        return cls(run_id, host, last, rows, rec.done_counts if rec is not None else None, suite=detail.suite,
                   record=rec, times=store.result_times(run_id, host))  # fmt: skip

    def compare(self, raw_ev: Event, ev: Event) -> None:
        """Note how the spool's line at ``ev.seq`` (at most ``last_seq``) differs from what is stored there; at
        ``last_seq``, how the log text its lines give differs from the stored one (:func:`log_conflict`).
        ``ev``: the line as the ingest stored it (enriched), whose log text is compared."""
        row = self.rows.get(ev.seq)
        if ev.seq == 0:
            self.problems.extend(hello_conflicts(raw_ev, run_id=self.run_id, host=self.host)
                                 or hello_record_conflicts(raw_ev, suite=self.suite, rec=self.record))  # fmt: skip
        else:
            self.problems.extend(line_conflicts(raw_ev, ev, row, stored_done=self.stored_done,
                                                stored_ts=self.times.get(ev.seq)))  # fmt: skip
        refused = row is not None and (row.error or "").startswith(refused_line_prefix(ev.seq, ev.type))
        if not refused:  # a line the database refused is a row, nothing of it in the log
            stored_ev, stand_ins = storable_event(ev)
            self.log.extend((ev.seq, text) for text in log_entries(stored_ev, stand_ins))
        if ev.seq == self.last_seq:
            found = log_conflict(self.log, self.record.log if self.record is not None else None,
                                 last_seq=self.last_seq)  # fmt: skip
            if found is not None:
                self.problems.append(found)
