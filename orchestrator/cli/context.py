"""What every command gets from the root callback: the settings, and lazily the inventory and the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.settings import Settings

if TYPE_CHECKING:
    from orchestrator.inventory import Inventory
    from orchestrator.store.repo import Store


@dataclass
class AppContext:
    settings: Settings
    _inventory: Inventory | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)

    def inventory(self) -> Inventory:
        from orchestrator.inventory import load_inventory

        if self._inventory is None:
            self._inventory = load_inventory(self.settings.inventory)
        return self._inventory

    def store(self) -> Store:
        """The results store. The embedded SQLite default is brought to the schema head on first use, so a
        new user needs no `orch db upgrade`; a server database (PostgreSQL) is left to `orch db upgrade`."""
        from orchestrator.store.repo import Store

        if self._store is None:
            store = Store.from_url(self.settings.db_url)
            if store.dialect == "sqlite":
                store.upgrade()
            self._store = store
        return self._store

    def store_or_none(self) -> Store | None:
        return self.store()


def app_context(ctx: typer.Context) -> AppContext:
    obj: Any = ctx.find_root().obj
    if not isinstance(obj, AppContext):  # pragma: no cover - only when a command is called outside `orch`
        raise RuntimeError("orch command called without the root callback")
    return obj
