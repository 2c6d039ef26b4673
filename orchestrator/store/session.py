"""Engines from URLs. Nothing is connected at import time; ``make_engine`` is called by ``Store.from_url``.

SQLite gets WAL (readers never block the writer), foreign keys, a busy timeout, and ``BEGIN IMMEDIATE`` for
write transactions: a transaction that starts as a reader and later writes can fail with "database is locked"
at once, without waiting, when another writer got there first; taking the write lock up front makes it wait.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session

from orchestrator.errors import ConfigError
from orchestrator.store.urls import AMBIGUOUS, is_unambiguous, redact_url

SQLITE_BUSY_TIMEOUT_MS = 30_000
_WRITE_OPTION = "orch_write"


def compact_json(obj: Any) -> str:
    """JSON columns as written: compact (no spaces), by orjson — encoding ~37 floats per result row with the
    stdlib encoder was a quarter of the ingest time (bench/api.py)."""
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()


def make_engine(url: str) -> Engine:
    """An Engine for ``url`` (``sqlite:///path``, ``postgresql+psycopg://user@host/db`` ...).

    Raises ConfigError for a URL SQLAlchemy cannot parse, a driver that is not installed, or an SQLite path that
    is a directory or a file other than an SQLite database (read: its first 16 bytes; nothing is connected).
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ConfigError(
            f"--db / ORCH_DB_URL is not a database URL: {redact_url(url)}",
            "use sqlite:///path/to/orch.db or postgresql+psycopg://user:pass@host:5432/db "
            "(percent-encode @ : / in the password)",
        ) from None
    if not is_unambiguous(url):  # before any driver sees it: it could quote pieces of the password
        raise ConfigError(f"--db / ORCH_DB_URL is not a database URL: {redact_url(url)}",
                          f"{AMBIGUOUS}, e.g. p%40ss for p@ss")  # fmt: skip
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    kwargs: dict[str, Any] = {"json_serializer": compact_json, "json_deserializer": orjson.loads}
    if parsed.drivername.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False}
        if parsed.database not in (None, "", ":memory:") and not str(parsed.database).startswith("file:"):
            _refuse_non_sqlite(Path(str(parsed.database)), redact_url(url))
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(parsed, **kwargs)
    except (NoSuchModuleError, ImportError) as exc:
        raise ConfigError(
            f"--db / ORCH_DB_URL names a database driver that is not installed: {parsed.drivername!r}",
            "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (install orch[postgres] for psycopg)"
            if parsed.get_backend_name() not in ("postgresql", "sqlite")
            else "install orch[postgres] (psycopg) for PostgreSQL URLs",
        ) from exc
    if engine.dialect.name == "sqlite":
        _tune_sqlite(engine)
    return engine


def check_url(url: str) -> None:
    """Raise what opening ``url`` would raise for the setting itself, connecting to nothing and creating nothing:
    ``make_engine``'s ConfigErrors (a malformed or ambiguous URL, a driver not installed, an SQLite path that is
    not a database file), and for an SQLite file a directory that does not exist (``orch run`` would refuse it
    creating its migration lock, ``store/migrate.py``). For commands that do not use the store (``orch doctor``):
    a setting every other command refuses is refused there too. A server that is down is not found here."""
    engine = make_engine(url)
    try:
        database = engine.url.database if engine.dialect.name == "sqlite" else None
    finally:
        engine.dispose()
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    parent = Path(database).parent
    if not parent.is_dir():
        what = "a directory that does not exist" if not parent.exists() else f"a directory that is a file, {parent}"
        raise ConfigError(f"--db / ORCH_DB_URL names an SQLite file in {what}: {database}",
                          f"create {parent}, or point --db / ORCH_DB_URL at a file in an existing directory, e.g. "
                          "sqlite:///./orch.db")  # fmt: skip


def _refuse_non_sqlite(path: Path, shown_url: str) -> None:
    """ConfigError (exit 2) when ``path`` exists and is not an SQLite database: a directory, anything but a
    regular file (``/dev/null``, a FIFO: judged by ``stat`` before SQLite opens it), or a file SQLite itself calls
    "not a database" (an empty file is a new database). A missing file is left to the caller.

    The file is asked through SQLite (a read-only connection, ``PRAGMA schema_version``), never opened and
    closed by Python: closing any other descriptor of a database file drops every POSIX lock this process holds
    on it, and another engine of this process may be writing it (https://www.sqlite.org/howtocorrupt.html,
    2.2) — reading the header that way corrupted a test's store ("database disk image is malformed")."""
    import sqlite3

    hint = "pass --db sqlite:///PATH of an orch database, or of a new file that orch will create"
    if path.is_dir():
        raise ConfigError(f"--db / ORCH_DB_URL names a directory, not an SQLite database: {path} ({shown_url})", hint)
    try:
        mode = path.stat().st_mode
    except OSError:  # missing: left to the caller; unreadable: its own connection reports it
        return
    if not stat.S_ISREG(mode):  # /dev/null read as an empty database, then "disk I/O error"; a FIFO hung the open
        kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                 (stat.S_ISSOCK, "a socket"))  # fmt: skip
        kind = next((name for test, name in kinds if test(mode)), "not a regular file")
        raise ConfigError(f"--db / ORCH_DB_URL names {path}, {kind}, not an SQLite database file ({shown_url})",
                          "pass --db sqlite:///PATH of a regular file, an orch database or a new file that orch will "
                          "create, e.g. sqlite:///./orch.db")  # fmt: skip
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            con.execute("PRAGMA schema_version").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "encrypted" in str(exc):
            raise ConfigError(f"{path} is not an SQLite database ({shown_url}): {exc}", hint) from None
        # busy, locked, unreadable: the caller's own connection reports it with its hint


# SQLite's wal-index (-shm) is at least 32 KiB once any connection has it mapped.
_SHM_MIN_BYTES = 32 * 1024


def immutable_sqlite_engine(path: Path) -> Engine | None:
    """A read-only engine over the WAL-mode SQLite file ``path`` that needs no -shm (``immutable=1``), for a
    command that only reads when the filesystem is full and SQLite cannot create or grow the -shm wal-index
    ("disk I/O error", SQLITE_IOERR_SHMSIZE; ``mode=ro`` needs it too). Nothing is written or deleted.

    Only when no connection can be using the WAL: the -wal file is missing or empty (no committed page lives
    only there), the -shm is missing or shorter than any mapped wal-index (no process has it open: none could
    grow it on this full disk either) and there is no rollback -journal. Otherwise None: immutable reads would
    not see what another connection commits."""
    import sqlite3

    def size(suffix: str) -> int | None:
        try:
            return path.with_name(path.name + suffix).stat().st_size
        except FileNotFoundError:
            return None

    wal, shm, journal = size("-wal"), size("-shm"), size("-journal")
    if wal or (shm is not None and shm >= _SHM_MIN_BYTES) or journal is not None or not path.is_file():
        return None
    uri = f"{path.resolve().as_uri()}?immutable=1"
    engine = create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False),
        json_serializer=compact_json,
        json_deserializer=orjson.loads,
    )
    _tune_sqlite(engine)  # no journal_mode pragma here: the URL names no file
    return engine


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below (pysqlite's own BEGIN is deferred).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if engine.url.database not in (None, "", ":memory:"):
                cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session holding the write lock from its first statement (SQLite); commits on exit."""
    with Session(engine, expire_on_commit=False) as session:
        session.connection(execution_options={_WRITE_OPTION: True})
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """A read-only unit of work (rolled back on exit)."""
    with Session(engine, expire_on_commit=False) as session:
        yield session
