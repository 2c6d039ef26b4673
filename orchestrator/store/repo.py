"""The Store: every SQL statement of orch lives here.

Writers: the runner (``create_run`` → ``start_host_run`` → ``ingest``... → ``finish_host_run`` →
``finish_run``) and the API's few writes. Readers: the API and ``orch runs``. Every method opens its own
short transaction; SQLAlchemy errors are translated to ``StoreError`` (with a hint) at this boundary.

Ingest is idempotent on (run, host, seq): events at or below the host run's ``last_seq`` are skipped, and a
unique constraint with ``ON CONFLICT DO NOTHING`` is the backstop when two writers race.
"""

from __future__ import annotations

import functools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Engine,
    Table,
    and_,
    bindparam,
    column,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.exc import (
    DataError,
    IntegrityError,
    InternalError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session

from orchestrator.analysis import roof
from orchestrator.analysis.compare import is_noisy, metric_direction, noise_verdict, too_noisy, wide_sides
from orchestrator.errors import IncomparableError, NotFoundError, StoreError, UsageError
from orchestrator.ingest import done_record, unfinished_error
from orchestrator.protocol import JUDGED_KEY, Event
from orchestrator.store import compute, known
from orchestrator.store.compute import RUN_REF_FORMS
from orchestrator.store.models import (
    HOST_RUN_STATUSES,
    RUN_STATUSES,
    Build,
    Host,
    HostRun,
    JSONPathRead,
    Result,
)
from orchestrator.store.models import (
    Run as RunRow,
)
from orchestrator.store.records import (
    EARLIER_ERRORS_KEY,
    EARLIER_ERRORS_MAX,
    CompareCase,
    Comparison,
    FlaggedCase,
    HostRecord,
    HostRunRecord,
    HostRunState,
    Page,
    ResultRecord,
    RunDetail,
    RunFilter,
    RunSummary,
    Series,
    SeriesLine,
    SeriesPoint,
)
from orchestrator.store.session import compact_json, make_engine, read_session, write_session
from orchestrator.store.storable import storable, storable_event

LOG_MAX_CHARS = compute.LOG_MAX_CHARS
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_UUID_DASHES = (8, 12, 16, 20)  # positions (in hex digits) after which a UUID string has a dash


def _dashed_prefix(digits: str) -> str:
    """``digits`` (hex, no dashes) as the start of a UUID string, dashes put back."""
    out = ""
    for i, ch in enumerate(digits):
        if i in _UUID_DASHES:
            out += "-"
        out += ch
    return out


def _dashed_suffix(digits: str) -> str:
    """``digits`` (hex, no dashes) as the end of a UUID string, dashes put back."""
    start = 32 - len(digits)
    out = ""
    for i, ch in enumerate(digits, start=start):
        if i in _UUID_DASHES and i != start:
            out += "-"
        out += ch
    return out


RUN_ID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# case parameter -> indexed column (moe-sweep names the batch "M"; other suites "m")
TYPED_AXES = {"m": "m", "M": "m", "concurrency": "concurrency", "size_bytes": "size_bytes"}
DEFAULT_COMPARE_METRIC = "time_ms"
COMPARE_THRESHOLD = 0.05  # a relative change beyond 5% (and clear of the noise) is a regression or improvement
_IN_CHUNK = 900  # ids per IN (..) list: SQLite before 3.32 allows 999 bound parameters per statement
_RESULT_TABLE: Table = Result.__table__  # type: ignore[assignment]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def check_name(kind: str, name: str) -> str:
    """Validate a metric or case-parameter name (letters, digits, underscore; up to 64)."""
    if not NAME_RE.match(name):
        raise UsageError(
            f"invalid {kind} name {name!r}",
            f"a {kind} name is letters, digits and '_' (up to 64, not starting with a digit), e.g. time_ms",
        )
    return name


def _json_num(col: Any, *path: str) -> ColumnElement[float]:
    return col[path].as_float()  # type: ignore[no-any-return]


def _metric_center(metric: str) -> ColumnElement[float]:
    """A metric's headline figure, extracted by the database: its median, else its value."""
    return func.coalesce(_json_num(Result.metrics, metric, "median"), _json_num(Result.metrics, metric, "value"))


def _pairs_cond(pairs: Iterable[tuple[str, str]]) -> ColumnElement[bool]:
    """``(run_id, host) in pairs`` as one ``run_id = ? AND host IN (..)`` per run: each an index range."""
    by_run: dict[str, list[str]] = defaultdict(list)
    for rid, host in pairs:
        by_run[rid].append(host)
    return or_(*(and_(Result.run_id == rid, Result.host.in_(hosts)) for rid, hosts in by_run.items()))


class Store:
    """The results store over one SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def from_url(cls, url: str) -> Store:
        """Build the engine (no connection yet). Raises ConfigError for a bad URL or a missing driver."""
        return cls(make_engine(url))

    def close(self) -> None:
        self.engine.dispose()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    # -- transactions ----------------------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._translate(), read_session(self.engine) as s:
            yield s

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._translate(), write_session(self.engine) as s:
            yield s

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except (OperationalError, ProgrammingError) as exc:
            from orchestrator.store.migrate import translate  # credentials scrubbed, hint by cause

            err = translate(exc, self.engine, "database error")
            if "no such table" in err.message or ("relation" in err.message and "does not exist" in err.message):
                err.hint = "run `orch db upgrade` to create or migrate the schema"
            raise err from exc
        except IntegrityError as exc:
            raise StoreError(f"database refused a write: {str(exc.orig).splitlines()[0]}") from exc
        except (DataError, InternalError) as exc:  # a value the database cannot hold: not a connection problem
            from orchestrator.store.migrate import translate

            err = translate(exc, self.engine, "the database refused a value")
            err.hint = "the database is reachable but refused a value of this write; report it with the run id"
            raise err from exc
        except SQLAlchemyError as exc:
            from orchestrator.store.migrate import translate

            raise translate(exc, self.engine, "database error") from exc

    # -- schema ----------------------------------------------------------------------------------------------

    def upgrade(self) -> None:
        """Alembic upgrade to head (creates the schema on an empty database)."""
        from orchestrator.store import migrate

        migrate.upgrade(self.engine)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (None: not migrated). Raises StoreError if unreachable."""
        from orchestrator.store import migrate

        with self._translate():
            return migrate.current_revision(self.engine)

    def ping(self) -> None:
        """One round trip to the database; raises StoreError when it is unreachable."""
        with self._read() as s:
            s.execute(select(1))

    # -- writes: inventory and builds ------------------------------------------------------------------------

    def upsert_host(
        self,
        name: str,
        *,
        address: str | None,
        group: str | None,
        labels: dict[str, str],
        facts: dict[str, Any] | None = None,
    ) -> None:
        now = _now()
        with self._write() as s:
            _upsert_host(s.get(Host, name), s, name, address, group, labels, facts, now)

    def upsert_hosts(self, hosts: Sequence[tuple[str, str | None, str | None, dict[str, str]]]) -> None:
        """:meth:`upsert_host` (without facts) for ``(name, address, group, labels)`` rows in ONE transaction: a
        run's hosts at its start (one commit and one SELECT per 500 names instead of a transaction per host).
        A name given twice ends as its last row says, as two upsert_host calls would leave it."""
        now = _now()
        rows = {name: (address, group, labels) for name, address, group, labels in hosts}  # the last row wins
        names = list(rows)
        with self._write() as s:
            for i in range(0, len(names), 500):  # bounded IN lists
                chunk = names[i : i + 500]
                have = {h.name: h for h in s.scalars(select(Host).where(Host.name.in_(chunk)))}
                for name in chunk:
                    address, group, labels = rows[name]
                    _upsert_host(have.get(name), s, name, address, group, labels, None, now)

    def record_build(self, sha256: str, *, name: str, size_bytes: int) -> None:
        with self._write() as s:
            if s.get(Build, sha256) is None:
                s.add(Build(sha256=sha256, name=name, size_bytes=size_bytes, created_at=_now()))

    # -- writes: runs ----------------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        suite: str,
        params: dict[str, Any],
        preset: str | None,
        label: str | None,
        hosts: list[str],
        started_by: str,
        started_on: str,
        run_id: str | None = None,
        started_at: datetime | None = None,
    ) -> str:
        """A new run (status ``running``, UUIDv7 id unless ``run_id`` is given: an imported spool's run, which
        also gives ``started_at``, aware; one in the future, a host clock ahead, is taken as now), one ``pending``
        host run per host; returns the id."""
        run_id = run_id or compute.uuid7()
        now = _now()
        with self._write() as s:
            known = set(s.scalars(select(Host.name).where(Host.name.in_(hosts))))
            for h in dict.fromkeys(hosts):
                if h not in known:
                    s.add(Host(name=h, labels={}, first_seen=now, last_seen=now))
            s.add(
                RunRow(
                    id=run_id,
                    suite=suite,
                    params=params,
                    preset=preset,
                    label=label,
                    status="running",
                    started_by=started_by,
                    started_on=started_on,
                    started_at=started_at if started_at is not None and started_at <= now else now,
                    info={},
                )
            )
            s.flush()
            for h in dict.fromkeys(hosts):
                s.add(HostRun(run_id=run_id, host=h, status="pending", last_seq=-1, results=0, errors=0, info={}))
        return run_id

    def add_host_runs(self, run_id: str, hosts: Sequence[str]) -> None:
        """Add a ``pending`` host run per host not yet in the run (a Slurm job's nodes, known once it is
        allocated); hosts already in the run are left as they are. Raises NotFoundError for an unknown run."""
        now = _now()
        with self._write() as s:
            self._run(s, run_id)
            known = set(s.scalars(select(Host.name).where(Host.name.in_(hosts))))
            have = set(s.scalars(select(HostRun.host).where(HostRun.run_id == run_id)))
            for h in dict.fromkeys(hosts):
                if h not in known:
                    s.add(Host(name=h, labels={}, first_seen=now, last_seen=now))
            s.flush()
            for h in dict.fromkeys(hosts):
                if h not in have:
                    s.add(HostRun(run_id=run_id, host=h, status="pending", last_seq=-1, results=0, errors=0, info={}))

    def start_host_run(
        self,
        run_id: str,
        host: str,
        *,
        facts: dict[str, Any],
        agent_version: str,
        build_sha: str | None,
        info: dict[str, Any] | None = None,
        started_ts: float | None = None,
    ) -> None:
        """Mark a host run started with its facts; ``info`` is merged into its ``info`` in the same transaction
        (as :meth:`set_host_run_info` would: one commit per host instead of two). ``started_ts``: when the agent
        wrote its hello (unix s, the host's clock; ``orch runs import`` of a spool copied long after), the host
        run's ``started_at`` when it is not in the future; else, or without it, now. A host run that had started
        keeps its ``started_at``; a run whose host started before the run's ``started_at`` (an imported run's
        second host, whose hello is earlier) starts then."""
        now, hello_at = _now(), compute.from_unix(started_ts)
        facts = storable(facts, "facts")[0]  # what the host's tools print may hold NUL (PostgreSQL cannot)
        with self._write() as s:
            hr = self._host_run(s, run_id, host)
            hr.status, hr.facts, hr.agent_version, hr.build_sha = "running", facts, agent_version, build_sha
            hr.started_at = hr.started_at or (hello_at if hello_at is not None and hello_at <= now else now)
            if hello_at is not None and hr.started_at == hello_at:
                run = self._run(s, run_id)
                if hello_at < run.started_at:
                    run.started_at = hello_at
            if info is not None:
                hr.info = {**(hr.info or {}), **info}
            s.execute(update(Host).where(Host.name == host).values(facts=facts, last_seen=now))

    def set_host_run_facts(self, run_id: str, host: str, facts: dict[str, Any]) -> None:
        """The host facts of a host run (and the host's latest), leaving its status alone: a Slurm node's facts
        arrive with its agent's hello line, after the host run was started."""
        facts = storable(facts, "facts")[0]
        with self._write() as s:
            hr = self._host_run(s, run_id, host)
            hr.facts = facts
            s.execute(update(Host).where(Host.name == host).values(facts=facts, last_seen=_now()))

    def reopen_host_run(self, run_id: str, host: str) -> None:
        """Before ``orch run --resume`` follows a host run again: a host run that had ended (``finished_at``
        set) goes back to ``running`` and its ``error`` moves to ``info["earlier_errors"]`` (a list of
        ``{"status", "error", "finished_at"}``, oldest first, at most ``EARLIER_ERRORS_MAX``). ``error`` is
        only ever the reason for the host run's *current* status; an earlier attempt's failure stays visible
        as history there (docs/architecture.md, "Resume"). A host run that had not ended is left as it is."""
        with self._write() as s:
            hr = self._host_run(s, run_id, host)
            if hr.finished_at is None:
                return
            info = dict(hr.info or {})
            if hr.error:
                earlier = info.get(EARLIER_ERRORS_KEY)
                earlier = list(earlier) if isinstance(earlier, list) else []
                earlier.append({"status": hr.status, "error": hr.error, "finished_at": hr.finished_at.isoformat()})
                info[EARLIER_ERRORS_KEY] = earlier[-EARLIER_ERRORS_MAX:]
            hr.info, hr.error, hr.status, hr.finished_at = info, None, "running", None

    def finish_host_run(
        self, run_id: str, host: str, status: str, error: str | None = None, *, info: dict[str, Any] | None = None,
        ended_ts: float | None = None,
    ) -> None:  # fmt: skip
        """End a host run with ``status`` (``error`` appended to its error); ``info`` is merged into its ``info``
        in the same transaction (as :meth:`set_host_run_info` would). ``ended_ts``: when the agent wrote its done
        line (unix s, the host's clock), the host run's ``finished_at`` when it lies between the latest of the
        host run's start and its stored rows' ``ts``, and now (a run collected by a resume hours after its agents
        finished ended then, not at the collection; a done line dated before a result it counts is not believed);
        else, or without it, now. Raises ValueError for an unknown status."""
        if status not in HOST_RUN_STATUSES:
            raise ValueError(f"host run status {status!r} not in {HOST_RUN_STATUSES}")
        with self._write() as s:
            hr = self._host_run(s, run_id, host)
            now, ended = _now(), compute.from_unix(ended_ts)
            plausible = ended is not None and hr.started_at is not None and hr.started_at <= ended <= now
            if plausible:
                last = s.scalar(select(func.max(Result.ts)).where(Result.run_id == run_id, Result.host == host))
                plausible = last is None or (ended is not None and last <= ended)
            hr.status, hr.finished_at = status, ended if plausible else now
            if info is not None:
                hr.info = {**(hr.info or {}), **info}
            if error:
                hr.error = compute.append_bounded(hr.error, error, LOG_MAX_CHARS)

    def finish_run(self, run_id: str, status: str) -> None:
        """End a run with ``status``; its ``finished_at`` is its host runs' latest ``finished_at`` when every one
        has ended (a resumed run ended when its last host did, not when it was collected), else now. Raises
        ValueError for an unknown status, NotFoundError for an unknown run."""
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} not in {RUN_STATUSES}")
        with self._write() as s:
            run = self._run(s, run_id)
            ends = list(s.scalars(select(HostRun.finished_at).where(HostRun.run_id == run_id)))
            known = [e for e in ends if e is not None]
            ended = max(known) if known and len(known) == len(ends) else None
            run.status, run.finished_at = status, ended if ended is not None and ended >= run.started_at else _now()

    def set_run_info(self, run_id: str, info: dict[str, Any]) -> None:
        """Merge analysis figures into the run's ``info`` (hook for the runner: plateau, summary...)."""
        with self._write() as s:
            run = self._run(s, run_id)
            run.info = {**(run.info or {}), **info}

    def note_chosen_preset(self, run_id: str) -> None:
        """Set the run's ``preset`` to the one its started hosts chose (``host_runs.info.preset``, the suite's
        default for a CPU or a CUDA host) when they all chose the same; None when they differ (each host's
        stays in its info). For a run started without ``--preset``."""
        with self._write() as s:
            run = self._run(s, run_id)
            infos = s.scalars(select(HostRun.info).where(HostRun.run_id == run_id)).all()
            chosen = {i["preset"] for i in infos if isinstance(i, dict) and isinstance(i.get("preset"), str)}
            run.preset = chosen.pop() if len(chosen) == 1 else None

    def set_host_run_info(self, run_id: str, host: str, info: dict[str, Any]) -> None:
        """Merge into a host run's ``info``, e.g. ``{"plateau": {"m": 256, "metric": "time_ms"}}`` —
        ``orch runs show`` and the API render what is stored there."""
        with self._write() as s:
            hr = self._host_run(s, run_id, host)
            hr.info = {**(hr.info or {}), **info}

    def set_label(self, run_id: str, label: str | None) -> RunSummary:
        with self._write() as s:
            self._run(s, run_id).label = label
        return self._summaries([self.get_run(run_id).id])[0]

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its host runs and results. Raises NotFoundError."""
        with self._write() as s:
            self._run(s, run_id)
            s.execute(delete(Result).where(Result.run_id == run_id))
            s.execute(delete(HostRun).where(HostRun.run_id == run_id))
            s.execute(delete(RunRow).where(RunRow.id == run_id))

    # -- ingest ----------------------------------------------------------------------------------------------

    def ingest(self, run_id: str, host: str, events: Sequence[Event], *, lines_out: list[int] | None = None) -> int:
        """Store a batch of one host's events; returns the number of result rows newly inserted; ``lines_out``
        (when given) gets the number of lines this call's transaction stored appended (see :meth:`ingest_many`).

        An event's ``seq`` is its line's position in the host's spool (``protocol.parse_line``). Events at or
        below the host run's ``last_seq`` are skipped (re-delivered after a reconnect: idempotent); the others
        must continue it one line at a time — ``last_seq`` only ever advances by one line per event, and a batch
        that would skip a position raises ValueError (a bug in the caller, nothing of the batch is stored).

        ``result`` → a result row; ``error`` → a result row with status ``error`` (with its case when it has
        one; a host-level error is a row too, and the host run's error text is left to its verdict, which names
        the first error row); ``log`` lines → the host run's
        log text; ``hello`` → facts, agent version, cases_total when not yet known; ``done`` → the agent's counts
        and status (``ingest.done_record``); ``case_start`` and unknown types are skipped. A result whose metrics
        are malformed is stored as an error row.
        """
        return self.ingest_many([(run_id, host, events)], lines_out=lines_out)[0]

    def ingest_many(
        self, batches: Sequence[tuple[str, str, Sequence[Event]]], *, lines_out: list[int] | None = None
    ) -> list[int]:
        """Store the event batches of several host runs — ``(run_id, host, events)`` each, with the rules of
        :meth:`ingest` — in ONE transaction (the runner's store writer batches across hosts: one commit, one
        SELECT of the host runs, one INSERT of every result row, whatever the number of hosts). Returns the
        result rows newly inserted per batch, in order. A host run may appear more than once: its batches are
        applied in order. All or nothing: a batch that raises (ValueError for a gap in positions, NotFoundError
        for an unknown host run) rolls back every batch of the call.

        ``lines_out``, when given, gets per batch the number of lines (positions) this call's transaction stored,
        appended once it committed: the host run is read locked, so lines another writer stored first (two
        ``orch runs import`` of one spool at once) are counted by that writer only."""
        if not batches:
            return []
        stored_lines: list[int] = []
        with self._write() as s:
            hrs = self._host_run_states(s, {(rid, host) for rid, host, _ in batches})
            rows: list[dict[str, Any]] = []
            spans: list[tuple[_IngestState, int, int]] = []  # a batch's host run and its rows' [start, end) in rows
            for run_id, host, events in batches:
                hr = hrs[(run_id, host)]
                start = len(rows)
                nxt = hr.last_seq + 1
                for ev in events:
                    if ev.seq < nxt:
                        continue
                    if ev.seq > nxt:
                        raise ValueError(
                            f"ingest for {host} in run {run_id}: position {ev.seq} follows {nxt - 1}; "
                            "positions must be contiguous"
                        )
                    self._apply(hr, ev, rows, run_id, host)
                    nxt += 1
                stored_lines.append(nxt - 1 - hr.last_seq)
                hr.last_seq = nxt - 1
                spans.append((hr, start, len(rows)))
            inserted = self._insert_results(s, rows) if rows else 0
            if inserted == len(rows):
                for hr, start, end in spans:
                    errors = [r["status"] for r in rows[start:end]].count("error")
                    hr.results += end - start - errors
                    hr.errors += errors
                _update_host_runs(s, hrs.values())
                out = [end - start for _, start, end in spans]
            else:
                out = self._recount(s, hrs, spans)
        if lines_out is not None:
            lines_out.extend(stored_lines)
        return out

    def _recount(
        self, s: Session, hrs: dict[tuple[str, str], _IngestState], spans: list[tuple[_IngestState, int, int]]
    ) -> list[int]:
        """ingest_many's counts when the unique backstop dropped rows another writer had stored."""
        before = {id(hr): (hr.results, hr.errors) for hr in hrs.values()}
        for hr in hrs.values():
            counts: dict[str, int] = dict(
                s.execute(
                    select(Result.status, func.count())
                    .where(Result.run_id == hr.run_id, Result.host == hr.host)
                    .group_by(Result.status)
                ).all()  # a list of rows: dict() would take a Result for a mapping (it has keys())
            )
            hr.results, hr.errors = counts.get("ok", 0), counts.get("error", 0)
        _update_host_runs(s, hrs.values())
        out, seen = [], set()
        for hr, _, _ in spans:  # a host run's new rows go to its first batch of the call
            old = before[id(hr)]
            out.append(0 if id(hr) in seen else hr.results + hr.errors - old[0] - old[1])
            seen.add(id(hr))
        return out

    def _insert_results(self, s: Session, rows: list[dict[str, Any]]) -> int:
        """Insert result rows, skipping (run_id, host, seq) already stored; returns the number inserted.

        PostgreSQL: one ``INSERT .. SELECT FROM json_to_recordset(:rows)`` — a single parameter the server
        parses, instead of psycopg expanding a 15-column VALUES list client-side (that parse was 40% of ingest).
        Rows with a large ``info`` or ``samples`` (command outputs' excerpts, long sample lists; judged by the
        batch's first row) go by one pipelined ``executemany`` of JSON text instead: the server parsed each large
        value twice (the recordset, then the column's own json), and 20 KB rows ran at 0.44-0.69x of the floor,
        2 MB rows at 0.58x (bench/ingest.py, load 20-25); 1.28x and 1.35x this way.
        SQLite: one DB-API ``executemany`` of tuples whose JSON and datetime columns are encoded here as
        SQLAlchemy's types would (``_sqlite_result_rows``): its per-row parameter processing was a third of the
        ingest of 200 B lines (bench/ingest.py).
        """
        conn = s.connection()
        if self.dialect == "postgresql" and _pg_row_json_bytes(rows[0]) >= PG_RECORDSET_MAX_JSON_BYTES:
            return int(conn.exec_driver_sql(_pg_insert_results_sql(), _pg_result_rows(rows)).rowcount)
        if self.dialect == "postgresql":
            for r in rows:
                ts = r["ts"]
                r["ts"] = ts.isoformat() if ts is not None else None
            stmt = _pg_insert_results().execution_options(preserve_rowcount=True)  # INSERTs drop it otherwise
            return int(conn.execute(stmt, {"rows": rows}).rowcount)
        # sqlite3's executemany sums rowcount; skipped conflicts count 0
        return int(conn.exec_driver_sql(_SQLITE_INSERT_RESULTS, _sqlite_result_rows(rows)).rowcount)

    def _apply(
        self, hr: HostRun | _IngestState, ev: Event, rows: list[dict[str, Any]], run_id: str, host: str
    ) -> None:
        if ev.type == "result" and ev.plain and ev.clean_metrics is not None:  # the hot path: no stand-in, no log
            metrics, samples = ev.clean_metrics  # checked by ingest.SpoolLines (linecheck.checked_fields)
            rows.append(_result_row(run_id, host, ev, "ok", metrics, samples, None))
            return
        ev, stand_ins = storable_event(ev)  # NUL, lone surrogates, NaN, >64-bit ints: stored alike on both engines
        if stand_ins or ev.type == "log":  # the stand-ins of a line that is no row; a log line's text
            for entry in compute.log_entries(ev, stand_ins):
                hr.log = compute.append_bounded(hr.log, entry, LOG_MAX_CHARS)
        d = ev.data
        if ev.type == "result":
            try:
                metrics, samples = ev.clean_metrics or compute.clean_metrics(ev.data.get("metrics"))
                rows.append(_result_row(run_id, host, ev, "ok", metrics, samples, None))
            except ValueError as exc:  # the agent counted it as a result (protocol.JUDGED_KEY)
                row = _result_row(run_id, host, ev, "error", {}, None, f"malformed result: {exc}")
                row["info"] = {**(row["info"] or {}), JUDGED_KEY: True, "error_kind": "invalid"}
                rows.append(row)
        elif ev.type == "error":  # a host-level one too is a row, never the host run's error text: that is the
            # reason for its status, written with it (finish_host_run) — the same text for one spool, followed
            # live, resumed after a failed attempt (whose error is history) or imported
            rows.append(_result_row(run_id, host, ev, "error", {}, None, str(d.get("message", "error"))))
        elif ev.type == "hello":
            facts = d.get("facts")
            if hr.facts is None and isinstance(facts, dict):
                hr.facts = facts
            if hr.agent_version is None and isinstance(d.get("agent_version"), str):
                hr.agent_version = d["agent_version"]
            total = compute.typed_axis(d.get("cases_total"), bits=32)
            if hr.cases_total is None and total is not None:
                hr.cases_total = total
        elif ev.type == "done":
            hr.done_counts = done_record(ev)
            unfinished = unfinished_error(ev)  # started cases with no row (ingest.SpoolLines): one row here
            if unfinished is not None:
                rows.append(_result_row(run_id, host, unfinished, "error", {}, None, str(unfinished.data["message"])))

    def result_times(self, run_id: str, host: str) -> dict[int, datetime]:
        """When the agent wrote each stored row of a host run (its line's ``ts``, aware UTC), by seq; rows
        without one are left out. Raises nothing for an unknown run or host (an empty dict)."""
        with self._read() as s:
            rows = s.execute(
                select(Result.seq, Result.ts).where(Result.run_id == run_id, Result.host == host,
                                                    Result.ts.is_not(None))  # fmt: skip
            ).all()
        return {r.seq: r.ts for r in rows}

    def last_seq(self, run_id: str, host: str) -> int:
        with self._read() as s:
            return self._host_run(s, run_id, host).last_seq

    def host_run_states(self, run_id: str) -> list[HostRunState]:
        """Per host: status and last ingested seq (-1 if none). Raises NotFoundError for an unknown run."""
        with self._read() as s:
            self._run(s, run_id)
            rows = s.execute(
                select(HostRun.host, HostRun.status, HostRun.last_seq, HostRun.done_counts, HostRun.started_at)
                .where(HostRun.run_id == run_id)
                .order_by(HostRun.host)
            ).all()
        return [
            HostRunState(host=h, status=st, last_seq=ls, done=dc is not None, started=sa is not None)
            for h, st, ls, dc, sa in rows
        ]

    # -- reads -----------------------------------------------------------------------------------------------

    def list_hosts(self) -> list[HostRecord]:
        with self._read() as s:
            hosts = s.scalars(select(Host).order_by(Host.name)).all()
            return [
                HostRecord(
                    name=h.name,
                    address=h.address,
                    group=h.group_name,
                    labels=h.labels or {},
                    facts=h.facts,
                    first_seen=h.first_seen,
                    last_seen=h.last_seen,
                )
                for h in hosts
            ]

    def resolve_run_id(self, ref: str) -> str:
        """The full id of the run ``ref`` names. ``ref`` is one of (see ``RUN_REF_FORMS``): a full id; ``latest``
        (the newest run) or ``latest~N`` (N runs before it); the short id the CLI prints (the id's last 8 hex
        digits, ``compute.short_run_id``) or a prefix of it of at least 4 digits; a prefix of the full id of at
        least 4 hex digits (dashes optional); or a suffix of 6 to 32 hex digits. Raises NotFoundError (no run
        matches) or UsageError (malformed; ambiguous, naming the matching runs by their short ids)."""
        ref = ref.strip().lower()
        if RUN_ID_RE.match(ref):
            return ref
        # ASCII digits only, like --set: re's \d and int() also read other scripts' digits ('latest~\u0661' was
        # latest~1); the id forms below are hex, which no other script writes
        latest = re.fullmatch(r"latest(?:~([0-9]{1,6}))?", ref)
        if latest:
            back = int(latest.group(1) or 0)
            with self._read() as s:
                rid = s.scalars(
                    select(RunRow.id).order_by(RunRow.started_at.desc(), RunRow.id.desc()).offset(back).limit(1)
                ).first()
            if rid is None:
                raise NotFoundError(
                    "no runs stored yet" if back == 0 else f"{ref!r}: fewer than {back + 1} runs are stored",
                    "start one with `orch run SUITE --hosts SEL`; list runs with `orch runs list`",
                )
            return rid
        digits = ref.replace("-", "")
        if not re.fullmatch(r"[0-9a-f]{4,32}", digits) or (ref != digits and not re.fullmatch(r"[0-9a-f-]+", ref)):
            ascii_hint = ": its digits must be ASCII 0-9" if any(c.isdecimal() and not c.isascii() for c in ref) else ""
            raise UsageError(f"invalid run id {ref!r}{ascii_hint}", f"a run is named by {RUN_REF_FORMS}")
        with self._read() as s:
            if ref != digits:  # a prefix written with its dashes
                cond: ColumnElement[bool] = RunRow.id.startswith(ref, autoescape=True)
            else:
                conds = [RunRow.id.startswith(_dashed_prefix(digits), autoescape=True)]
                if len(digits) < compute.SHORT_ID_LEN:
                    # a prefix of the short id (the last 8 characters of the id, which has no dash among them);
                    # the digits are hex, so nothing in the LIKE pattern needs escaping
                    conds.append(RunRow.id.like("%" + digits + "_" * (compute.SHORT_ID_LEN - len(digits))))
                if len(digits) >= 6:
                    conds.append(RunRow.id.endswith(_dashed_suffix(digits), autoescape=True))
                cond = or_(*conds)
            rows = s.execute(
                select(RunRow.id, RunRow.suite, RunRow.started_at)
                .where(cond)
                .order_by(RunRow.started_at.desc(), RunRow.id.desc())
                .limit(6)
            ).all()
        if not rows:
            raise NotFoundError(f"no run matches {ref!r}", "list runs with `orch runs list` (its ID column)")
        if len(rows) > 1:
            # each named by an id that names it alone: its short id, longer where the matches share its tail
            among = compute.distinct_short_ids(i for i, _, _ in rows)
            named = {i: max(among[i], compute.short_run_id(i), key=len) for i, _, _ in rows}
            shown = "; ".join(
                f"{named[i]} ({suite}, {started:%Y-%m-%d %H:%M})" if started else f"{named[i]} ({suite})"
                for i, suite, started in rows[:5]
            )
            raise UsageError(
                f"run id {ref!r} is ambiguous: it matches {shown}{'; ...' if len(rows) > 5 else ''}",
                "name the run by one of the ids above, as the ID column of `orch runs list` prints it, or by its "
                "full id (`orch runs show ID --json` prints it as \"id\")",
            )
        return str(rows[0][0])

    def longer_short_ids(self) -> dict[str, str]:
        """The runs whose short id (the last 8 hex digits, ``compute.short_run_id``) another run of the store
        shares, each with its shortest tail that no other run ends with (``compute.distinct_short_ids``); empty
        when every short id is unique (one GROUP BY over the runs' ids)."""
        tail = func.substr(RunRow.id, 37 - compute.SHORT_ID_LEN, compute.SHORT_ID_LEN)  # a UUID's last 8 digits
        with self._read() as s:
            shared = select(tail).group_by(tail).having(func.count() > 1)
            ids = s.scalars(select(RunRow.id).where(tail.in_(shared))).all()
        return compute.distinct_short_ids(ids)

    def stored_suites(self) -> list[str]:
        """The names of the suites that have at least one stored run, sorted."""
        with self._read() as s:
            return sorted(s.scalars(select(RunRow.suite).distinct()).all())

    def list_runs(self, filters: RunFilter | None = None, *, limit: int = 50, offset: int = 0) -> Page[RunSummary]:
        """Runs newest first, filtered; ``total`` counts all matches."""
        f = filters or RunFilter()
        conds: list[ColumnElement[bool]] = []
        if f.suite:
            conds.append(RunRow.suite == f.suite)
        if f.status:
            conds.append(RunRow.status == f.status)
        if f.label:
            conds.append(RunRow.label == f.label)
        if f.since:
            conds.append(RunRow.started_at >= f.since)
        if f.until:
            conds.append(RunRow.started_at < f.until)
        if f.host:
            conds.append(RunRow.id.in_(select(HostRun.run_id).where(HostRun.host == f.host)))
        with self._read() as s:
            total = s.scalar(select(func.count()).select_from(RunRow).where(*conds)) or 0
            ids = list(
                s.scalars(
                    select(RunRow.id)
                    .where(*conds)
                    .order_by(RunRow.started_at.desc(), RunRow.id.desc())
                    .limit(limit)
                    .offset(offset)
                )
            )
        return Page(items=self._summaries(ids), total=total, limit=limit, offset=offset)

    def _summaries(self, ids: list[str]) -> list[RunSummary]:
        if not ids:
            return []
        with self._read() as s:
            runs = {r.id: r for r in s.scalars(select(RunRow).where(RunRow.id.in_(ids)))}
            per: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
            for rid, h, n, e in s.execute(
                select(HostRun.run_id, HostRun.host, HostRun.results, HostRun.errors)
                .where(HostRun.run_id.in_(ids))
                .order_by(HostRun.host)
            ):
                per[rid].append((h, n, e))
        return [_summary(runs[i], per[i]) for i in ids if i in runs]

    def get_run(self, run_id: str) -> RunDetail:
        """One run with its host runs (and each host's measured roof). Raises NotFoundError."""
        with self._read() as s:
            run = self._run(s, run_id)
            hrs = s.scalars(select(HostRun).where(HostRun.run_id == run_id).order_by(HostRun.host)).all()
            roofs = self._roofs(s, [h.host for h in hrs])
            base = _summary(run, [(h.host, h.results, h.errors) for h in hrs])
            return RunDetail(
                **{k: getattr(base, k) for k in base.__dataclass_fields__},
                info=run.info or {},
                host_runs=[_host_run_record(h, roofs.get(h.host)) for h in hrs],
            )

    def get_host_run(self, run_id: str, host: str) -> HostRunRecord | None:
        """One host's run, without its measured roof (``get_run`` reads every host of the run and their roofs:
        per host at the end of a 1,000-host run, that was quadratic). None when the host is not in the run."""
        with self._read() as s:
            q = select(HostRun).where(HostRun.run_id == run_id, HostRun.host == host)
            hr = s.scalars(q).one_or_none()
            return None if hr is None else _host_run_record(hr, None)

    def case_indices(self, run_id: str, host: str) -> list[int]:
        """The distinct case indices of the host run's result and error rows, ascending (rows without a case, as a
        protocol error of a line outside any case, are not counted): ``ingest.coverage_problem`` judges them
        against the hello's ``cases_total``."""
        with self._read() as s:
            q = (
                select(Result.case_index)
                .where(Result.run_id == run_id, Result.host == host, Result.case_index.is_not(None))
                .distinct()
                .order_by(Result.case_index)
            )
            return [int(i) for i in s.execute(q).scalars() if i is not None]

    def judged_errors(self, run_id: str, host: str) -> int:
        """How many of the host run's error rows orch made from the agent's result lines (``info.agent_result``,
        ``protocol.JUDGED_KEY``: set by ``suites/command.py`` when a parser or the request counts judged a tool's
        output, by ``ingest.SpoolLines`` when a result line's fields broke the protocol's rules, and by
        :meth:`_apply` for a malformed result): the agent counted them as results, and ``ingest.reconcile`` counts
        them so."""
        flag = Result.info[JUDGED_KEY].as_boolean()
        with self._read() as s:
            q = select(func.count()).where(
                Result.run_id == run_id, Result.host == host, Result.status == "error", flag.is_(True)
            )
            return int(s.execute(q).scalar_one())

    def results(
        self,
        run_id: str,
        *,
        host: str | None = None,
        status: str | None = None,
        limit: int = 200,
        offset: int = 0,
        samples: bool = False,
    ) -> Page[ResultRecord]:
        """A run's results by host then seq; raw samples only when ``samples``. Raises NotFoundError."""
        conds: list[ColumnElement[bool]] = [Result.run_id == run_id]
        if host:
            conds.append(Result.host == host)
        if status:
            conds.append(Result.status == status)
        cols: list[Any] = [
            Result.host,
            Result.seq,
            Result.case_index,
            Result.status,
            Result.case_params,
            Result.case_key,
            Result.m,
            Result.concurrency,
            Result.size_bytes,
            Result.metrics,
            Result.info,
            Result.error,
        ]
        if samples:
            cols.append(Result.samples)
        with self._read() as s:
            run = self._run(s, run_id)
            total = s.scalar(select(func.count()).select_from(Result).where(*conds)) or 0
            rows = s.execute(
                select(*cols).where(*conds).order_by(Result.host, Result.seq).limit(limit).offset(offset)
            ).all()
            roofs = self._roofs(s, sorted({r.host for r in rows})) if roof.applies_to(run.suite) else {}
        items = []
        for r in rows:
            metrics = r.metrics or {}
            if samples and r.samples:
                metrics = {k: {**v, "samples": r.samples[k]} if k in r.samples else v for k, v in metrics.items()}
            host_roof = roofs.get(r.host)
            pct = roof.pct_of_measured_roof(
                roof.metric_center(metrics.get(roof.ROOF_METRIC)), host_roof.gbps if host_roof else None
            )
            items.append(
                ResultRecord(
                    run_id=run_id,
                    host=r.host,
                    seq=r.seq,
                    case_index=r.case_index,
                    status=r.status,
                    case=r.case_params or {},
                    case_key=r.case_key,
                    m=r.m,
                    concurrency=r.concurrency,
                    size_bytes=r.size_bytes,
                    metrics=metrics,
                    info=r.info,
                    error=r.error,
                    pct_of_measured_roof=pct,
                    roof_note=roof.above_roof_note(pct, metrics, (r.info or {}).get("device")),
                    roof_run_id=host_roof.run_id if host_roof and pct is not None else None,
                )
            )
        return Page(items=items, total=total, limit=limit, offset=offset)

    def series(
        self,
        *,
        suite: str,
        metric: str,
        x: str = "m",
        hosts: Sequence[str] = (),
        run_id: str | None = None,
        group_by: str = "host",
        max_lines: int = 50,
    ) -> Series:
        """Points (x, median y, p10, p90) for a plot, one line per (run, host).

        ``group_by="host"``: each host's latest run of ``suite`` (or the hosts of ``run_id``);
        ``group_by="run"``: the latest ``max_lines`` host runs of ``suite`` (or all of ``run_id``'s).
        ``x`` is a typed axis (``m``, ``concurrency``, ``size_bytes``) or any numeric case parameter.
        """
        check_name("metric", metric)
        check_name("case parameter", x)
        if group_by not in ("host", "run"):
            raise UsageError(f"group_by must be 'host' or 'run', not {group_by!r}")
        with self._read() as s:
            q = (
                select(HostRun.run_id, HostRun.host, RunRow.label, RunRow.started_at)
                .join(RunRow, RunRow.id == HostRun.run_id)
                .where(RunRow.suite == suite, HostRun.results > 0)
                .order_by(RunRow.started_at.desc(), RunRow.id.desc(), HostRun.host)
            )
            if run_id:
                q = q.where(HostRun.run_id == run_id)
            if hosts:
                q = q.where(HostRun.host.in_(list(hosts)))
            if group_by == "host":
                picked: dict[tuple[str, str], Any] = {}
                seen_hosts: set[str] = set()
                for row in s.connection().execute(q):
                    if row.host not in seen_hosts:
                        seen_hosts.add(row.host)
                        picked[(row.run_id, row.host)] = row
            else:
                picked = {(row.run_id, row.host): row for row in s.connection().execute(q.limit(max_lines))}
            if not picked:
                known.check_suite(s, suite)
                return Series(suite=suite, metric=metric, unit=None, x=x, group_by=group_by, lines=[])
            axis = TYPED_AXES.get(x)
            xcol: Any = getattr(Result, axis) if axis else _json_num(Result.case_params, x)
            picked_rows = _pairs_cond(picked)
            rows = (
                s.connection()
                .execute(
                    select(
                        Result.run_id,
                        Result.host,
                        xcol,
                        _metric_center(metric),
                        _json_num(Result.metrics, metric, "p10"),
                        _json_num(Result.metrics, metric, "p90"),
                    ).where(picked_rows, Result.status == "ok")
                )
                .all()
            )
            unit = s.scalar(
                select(Result.metrics[(metric, "unit")].as_string())
                .where(picked_rows, Result.status == "ok")
                .where(Result.metrics[(metric, "unit")].as_string().is_not(None))
                .limit(1)
            )
        points: dict[tuple[str, str], list[SeriesPoint]] = defaultdict(list)
        isfinite = math.isfinite
        for rid, h, xv, yv, p10, p90 in rows:
            if xv is None or yv is None or not (isfinite(xv) and isfinite(yv)):
                continue
            points[(rid, h)].append(SeriesPoint(x=float(xv), y=float(yv), p10=p10, p90=p90))
        lines = [
            SeriesLine(
                host=h,
                run_id=rid,
                label=meta.label,
                started_at=meta.started_at,
                points=sorted(points[(rid, h)], key=lambda p: p.x),
            )
            for (rid, h), meta in picked.items()
            if points.get((rid, h))
        ]
        if not lines:
            with self._read() as s:
                known.check_metric(s, suite, metric, picked_rows)
        return Series(suite=suite, metric=metric, unit=unit, x=x, group_by=group_by, lines=lines)

    def compare(self, base: str, head: str, *, metric: str | None = None) -> Comparison:
        """Per-case ratio of medians head/base, a noise judgement and verdict per case, and the geometric mean.

        Reads (host, case_key, median, p10, p90) per result — extracted by the database — and each compared
        case's parameters once, from the base run's first result of that case (lowest id).

        Raises:
            NotFoundError: no such run, or the metric is in neither run.
            IncomparableError: the runs are of different suites, share no case with the metric, or are one run
                (``orch runs check`` refuses that too: every ratio would be 1, a table that looks like "no change"
                while the two references were meant to name two runs).
            UsageError: an invalid metric name.
        """
        if metric is not None:
            check_name("metric", metric)
        with self._read() as s:
            base_run, head_run = self._run(s, base), self._run(s, head)
            if base_run.id == head_run.id:
                raise IncomparableError(
                    f"base and head are the same run ({compute.short_run_id(base_run.id)}): a run compared with "
                    "itself shows nothing",
                    "pass an earlier run as base and the candidate as head: `orch runs compare latest~1 latest`",
                )
            if base_run.suite != head_run.suite:
                raise IncomparableError(
                    f"run {base} is of suite {base_run.suite!r} and run {head} of suite {head_run.suite!r}: "
                    "runs of different suites have no case in common",
                    f"compare two runs of one suite; see them with `orch runs list --suite {base_run.suite}`",
                )
            if metric is None:
                metric = self._default_metric(s, base_run.id)
            med = _metric_center(metric)

            def fetch(rid: str) -> Sequence[_CompareRow]:
                q = select(
                    Result.id,
                    Result.host,
                    Result.case_key,
                    med,
                    _json_num(Result.metrics, metric, "p10"),
                    _json_num(Result.metrics, metric, "p90"),
                ).where(
                    Result.run_id == rid, Result.status == "ok", med.is_not(None)
                )
                return s.connection().execute(q).all()  # Core rows: no ORM result processing for 10,000s

            b_rows, h_rows = fetch(base_run.id), fetch(head_run.id)
            if not b_rows and not h_rows:
                raise NotFoundError(
                    f"metric {metric!r} is in neither run {base} nor {head}",
                    "see the metric names with `orch runs show RUN_ID --json`",
                )
            unit = s.scalar(
                select(Result.metrics[(metric, "unit")].as_string())
                .where(Result.run_id.in_([base_run.id, head_run.id]), med.is_not(None))
                .limit(1)
            )
            paired = _pair(b_rows, h_rows)
            if not paired.case_row_ids:
                raise IncomparableError(
                    f"runs {base} and {head} (suite {base_run.suite!r}) share no case with metric {metric!r}: "
                    f"base has {len({r[2] for r in b_rows})} cases, head has {len({r[2] for r in h_rows})}"
                    + (" (paired on host+case: only the hosts both ran are compared)" if paired.by_host else ""),
                    "compare runs of the same suite parameters, or pick another metric with --metric",
                )
            cases: dict[str, dict[str, Any]] = {}
            ids = sorted(paired.case_row_ids.values())
            for i in range(0, len(ids), _IN_CHUNK):
                for key, params in s.execute(
                    select(Result.case_key, Result.case_params).where(Result.id.in_(ids[i : i + _IN_CHUNK]))
                ):
                    cases[key] = params or {}
            failed = _json_num(Result.metrics, "failed_requests", "value")
            warned = s.execute(
                select(Result.run_id, Result.host, Result.case_key, failed).where(
                    Result.run_id.in_([base_run.id, head_run.id]), Result.status == "ok", failed > 0
                )
            ).all()
        from orchestrator.store.stats_repo import with_statistics  # imports this module

        cmp = _with_warnings(_comparison(base_run.id, head_run.id, metric, unit, paired, cases), warned)
        return with_statistics(self, cmp)

    def flagged_cases(self, run_id: str) -> list[FlaggedCase]:
        """The run's results marked ``throttled`` or ``shared_gpu`` in ``info`` (per-case GPU telemetry), in seq
        order per host. Raises NotFoundError for an unknown run."""
        with self._read() as s:
            self._run(s, run_id)
            q = select(Result.host, Result.case_key, Result.case_params, Result.info).where(
                Result.run_id == run_id,
                or_(Result.info["throttled"].as_boolean(), Result.info["shared_gpu"].as_boolean()),
            ).order_by(Result.host, Result.seq)
            return [
                FlaggedCase(host=h, case_key=k, case=c or {}, throttled=bool((i or {}).get("throttled")),
                            shared_gpu=bool((i or {}).get("shared_gpu")), reason=(i or {}).get("throttle_reason"))
                for h, k, c, i in s.execute(q)
            ]  # fmt: skip

    def _default_metric(self, s: Session, run_id: str) -> str:
        metrics = s.scalar(select(Result.metrics).where(Result.run_id == run_id, Result.status == "ok").limit(1))
        if not metrics:
            return DEFAULT_COMPARE_METRIC
        return DEFAULT_COMPARE_METRIC if DEFAULT_COMPARE_METRIC in metrics else sorted(metrics)[0]

    # -- helpers ---------------------------------------------------------------------------------------------

    def _run(self, s: Session, run_id: str) -> RunRow:
        run = s.get(RunRow, run_id) if RUN_ID_RE.match(run_id) else None
        if run is None:
            raise NotFoundError(f"no run {run_id!r} in the store", "list runs with `orch runs list`")
        return run

    def _host_run_states(self, s: Session, keys: set[tuple[str, str]]) -> dict[tuple[str, str], _IngestState]:
        """What ingest reads and writes of the host runs of ``(run_id, host)`` keys, locked (FOR UPDATE on
        PostgreSQL; SQLite's write transaction holds the database), by one Core SELECT per run and 900 hosts — no
        ORM objects: loading and flushing them was ~60% of a many-host transaction. NotFoundError names a
        missing one."""
        by_run: dict[str, list[str]] = defaultdict(list)
        for rid, host in sorted(keys):
            by_run[rid].append(host)
        out: dict[tuple[str, str], _IngestState] = {}
        cols = [HostRun.id, HostRun.run_id, HostRun.host, *(getattr(HostRun, f) for f in _IngestState.FIELDS)]
        for rid, hosts in by_run.items():
            for i in range(0, len(hosts), 900):  # SQLite before 3.32 caps bound parameters at 999
                q = (
                    select(*cols)
                    .where(HostRun.run_id == rid, HostRun.host.in_(hosts[i : i + 900]))
                    .order_by(HostRun.host)  # rows locked in one order by every writer: no lock-order deadlock
                    .with_for_update()
                )
                for row in s.connection().execute(q):  # the connection: no ORM loading of plain columns
                    out[(rid, row.host)] = _IngestState(row)
        for rid, host in sorted(keys):
            if (rid, host) not in out:
                raise NotFoundError(
                    f"no host {host!r} in run {rid!r}", "the run's hosts are fixed by create_run; check the run id"
                )
        return out

    def _host_run(self, s: Session, run_id: str, host: str, *, lock: bool = False) -> HostRun:
        q = select(HostRun).where(HostRun.run_id == run_id, HostRun.host == host)
        if lock:
            q = q.with_for_update()
        hr = s.scalars(q).one_or_none()
        if hr is None:
            raise NotFoundError(
                f"no host {host!r} in run {run_id!r}",
                "the run's hosts are fixed by create_run; check the run id",
            )
        return hr

    def _roofs(self, s: Session, hosts: Sequence[str]) -> dict[str, roof.MeasuredRoof]:
        """Each host's measured copy roof (GB/s) from its latest hbm-bandwidth run that has one, with that run."""
        if not hosts:
            return {}
        g = func.coalesce(
            _json_num(Result.metrics, roof.ROOF_METRIC, "median"),
            _json_num(Result.metrics, roof.ROOF_METRIC, "value"),
        )
        latest: dict[str, str] = {}
        started: dict[str, datetime | None] = {}
        for rid, host, at in s.execute(
            select(HostRun.run_id, HostRun.host, RunRow.started_at)
            .join(RunRow, RunRow.id == HostRun.run_id)
            .where(RunRow.suite == roof.ROOF_SUITE, HostRun.host.in_(list(hosts)), HostRun.results > 0)
            .order_by(RunRow.started_at.desc(), RunRow.id.desc())
        ):
            if host not in latest:
                latest[host], started[rid] = rid, at
        if not latest:
            return {}
        pairs = [and_(Result.run_id == rid, Result.host == host) for host, rid in latest.items()]
        figures: dict[str, list[float]] = defaultdict(list)
        for host, gbps in s.execute(select(Result.host, g).where(or_(*pairs), Result.status == "ok", g.is_not(None))):
            figures[host].append(float(gbps))
        out = {h: roof.measured_roof_gbps(v) for h, v in figures.items()}
        return {
            h: roof.MeasuredRoof(gbps=v, run_id=latest[h], measured_at=started.get(latest[h]))
            for h, v in out.items()
            if v is not None
        }


class _IngestState:
    """A host run's columns that ingest reads and writes (``Store._apply``), loaded by Core; :func:`_update_host_runs`
    writes back the ones that changed."""

    FIELDS = ("last_seq", "results", "errors", "facts", "agent_version", "cases_total", "done_counts", "log")

    def __init__(self, row: Any) -> None:
        self.id: int = row.id
        self.run_id: str = row.run_id
        self.host: str = row.host
        self.last_seq: int = row.last_seq
        self.results: int = row.results
        self.errors: int = row.errors
        self.facts: dict[str, Any] | None = row.facts
        self.agent_version: str | None = row.agent_version
        self.cases_total: int | None = row.cases_total
        self.done_counts: dict[str, Any] | None = row.done_counts
        self.log: str | None = row.log
        self._loaded = {f: getattr(self, f) for f in self.FIELDS}

    def changed(self) -> dict[str, Any]:
        """The fields assigned a different value since loading (an assignment replaces the value, never mutates
        it: ``_apply`` builds new texts and dicts), with their new values."""
        return {f: v for f in self.FIELDS if (v := getattr(self, f)) is not self._loaded[f] and v != self._loaded[f]}


def _update_host_runs(s: Session, states: Iterable[_IngestState]) -> None:
    """Write back what changed: one executemany of ``UPDATE host_runs SET .. WHERE id = ?`` per set of changed
    columns (usually one: last_seq, results, errors)."""
    table: Table = HostRun.__table__  # type: ignore[assignment]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for st in states:
        changed = st.changed()
        if changed:
            groups[tuple(sorted(changed))].append({"b_id": st.id, **{f"b_{k}": v for k, v in changed.items()}})
    for fields, params in groups.items():
        stmt = update(table).where(table.c.id == bindparam("b_id")).values({f: bindparam(f"b_{f}") for f in fields})
        s.connection().execute(stmt, params)


def _result_row(
    run_id: str,
    host: str,
    ev: Event,
    status: str,
    metrics: dict[str, Any],
    samples: dict[str, Any] | None,
    error: str | None,
) -> dict[str, Any]:
    data = ev.data
    case = data.get("case")
    if type(case) is not dict:  # else Event.case, read without its call (one row per line ingested)
        case = ev.case or {}
    info = data.get("info")
    ci = data.get("case_index")
    axis = compute.typed_axis
    m, concurrency, size_bytes = case.get("m", case.get("M")), case.get("concurrency"), case.get("size_bytes")
    return {
        "run_id": run_id,
        "host": host,
        "seq": ev.seq,
        "case_index": ci if type(ci) is int else ev.case_index,  # Event.case_index: a bool is not an index
        "status": status,
        "case_params": case,
        "case_key": compute.case_key(case),
        "m": None if m is None else axis(m),
        "concurrency": None if concurrency is None else axis(concurrency, bits=32),
        "size_bytes": None if size_bytes is None else axis(size_bytes),
        "metrics": metrics,
        "samples": samples,
        "info": info if isinstance(info, dict) else None,
        "error": error,
        "ts": compute.from_unix(ev.ts),
    }


_SQLITE_RESULT_COLUMNS = tuple(c.name for c in _RESULT_TABLE.c if c.name != "id")
_SQLITE_INSERT_RESULTS = (
    f"INSERT INTO results ({', '.join(_SQLITE_RESULT_COLUMNS)}) VALUES ({', '.join('?' * len(_SQLITE_RESULT_COLUMNS))})"
    " ON CONFLICT (run_id, host, seq) DO NOTHING"
)


def _sqlite_datetime(ts: datetime) -> str:
    """``ts`` as SQLAlchemy's SQLite DATETIME stores it: naive UTC, ``%04d-%02d-%02d %02d:%02d:%02d.%06d`` (its
    ``DATETIME._storage_format``; strftime's ``%Y`` would not pad years before 1000). %-formatting of the fields
    is ~2x faster than strftime, which was ~5 us of the ~60 per 200 B line ingested."""
    if ts.tzinfo is not timezone.utc:
        ts = ts.astimezone(timezone.utc)
    return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031 - the storage format, as SQLAlchemy writes it
        ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, ts.microsecond,
    )  # fmt: skip


PG_RECORDSET_MAX_JSON_BYTES = 4096  # a row's info + samples as JSON; from this size on, executemany (bench/ingest.py)


def _pg_row_json_bytes(row: dict[str, Any]) -> int:
    return len(compact_json(row["info"])) + (0 if row["samples"] is None else len(compact_json(row["samples"])))


@functools.cache
def _pg_insert_results_sql() -> str:
    """``INSERT INTO results (..) VALUES (%s, .., %s::json, ..) ON CONFLICT (run_id, host, seq) DO NOTHING`` for
    psycopg's executemany: JSON columns cast from text to their type (json, or jsonb for ``metrics``)."""
    from sqlalchemy.dialects import postgresql  # only on PostgreSQL: the package imports every driver's dialect

    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    values = []
    for name in _SQLITE_RESULT_COLUMNS:
        typ = _RESULT_TABLE.c[name].type  # JSONPathRead decorates JSON: it compiles to jsonb here
        values.append(f"%s::{typ.compile(dialect=dialect).lower()}" if isinstance(typ, (JSON, JSONPathRead)) else "%s")
    return (
        f"INSERT INTO results ({', '.join(_SQLITE_RESULT_COLUMNS)}) VALUES ({', '.join(values)})"
        " ON CONFLICT (run_id, host, seq) DO NOTHING"
    )


def _pg_result_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """``_result_row`` dicts as psycopg parameters for ``_pg_insert_results_sql``: JSON columns as compact JSON
    text as the column types would write them (``None`` as JSON ``null``, except ``samples``: SQL NULL), ``ts``
    the aware datetime (timestamptz)."""
    js = compact_json
    return [
        (
            r["run_id"], r["host"], r["seq"], r["case_index"], r["status"], js(r["case_params"]), r["case_key"],
            r["m"], r["concurrency"], r["size_bytes"], js(r["metrics"]),
            None if r["samples"] is None else js(r["samples"]), js(r["info"]), r["error"], r["ts"],
        )  # in _SQLITE_RESULT_COLUMNS order, checked below
        for r in rows
    ]  # fmt: skip


def _sqlite_result_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """``_result_row`` dicts as DB-API tuples for SQLite, encoded as the column types would: JSON columns as
    compact JSON text (``None`` as JSON ``null``, except ``samples`` which is SQL NULL), ``ts`` as naive UTC text.
    tests/integration/test_store.py checks that the stored rows equal those of SQLAlchemy's own INSERT."""
    js, dt = compact_json, _sqlite_datetime
    return [
        (
            r["run_id"], r["host"], r["seq"], r["case_index"], r["status"], js(r["case_params"]), r["case_key"],
            r["m"], r["concurrency"], r["size_bytes"], js(r["metrics"]),
            None if r["samples"] is None else js(r["samples"]), js(r["info"]), r["error"],
            None if r["ts"] is None else dt(r["ts"]),
        )  # in _SQLITE_RESULT_COLUMNS order, checked below
        for r in rows
    ]  # fmt: skip


if _SQLITE_RESULT_COLUMNS != (
    "run_id", "host", "seq", "case_index", "status", "case_params", "case_key", "m", "concurrency", "size_bytes",
    "metrics", "samples", "info", "error", "ts",
):  # fmt: skip
    raise RuntimeError(f"results columns changed to {_SQLITE_RESULT_COLUMNS}: update _sqlite_result_rows")


def _upsert_host(
    host: Host | None,
    s: Session,
    name: str,
    address: str | None,
    group: str | None,
    labels: dict[str, str],
    facts: dict[str, Any] | None,
    now: datetime,
) -> None:
    """Add the host ``name`` (``host`` None: not stored yet) or update the stored ``host``."""
    if host is None:
        s.add(Host(name=name, address=address, group_name=group, labels=dict(labels), facts=facts, first_seen=now,
                   last_seen=now))  # fmt: skip
        return
    host.address, host.group_name, host.labels, host.last_seen = address, group, dict(labels), now
    if facts is not None:
        host.facts = facts


@functools.cache
def _pg_insert_results() -> Any:
    """``INSERT INTO results (..) SELECT .. FROM json_to_recordset(:rows) AS r(col type, ..) ON CONFLICT (run_id,
    host, seq) DO NOTHING``; ``:rows`` is the list of row dicts, sent as one JSON document."""
    from sqlalchemy.dialects import postgresql  # only on PostgreSQL: the package imports every driver's dialect

    cols = [c for c in _RESULT_TABLE.c if c.name != "id"]
    record = (
        func.json_to_recordset(bindparam("rows", type_=JSON))
        .table_valued(*(column(c.name, c.type) for c in cols))
        .render_derived(name="r", with_types=True)
    )
    return (
        postgresql.insert(_RESULT_TABLE)
        .from_select([c.name for c in cols], select(*record.c))
        .on_conflict_do_nothing(index_elements=["run_id", "host", "seq"])
    )


def _summary(run: RunRow, hosts: list[tuple[str, int, int]]) -> RunSummary:
    return RunSummary(
        id=run.id,
        suite=run.suite,
        params=run.params or {},
        preset=run.preset,
        label=run.label,
        status=run.status,
        started_by=run.started_by,
        started_on=run.started_on,
        started_at=run.started_at,
        finished_at=run.finished_at,
        hosts=[h for h, _, _ in hosts],
        results=sum(n for _, n, _ in hosts),
        errors=sum(e for _, _, e in hosts),
        controller=ctl if isinstance(ctl := (run.info or {}).get("controller"), dict) else None,
    )


def _host_run_record(h: HostRun, measured: roof.MeasuredRoof | None) -> HostRunRecord:
    return HostRunRecord(
        host=h.host,
        status=h.status,
        facts=h.facts,
        agent_version=h.agent_version,
        build_sha=h.build_sha,
        last_seq=h.last_seq,
        results=h.results,
        errors=h.errors,
        cases_total=h.cases_total,
        done_counts=h.done_counts,
        error=h.error,
        log=h.log,
        info=h.info or {},
        started_at=h.started_at,
        finished_at=h.finished_at,
        measured_roof_gbps=measured.gbps if measured else None,
        roof_run_id=measured.run_id if measured else None,
        roof_measured_at=measured.measured_at if measured else None,
    )


_CompareRow = Any  # a Row (id, host, case_key, median, p10, p90); its type parameters differ in SQLAlchemy 2.0/2.1
_Figure = tuple[float, float | None, float | None]  # (median, p10, p90) of one result


@dataclass(frozen=True)
class _Paired:
    """(median, p10, p90) grouped by (host or None, case_key) for each run, and the base row id naming each case."""

    by_host: bool
    base: dict[tuple[str | None, str], list[_Figure]]
    head: dict[tuple[str | None, str], list[_Figure]]
    case_row_ids: dict[str, int]


def _pair(b_rows: Sequence[_CompareRow], h_rows: Sequence[_CompareRow]) -> _Paired:
    """Group (id, host, case_key, median, p10, p90) rows. Runs sharing hosts pair on host+case over the shared
    hosts; runs on disjoint hosts pair on case alone (all hosts' figures of a case together)."""
    shared = {r[1] for r in b_rows} & {r[1] for r in h_rows}
    by_host = bool(shared)

    def group(rows: Sequence[_CompareRow]) -> dict[tuple[str | None, str], list[_Figure]]:
        vals: dict[tuple[str | None, str], list[_Figure]] = defaultdict(list)
        for _id, host, key, y, lo, hi in rows:
            if by_host:
                if host in shared:
                    vals[(host, key)].append((float(y), lo, hi))
            else:
                vals[(None, key)].append((float(y), lo, hi))
        return vals

    bv, hv = group(b_rows), group(h_rows)
    keys = {k for _, k in bv.keys() & hv.keys()}
    case_row_ids: dict[str, int] = {}
    for row_id, host, key, *_ in b_rows:
        if key in keys and (not by_host or host in shared):
            if row_id < case_row_ids.get(key, row_id + 1):
                case_row_ids[key] = row_id
    return _Paired(by_host=by_host, base=bv, head=hv, case_row_ids=case_row_ids)


def _comparison(
    base: str, head: str, metric: str, unit: str | None, p: _Paired, cases: dict[str, dict[str, Any]]
) -> Comparison:
    # Order: host, then the case's M (cases without one last), then case key. Ranking the (few) distinct cases
    # first lets the (many) host+case pairs sort as plain (str, int) tuples, without a key function.
    rank = {k: i for i, k in enumerate(sorted(cases, key=lambda k: (_case_order(cases[k]), k)))}
    keys = sorted([(host or "", rank[case_key], host, case_key) for host, case_key in p.base.keys() & p.head.keys()])
    out: list[CompareCase] = []
    logs: list[float] = []
    isfinite, log = math.isfinite, math.log
    direction = metric_direction(metric, unit or "")
    noisy_cases = 0
    for _, _, host, case_key in keys:  # 10,000s of cases: kept lean
        key = (host, case_key)
        bs, hs = p.base[key], p.head[key]
        b, b10, b90 = bs[0] if len(bs) == 1 else _merge(bs)
        h, h10, h90 = hs[0] if len(hs) == 1 else _merge(hs)
        ratio = h / b if b > 0 and isfinite(b) else None
        if ratio is not None and ratio > 0 and isfinite(ratio):
            logs.append(log(ratio))
        noisy = is_noisy(b, b10, b90, h, h10, h90)
        noisy_cases += noisy is True
        out.append(
            CompareCase(
                host=host,
                case_key=case_key,
                case=cases[case_key],
                base=b,
                head=h,
                ratio=ratio,
                base_p10=b10,
                base_p90=b90,
                head_p10=h10,
                head_p90=h90,
                noisy=noisy,
                verdict=noise_verdict(
                    ratio, direction, noisy, COMPARE_THRESHOLD, bool(noisy) and too_noisy(b, b10, b90, h, h10, h90)
                ),
                wide=wide_sides(b, b10, b90, h, h10, h90),
            )
        )
    return Comparison(
        base=base,
        head=head,
        metric=metric,
        unit=unit,
        paired_on="host+case" if p.by_host else "case",
        cases=out,
        geomean=math.exp(sum(logs) / len(logs)) if logs else None,  # compute.geomean, fused into the loop
        only_base=len(p.base.keys() - p.head.keys()),
        only_head=len(p.head.keys() - p.base.keys()),
        threshold=COMPARE_THRESHOLD,
        noisy=noisy_cases,
    )


def _with_warnings(cmp: Comparison, rows: Sequence[Any]) -> Comparison:
    """Mark the cases whose base or head result had failed requests (rows of run id, host, case key, count)."""
    if not rows:
        return cmp
    failed: dict[tuple[str, str | None, str], float] = defaultdict(float)
    for run_id, host, key, n in rows:
        for side in [s for s, rid in (("base", cmp.base), ("head", cmp.head)) if rid == run_id]:  # both: a self-compare
            failed[(side, host if cmp.paired_on == "host+case" else None, key)] += float(n)
    cases = []
    for c in cmp.cases:
        notes = [
            f"{side}: {failed[(side, c.host, c.case_key)]:g} failed requests"
            for side in ("base", "head")
            if (side, c.host, c.case_key) in failed
        ]
        cases.append(replace(c, warnings=notes) if notes else c)
    return replace(cmp, cases=cases, warned=sum(1 for c in cases if c.warnings))


def _merge(figures: list[_Figure]) -> _Figure:
    """Several results of one case (hosts, or repeats): the median of their medians and the envelope of their
    p10-p90 ranges (None when any lacks its p10 or p90) — the scatter between them counts as noise too."""
    lows = [f[1] for f in figures if f[1] is not None]
    highs = [f[2] for f in figures if f[2] is not None]
    n = len(figures)
    return (
        compute.median([f[0] for f in figures]),
        min(lows) if len(lows) == n else None,
        max(highs) if len(highs) == n else None,
    )


def _case_order(case: dict[str, Any]) -> tuple[float, str]:
    m = compute.typed_axis(case.get("m", case.get("M")))
    return (float(m) if m is not None else math.inf, "")
