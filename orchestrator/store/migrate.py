"""Alembic, configured from the package: ``orch db upgrade`` works from any cwd and from an installed wheel.

The migration scripts (``env.py``, ``versions/``) live in the repository's top-level ``migrations/``; the wheel
carries the same files as ``orchestrator/migrations/`` (hatchling ``force-include`` in ``pyproject.toml``).
``migrations_dir()`` finds whichever is present, so ``orch db upgrade``, the tests and the ``alembic`` CLI
(``alembic.ini`` at the root, e.g. ``alembic revision --autogenerate -m ...``) all run the same scripts.

Lifecycle rules enforced here:

- **One migrator at a time.** An upgrade holds a lock for its whole check-and-migrate: on SQLite a
  ``filelock`` file beside the database (``orch.db.lock``), on PostgreSQL a session advisory lock. Six
  processes starting on a new ``orch.db`` at once therefore migrate it once and all succeed; before, the others
  failed within ~2 s with "database is locked" (a deferred transaction cannot wait for the write lock).
- **Never touch a newer schema.** A database at a revision this orch does not know was written by a newer orch:
  ``SchemaTooNewError`` (exit 2), before anything is read or written.
"""

from __future__ import annotations

import functools
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.errors import ConfigError, DiskFullError, SchemaBehindError, SchemaTooNewError, StoreError
from orchestrator.store.schema_head import migration_candidates, remember_head
from orchestrator.store.urls import redact_url, scrub

# Waiting for another process's migration: 0002 moves ~1,000,000 result rows in minutes, so be generous.
MIGRATION_LOCK_TIMEOUT_S = 900.0
# pg_advisory_lock key (a signed 64-bit int): crc32 of a fixed name, so every orch version uses the same key.
PG_LOCK_KEY = zlib.crc32(b"orch schema migration")
_PG_POLL_S = 0.2


def migrations_dir() -> Path:
    """The Alembic script location: ``orchestrator/migrations`` in an installed wheel, else the source tree's
    top-level ``migrations/``. Raises StoreError when neither holds an ``env.py`` (a broken install)."""
    wheel, source = migration_candidates()
    for candidate in (wheel, source):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError(
        f"the database migrations are missing (looked in {wheel} and {source})",
        "reinstall orch (pipx install . / pip install .); a wheel carries them as orchestrator/migrations",
    )


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return cfg


@functools.cache
def _script() -> ScriptDirectory:
    """The scripts, read once per process (``/healthz`` asks on every probe); their head is recorded for
    ``schema_head.at_head``, the everyday check that needs no Alembic."""
    script = ScriptDirectory.from_config(alembic_config())
    head = script.get_current_head()
    if head is not None:
        remember_head(head)
    return script


def head_revision() -> str | None:
    return _script().get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def refuse_unknown(heads: Sequence[str], script: ScriptDirectory | None = None) -> None:
    """Raise SchemaTooNewError when any of the database's ``heads`` is not a revision this orch knows, and
    SchemaBehindError when one is empty (a row of ``alembic_version`` whose ``version_num`` is '' or blank: no orch
    writes that, so it is not a newer orch's revision)."""
    script = script or _script()
    if any(not rev.strip() for rev in heads):
        raise SchemaBehindError(
            "the database's schema revision is empty (its alembic_version table holds a row with an empty "
            "version_num), so which schema it holds is unknown and no migration can start from it",
            "restore alembic_version from the backup the database came from, or point --db / ORCH_DB_URL "
            "at a new database (orch creates it); nothing in this one was changed",
        )
    known = {s.revision for s in script.walk_revisions()}
    for rev in heads:
        if rev not in known:
            raise SchemaTooNewError(rev, script.get_current_head())


def check_at_head(engine: Engine) -> str:
    """The database's revision when it is this orch's head. Raises SchemaTooNewError (ahead), StoreError with
    an `orch db upgrade` hint (behind or empty), or StoreError when the database cannot be reached."""
    script = _script()
    head = script.get_current_head()
    try:
        with engine.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
    except SQLAlchemyError as exc:
        raise translate(exc, engine, "cannot read the database's schema revision") from exc
    refuse_unknown(heads, script)
    if tuple(heads) != (head,):
        raise SchemaBehindError(
            f"the database {redact_url(_url(engine))} is at schema revision {', '.join(heads) or '(none)'}; "
            f"this orch needs {head}",
            "run `orch db upgrade` (with the same --db / ORCH_DB_URL)",
        )
    assert head is not None
    return head


def refuse_newer(engine: Engine) -> None:
    """Raise SchemaTooNewError when a newer orch migrated the database. An unreachable, empty or older
    database passes: ``orch serve`` starts anyway and answers 503 until it is reachable and at head."""
    try:
        with engine.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
    except SQLAlchemyError:
        return
    refuse_unknown(heads)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default head), one process at a time (see the module docstring).

    Raises SchemaTooNewError for a database a newer orch migrated, StoreError when the database refuses or the
    lock is not free within MIGRATION_LOCK_TIMEOUT_S.
    """
    cfg = alembic_config()
    script = _script()
    # What failed, as the error says it: opening the database and reading its revision is not a migration.
    what = "cannot read the database's schema revision"
    try:
        with _sqlite_file_lock(engine), engine.connect() as conn, _pg_advisory_lock(conn):
            heads = MigrationContext.configure(conn).get_current_heads()
            conn.commit()
            refuse_unknown(heads, script)
            if revision == "head" and tuple(heads) == (script.get_current_head(),):
                return
            what = f"database migration to {revision} failed"
            if not heads and inspect(conn).has_table("runs"):  # Alembic would fail on "table ... already exists"
                raise SchemaBehindError(
                    f"the database {redact_url(_url(engine))} holds orch's tables but no schema revision "
                    "(its alembic_version table is missing or empty), so no migration can start from it",
                    "restore alembic_version from the backup the database came from, or point --db / ORCH_DB_URL "
                    "at a new database (orch creates it); nothing in this one was changed",
                )
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:
                # Batch mode recreates tables; with foreign keys on, dropping a parent would cascade or fail.
                conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
                conn.commit()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
                conn.commit()
    except SQLAlchemyError as exc:
        raise translate(exc, engine, what) from exc


def translate(exc: SQLAlchemyError, engine: Engine, what: str) -> StoreError:
    """A StoreError for a driver error: the first line of its text with every credential of the URL removed,
    and a hint that fits the cause (a busy SQLite file, an unreachable server, missing rights)."""
    url = _url(engine)
    detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    line = scrub(detail[0] if detail else exc.__class__.__name__, url)
    full = _full_filesystem(engine, what, line)
    if full is not None:
        return full
    return StoreError(f"{what}: {line}", hint_for(line, url))


# SQLite's words for SQLITE_IOERR (a -shm that cannot grow: SQLITE_IOERR_SHMSIZE) and SQLITE_FULL.
_DISK_ERRORS = ("disk i/o error", "database or disk is full")


def _full_filesystem(engine: Engine, what: str, message: str) -> DiskFullError | None:
    """For SQLite's "disk I/O error" / "database or disk is full" on a database file: a StoreError naming the
    file and ENOSPC when the filesystem holding it (or its -wal/-shm/-journal files) has no free block or inode
    left; None otherwise (the caller keeps SQLite's own words)."""
    import os

    if engine.dialect.name != "sqlite" or not any(e in message.lower() for e in _DISK_ERRORS):
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = Path(database).absolute()
    for where in (path.parent, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        try:
            st = os.statvfs(where)
        except OSError:
            continue
        # f_bavail / f_favail: what this user may still take (root may also take the reserved blocks).
        free_blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
        free_inodes = st.f_ffree if os.geteuid() == 0 else st.f_favail
        if free_blocks * st.f_frsize < _FULL_BELOW_BYTES or (st.f_files and free_inodes == 0):
            return DiskFullError(
                f"{what}: the filesystem holding {path} is full (ENOSPC: no space left on device; SQLite said: "
                f"{message})",
                f"free space on the filesystem of {path.parent} or move the database elsewhere with --db / "
                "ORCH_DB_URL; nothing stored was changed",
                path=str(path),
            )
    return None


# Below this much free space SQLite cannot even map its 32 KiB -shm wal-index (a read needs it in WAL mode).
_FULL_BELOW_BYTES = 64 * 1024


def hint_for(message: str, url: str) -> str:
    """What to do about a database error whose (scrubbed) first line is ``message``."""
    low = message.lower()
    shown = redact_url(url)
    if "database is locked" in low or "database table is locked" in low:
        return (
            f"another process held the write lock on {shown} for longer than the 30 s busy timeout "
            "(a long `orch run` ingest, a migration, or a tool holding a transaction open); retry when it is done"
        )
    if "readonly" in low or "read-only" in low or "permission denied" in low:
        return f"the database {shown} (or its directory, for SQLite's -wal/-shm files) is not writable by this user"
    if "unable to open database file" in low:
        return f"the directory of {shown} must exist and be writable"
    if "password authentication failed" in low or "authentication" in low:
        return "check the user name and password in --db / ORCH_DB_URL (percent-encode @ : / in the password)"
    if "does not exist" in low and "database" in low:
        return f"create the database first (createdb), or fix the name in {shown}"
    if "must be owner" in low or "permission" in low:
        return "the database user may not create or alter tables: grant it, or migrate as the owner"
    return f"check that the database at {shown} (--db / ORCH_DB_URL) is reachable"


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


@contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """Hold ``<database>.lock`` (filelock) for a SQLite file; no-op for memory databases and other dialects.

    Only a lock held by another process is waited for (up to MIGRATION_LOCK_TIMEOUT_S). A lock file that cannot
    be created (the directory is missing, read-only, not writable, or /proc-like) is a ConfigError at once:
    filelock would retry the open until the deadline, and would create a missing directory on the way."""
    from filelock import FileLock, Timeout

    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    path = Path(database)
    lock_path = path.with_name(path.name + ".lock")
    _create_lock_file(lock_path, path)
    lock = FileLock(str(lock_path), timeout=MIGRATION_LOCK_TIMEOUT_S)
    try:
        lock.acquire()
    except Timeout:
        raise StoreError(
            f"another orch has been migrating {path} for over {MIGRATION_LOCK_TIMEOUT_S:g} s "
            f"(lock {lock.lock_file})",
            "wait for it to finish; if no orch is running, the lock is stale: delete the .lock file",
        ) from None
    try:
        yield
    finally:
        lock.release()


def _create_lock_file(lock_path: Path, database: Path) -> None:
    """Create (or open) the migration lock file, or raise ConfigError (exit 2) naming it, the errno and the fix.
    The descriptor is closed at once: the lock itself is filelock's flock on its own descriptor."""
    import errno
    import os

    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        parent = lock_path.parent
        if not parent.exists():
            fix = f"the directory {parent} does not exist: create it, or point --db / ORCH_DB_URL at a file in an "
            fix += "existing directory, e.g. sqlite:///./orch.db"
        elif not parent.is_dir():
            fix = f"{parent} is a file, not a directory: point --db / ORCH_DB_URL at a file in a directory"
        else:
            fix = (
                f"orch creates files beside the database (this lock, SQLite's -wal and -shm): point --db / "
                f"ORCH_DB_URL at a file in a directory you can write to (not {parent}), e.g. sqlite:///./orch.db"
            )
        raise ConfigError(
            f"cannot create the migration lock {lock_path} beside the SQLite database {database}: "
            f"{exc.strerror or exc} ({code})",
            fix,
        ) from None
    os.close(fd)


@contextmanager
def _pg_advisory_lock(conn: Connection) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock PG_LOCK_KEY (polled, with the same deadline as SQLite's)."""
    if conn.dialect.name != "postgresql":
        yield
        return
    deadline = time.monotonic() + MIGRATION_LOCK_TIMEOUT_S
    while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_LOCK_KEY}).scalar_one():
        conn.commit()
        if time.monotonic() > deadline:
            raise StoreError(
                f"another orch has been migrating this database for over {MIGRATION_LOCK_TIMEOUT_S:g} s",
                "wait for it to finish (see pg_locks for advisory lock holders)",
            )
        time.sleep(_PG_POLL_S)
    conn.commit()
    try:
        yield
    finally:
        conn.rollback()
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_LOCK_KEY})
        conn.commit()
