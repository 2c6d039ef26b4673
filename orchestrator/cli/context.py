"""What every command gets from the root callback: the settings, and lazily the inventory and the store."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.errors import DiskFullError
from orchestrator.settings import Settings

if TYPE_CHECKING:
    from orchestrator.inventory import Inventory
    from orchestrator.store.repo import Store
    from orchestrator.suites.registry import Registry


@dataclass
class AppContext:
    settings: Settings
    _inventory: Inventory | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _store_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def inventory(self) -> Inventory:
        from orchestrator.inventory import load_inventory

        if self._inventory is None:
            self._inventory = load_inventory(self.settings.inventory)
        return self._inventory

    def store(self, *, create: bool = True) -> Store:
        """The results store. The embedded SQLite default is brought to the schema head on first use, so a
        new user needs no `orch db upgrade`; a server database (PostgreSQL) is left to `orch db upgrade` and must
        be at this orch's head. A database a newer orch migrated is SchemaTooNewError (exit 2) on both.

        ``create=False`` (commands that only read): a SQLite file that does not exist is a ConfigError naming
        the path, instead of a new empty database that would look like "no runs".
        """
        with self._store_lock:  # one store, also while store_in_background is opening it
            return self._open_store(create)

    def store_in_background(self) -> Future[Store]:
        """``store()`` on a thread of its own, started now: SQLAlchemy's import and the schema check (about
        0.3-0.6 s of a short run) overlap what the caller does meanwhile (``orch run``: connecting to the hosts
        and reading their facts). The Future carries the store, or what ``store()`` raised."""
        fut: Future[Store] = Future()

        def open_it() -> None:
            try:
                fut.set_result(self.store())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the Future
                fut.set_exception(exc)

        threading.Thread(target=open_it, name="orch-store-open", daemon=True).start()
        return fut

    def check_db_url(self, *, create: bool) -> bool:
        """Check ``--db`` / ORCH_DB_URL without opening it: a URL SQLAlchemy parses, and with ``create=False``
        a SQLite file that exists (``orch serve`` and the reading commands). Returns whether it is SQLite;
        raises ConfigError (exit 2)."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        from orchestrator.errors import ConfigError
        from orchestrator.store.urls import redact_url

        url = self.settings.db_url
        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise ConfigError(
                f"--db / ORCH_DB_URL is not a database URL: {redact_url(url)}",
                "e.g. sqlite:///./orch.db or postgresql+psycopg://user@host/orch (percent-encode @ : / in a password)",
            ) from None
        is_sqlite = parsed.get_backend_name() == "sqlite"
        path = parsed.database or ""
        if is_sqlite and path in ("", ":memory:"):  # SQLite's in-memory database: every result gone at exit
            raise ConfigError(
                f"--db / ORCH_DB_URL names no SQLite file: {redact_url(url)} (an in-memory database is lost when "
                "orch exits)",
                "name the file: sqlite:///./orch.db (relative), sqlite:////var/lib/orch/orch.db (absolute)",
            )
        if is_sqlite and not create and path not in ("", ":memory:") and not Path(path).exists():
            raise ConfigError(
                f"no orch database at {Path(path).resolve()} ({redact_url(url)})",
                "run orch from the directory that holds orch.db, or pass --db / set ORCH_DB_URL, "
                "e.g. --db sqlite:////abs/path/orch.db",
            )
        return is_sqlite

    def check_db_setting(self) -> None:
        """Check ``--db`` / ORCH_DB_URL as the commands that open the store do, without connecting or creating
        anything (``store.session.check_url``): for ``orch doctor``, which does not use the store. Raises
        ConfigError (exit 2)."""
        from orchestrator.store.session import check_url

        self.check_db_url(create=True)
        check_url(self.settings.db_url)

    def _open_store(self, create: bool) -> Store:
        from orchestrator.store import compute, schema_head
        from orchestrator.store.repo import Store

        if self._store is None:
            url = self.settings.db_url
            is_sqlite = self.check_db_url(create=create)
            store = Store.from_url(url)
            try:
                if schema_head.at_head(store.engine):
                    pass  # the everyday case, without importing Alembic
                elif is_sqlite:
                    try:
                        store.upgrade()  # serialized, refuses a newer schema
                    except DiskFullError as exc:
                        if create:  # a command that writes cannot work on a full disk
                            raise
                        store = _read_only_store(store, exc)
                else:
                    from orchestrator.store import migrate

                    migrate.check_at_head(store.engine)  # a server database is migrated by `orch db upgrade`
                # two runs with one short id (the last 8 digits): every id the CLI prints is made longer there
                compute.use_longer_short_ids(store.longer_short_ids())
            except BaseException:
                store.close()
                raise
            self._store = store
        return self._store

    def registry(self, extra_dirs: Sequence[Path] = ()) -> Registry:
        """Built-in and packaged suites plus the user suite files of ``extra_dirs`` (``--suite-dir``),
        ``ORCH_SUITE_DIR`` and the inventory's ``suite_dir`` (the inventory is read only when its file exists)."""
        from orchestrator.suites.loader import load_registry, suite_dirs

        inv = self.inventory() if Path(self.settings.inventory).is_file() else None
        return load_registry(
            suite_dirs(extra_dirs, self.settings.suite_dir, inv.suite_dir if inv else None, inv.path if inv else ".")
        )


def _read_only_store(store: Store, full: DiskFullError) -> Store:
    """For a command that only reads, when the filesystem holding the SQLite file is full: the same file opened
    read-only without a -shm (``session.immutable_sqlite_engine``), if it is safe and the schema is at head;
    otherwise ``full`` is raised (nothing can be migrated on a full disk). ``store`` is closed either way."""
    from orchestrator.errors import StoreError
    from orchestrator.store import migrate
    from orchestrator.store.repo import Store
    from orchestrator.store.session import immutable_sqlite_engine

    store.close()
    engine = immutable_sqlite_engine(Path(full.path))
    if engine is None:
        raise full
    try:
        migrate.check_at_head(engine)
    except StoreError:
        engine.dispose()
        raise full from None
    return Store(engine)


def app_context(ctx: typer.Context) -> AppContext:
    obj: Any = ctx.find_root().obj
    if not isinstance(obj, AppContext):  # pragma: no cover - only when a command is called outside `orch`
        raise RuntimeError("orch command called without the root callback")
    return obj
