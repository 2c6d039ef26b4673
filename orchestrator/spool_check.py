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
from orchestrator.store.compute import clean_metrics, from_unix
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
    want = "ok" if ev.type == "result" and _clean(ev) else "error"
    if row is None or row.status != want:
        have = f"an {row.status} row" if row is not None else "no row"
        return [f"{where} would be an {want} row, the store holds {have} there"]
    if stored_ts is not None and ev.ts is not None and from_unix(ev.ts) != stored_ts:
        problems.append(f"{where}: ts is {ev.ts!r}, {stored_ts.timestamp()!r} stored")
    if row.case_index != ev.case_index:
        problems.append(f"{where} is for case {ev.case_index}, the stored row for case {row.case_index}")
    elif (ev.case or {}) != row.case:
        problems.append(f"{where}: case parameters {ev.case or {}} differ from the stored {row.case}")
    if want == "ok":
        raw = raw_ev.data.get("metrics")  # the agent's own figures; derived ones depend on the GPU spec
        for name, m in raw.items() if isinstance(raw, dict) else ():
            have_m = row.metrics.get(str(name)) or {}
            for key in COMPARED_FIGURES:
                if isinstance(m, dict) and m.get(key) is not None and have_m.get(key) != m.get(key):
                    problems.append(f"{where}: metric {name}.{key} is {m.get(key)!r}, {have_m.get(key)!r} stored")
            if isinstance(m, dict) and (m.get("samples") is not None or "samples" in have_m):  # rows are read
                # with their samples (StoredPrefix)
                problems.extend(_samples_conflict(f"{where}: metric {name}", m.get("samples"), have_m["samples"]))
        raw_info, info = raw_ev.data.get("info"), ev.data.get("info")
        if isinstance(raw_info, dict) and isinstance(info, dict):
            stored_info = row.info or {}
            for key in raw_info:  # the agent's keys, as the ingest prepared them (a command suite's are replaced)
                if key in info and info[key] != stored_info.get(key):
                    problems.append(f"{where}: info.{key} is {_short(info[key])}, {_short(stored_info.get(key))} "
                                    "stored")  # fmt: skip
    return problems


def _samples_conflict(where: str, mine: Any, stored: Any) -> list[str]:
    """How the raw samples ``mine`` of a metric differ from the ``stored`` ones: their count, or the first sample
    that differs (lists of thousands of samples are never written out)."""
    mine = mine if isinstance(mine, list) else []
    stored = stored if isinstance(stored, list) else []
    if len(mine) != len(stored):
        return [f"{where} has {counted(len(mine), 'sample')}, {len(stored)} stored"]
    at = next((i for i, (a, b) in enumerate(zip(mine, stored, strict=True)) if a != b), None)
    return [] if at is None else [f"{where}.samples[{at}] is {mine[at]!r}, {stored[at]!r} stored"]


def _short(value: Any) -> str:
    """``repr`` of a value, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _clean(ev: Event) -> bool:
    """Whether the store keeps the result ``ev`` as an ok row (its metrics pass ``clean_metrics``)."""
    try:
        clean_metrics(ev.data.get("metrics"))
    except ValueError:
        return False
    return True


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
    another agent or another machine wrote (a copy swapped in that keeps the run id and host name). A field the
    stored host run lacks, or the hello lacks (the hello of a spec the agent could not read names no suite), is not
    judged."""
    problems: list[str] = []
    named_suite = hello.data.get("suite")
    if named_suite is not None and named_suite != suite:  # None: an agent that could not read its spec says so
        problems.append(f"its hello names suite {named_suite!r}, the stored run is of suite {suite!r}")
    if rec is None:
        return problems
    version = hello.data.get("agent_version")
    if _known(version) and _known(rec.agent_version) and version != rec.agent_version:
        problems.append(f"its hello names agent {str(version)[:12]}, the stored host run agent "
                        f"{str(rec.agent_version)[:12]}")  # fmt: skip
    total = hello.data.get("cases_total")
    if isinstance(total, int) and not isinstance(total, bool) and rec.cases_total is not None \
            and total != rec.cases_total:  # fmt: skip
        problems.append(f"its hello announces {total} cases, the stored host run {rec.cases_total} cases")
    facts = hello.data.get("facts")
    if isinstance(facts, dict) and rec.facts:
        summary = host_facts_summary(facts)
        for key in FACT_KEYS:
            mine, theirs = summary.get(key), rec.facts.get(key)
            if _known(mine) and _known(theirs) and mine != theirs:
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
        """Note how the spool's line at ``ev.seq`` (at most ``last_seq``) differs from what is stored there."""
        if ev.seq == 0:
            self.problems.extend(hello_conflicts(raw_ev, run_id=self.run_id, host=self.host)
                                 or hello_record_conflicts(raw_ev, suite=self.suite, rec=self.record))  # fmt: skip
            return
        self.problems.extend(line_conflicts(raw_ev, ev, self.rows.get(ev.seq), stored_done=self.stored_done,
                                            stored_ts=self.times.get(ev.seq)))  # fmt: skip
