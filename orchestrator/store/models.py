"""The results schema: SQLAlchemy 2 declarative models, portable across SQLite and PostgreSQL.

Tables::

    hosts      name PK, address, group_name, labels JSON, facts JSON (latest seen), first/last_seen
    builds     sha256 PK, name, size_bytes, created_at
    runs       id PK (UUIDv7 text, time-sortable), suite, params JSON, preset, label, status, started_by/on,
               started_at/finished_at, info JSON (analysis the runner attaches, e.g. plateau)
    host_runs  (run_id, host) unique; status, facts snapshot, agent_version, build_sha, last_seq, counts,
               error/log text, info JSON (e.g. {"plateau": {"m": 256, ...}})
    results    (run_id, host, seq) unique; case params JSON + typed sweep axes (m, concurrency, size_bytes),
               case_key (stable hash pairing cases in /compare), status ok|error, metrics JSON (per metric:
               value, unit, median/p10/p90/min/max/n), samples JSON (per metric: the raw samples; apart so that
               series and compare never parse them), error text

Types are chosen to work on both engines: ``JSON`` (json on PostgreSQL, text on SQLite; ``results.metrics`` is
jsonb on PostgreSQL, see ``JSONPathRead``), ``UTCDateTime``
(aware UTC datetimes everywhere, although SQLite stores no offset), ``BigInteger`` for byte counts.
Constraint names follow ``NAMING_CONVENTION`` so Alembic batch mode on SQLite can find them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

from orchestrator.store.records import HOST_RUN_STATUSES as HOST_RUN_STATUSES  # noqa: E402 - re-exported
from orchestrator.store.records import RESULT_STATUSES as RESULT_STATUSES  # noqa: E402
from orchestrator.store.records import RUN_STATUSES as RUN_STATUSES  # noqa: E402


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every engine.

    PostgreSQL keeps ``timestamptz``; SQLite has no offset, so values are stored as naive UTC and made aware
    again on the way out. Naive input is rejected: it is always a bug to not know the zone of a timestamp.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTCDateTime column; pass an aware datetime")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class JSONPathRead(TypeDecorator[Any]):
    """``JSON``, and ``JSONB`` on PostgreSQL.

    ``results.metrics`` is read by path (``metrics #>> '{time_ms,median}'``) for every point of /series and
    /compare: PostgreSQL's ``json`` re-parses the text at each such read, ``jsonb`` looks the key up in its binary
    form (series over 10,000 results: 95 -> 40 ms measured). SQLite keeps JSON text; the model stays portable.

    A type decorator rather than ``JSON().with_variant(postgresql.JSONB(), "postgresql")`` (what it was, with the
    same DDL, SQL and values on both engines) so that ``sqlalchemy.dialects.postgresql`` is imported only when a
    PostgreSQL dialect asks for the type: that package's ``__init__`` imports every PostgreSQL driver's dialect,
    ~25-40 ms of every ``orch run`` on SQLite (docs/inner-loop.md). ``hashable`` and ``should_evaluate_none``
    are ``JSON()``'s, which a decorator does not take from its ``impl``: ``None`` is stored as JSON ``null`` as
    before, and the ORM never hashes the dicts.
    """

    impl = JSON
    cache_ok = True
    hashable = False
    should_evaluate_none = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


# Integer on SQLite so the primary key is the rowid alias (autoincrement), BIGINT elsewhere.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, datetime: UTCDateTime}


class Host(Base):
    __tablename__ = "hosts"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    address: Mapped[str | None] = mapped_column(String(255))
    group_name: Mapped[str | None] = mapped_column(String(255), index=True)
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    facts: Mapped[dict[str, Any] | None] = mapped_column()
    first_seen: Mapped[datetime] = mapped_column()
    last_seen: Mapped[datetime] = mapped_column()


class Build(Base):
    __tablename__ = "builds"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column()


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    suite: Mapped[str] = mapped_column(String(128), index=True)
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    preset: Mapped[str | None] = mapped_column(String(128))
    label: Mapped[str | None] = mapped_column(String(255), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    started_by: Mapped[str] = mapped_column(String(255))
    started_on: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(index=True)
    finished_at: Mapped[datetime | None] = mapped_column()
    info: Mapped[dict[str, Any]] = mapped_column(default=dict)


class HostRun(Base):
    __tablename__ = "host_runs"
    __table_args__ = (
        UniqueConstraint("run_id", "host"),
        Index("ix_host_runs_host_run_id", "host", "run_id"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.id", ondelete="CASCADE"))
    host: Mapped[str] = mapped_column(String(255), ForeignKey("hosts.name"))
    status: Mapped[str] = mapped_column(String(16))
    facts: Mapped[dict[str, Any] | None] = mapped_column()
    agent_version: Mapped[str | None] = mapped_column(String(128))
    build_sha: Mapped[str | None] = mapped_column(String(64))
    last_seq: Mapped[int] = mapped_column(Integer, default=-1)
    results: Mapped[int] = mapped_column(Integer, default=0)
    errors: Mapped[int] = mapped_column(Integer, default=0)
    cases_total: Mapped[int | None] = mapped_column(Integer)
    done_counts: Mapped[dict[str, Any] | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)
    log: Mapped[str | None] = mapped_column(Text)
    info: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class Result(Base):
    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("run_id", "host", "seq"),
        Index("ix_results_run_id_case_key", "run_id", "case_key"),
        Index("ix_results_host_m", "host", "m"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.id", ondelete="CASCADE"))
    host: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)
    case_index: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    case_params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    case_key: Mapped[str] = mapped_column(String(32))
    m: Mapped[int | None] = mapped_column(BigInteger)
    concurrency: Mapped[int | None] = mapped_column(Integer)
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONPathRead(), default=dict)
    samples: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    info: Mapped[dict[str, Any] | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)
    ts: Mapped[datetime | None] = mapped_column()


class Projection(Base):
    """``orch project``'s stored predictions: one SKU's measured moe-sweep (plus an overheads run) projected
    onto another SKU; ``inputs`` every figure the formula used, ``rows`` one per M, ``checked`` the
    comparison with a real run on the target (``check_run_id``), when one was given."""

    __tablename__ = "projections"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(index=True)
    source_run_id: Mapped[str] = mapped_column(String(36), index=True)
    overheads_run_id: Mapped[str | None] = mapped_column(String(36))
    check_run_id: Mapped[str | None] = mapped_column(String(36))
    source_gpu: Mapped[str] = mapped_column(String(64))
    target_gpu: Mapped[str] = mapped_column(String(64), index=True)
    dtype: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    inputs: Mapped[dict[str, Any]] = mapped_column(default=dict)
    rows: Mapped[dict[str, Any]] = mapped_column(default=dict)


class Calibration(Base):
    """``orch calibrate``'s A/A noise floor of one host, case and metric of a suite: ``aa_spread`` the largest
    ``|m_i / m_j - 1|`` between the medians of ``n_runs`` identical runs back to back (``runs``: their ids),
    ``within_spread`` the largest half p10-p90 width relative to the median within one of them. A later
    calibration of the same (suite, host, case_key, metric) replaces the row."""

    __tablename__ = "calibrations"
    __table_args__ = (UniqueConstraint("suite", "host", "case_key", "metric"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    suite: Mapped[str] = mapped_column(String(128))
    host: Mapped[str] = mapped_column(String(255))
    case_key: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(64))
    case_params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    aa_spread: Mapped[float | None] = mapped_column(Float)
    within_spread: Mapped[float | None] = mapped_column(Float)
    n_runs: Mapped[int] = mapped_column(Integer)
    runs: Mapped[dict[str, Any]] = mapped_column(default=dict)  # {"ids": [...], "medians": [...]}
    created_at: Mapped[datetime] = mapped_column()


class ChangePoint(Base):
    """A change point in one (suite, host, case_key, metric) series ordered by run start time, found by
    ``analysis.changes`` (Apache Otava's e-divisive means): ``run_id`` is the first run after the change,
    ``before``/``after`` the series' mean before and after, ``change`` = after / before - 1, ``p_value`` the
    significance of the split. Rows of a series are replaced each time it is analysed."""

    __tablename__ = "change_points"
    __table_args__ = (
        UniqueConstraint("suite", "host", "case_key", "metric", "run_id"),
        Index("ix_change_points_suite_metric", "suite", "metric"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    suite: Mapped[str] = mapped_column(String(128))
    host: Mapped[str] = mapped_column(String(255))
    case_key: Mapped[str] = mapped_column(String(32))
    metric: Mapped[str] = mapped_column(String(64))
    case_params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.id", ondelete="CASCADE"))
    run_started_at: Mapped[datetime] = mapped_column()
    position: Mapped[int] = mapped_column(Integer)  # index of run_id in the series
    before: Mapped[float] = mapped_column(Float)
    after: Mapped[float] = mapped_column(Float)
    change: Mapped[float | None] = mapped_column(Float)
    p_value: Mapped[float | None] = mapped_column(Float)
    detected_at: Mapped[datetime] = mapped_column()
