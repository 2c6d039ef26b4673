"""What every command gets from the root callback: the settings, and lazily the inventory and the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.settings import Settings

if TYPE_CHECKING:
    from orchestrator.inventory import Inventory


@dataclass
class AppContext:
    settings: Settings
    _inventory: Inventory | None = field(default=None, repr=False)

    def inventory(self) -> Inventory:
        from orchestrator.inventory import load_inventory

        if self._inventory is None:
            self._inventory = load_inventory(self.settings.inventory)
        return self._inventory


def app_context(ctx: typer.Context) -> AppContext:
    obj: Any = ctx.find_root().obj
    if not isinstance(obj, AppContext):  # pragma: no cover - only when a command is called outside `orch`
        raise RuntimeError("orch command called without the root callback")
    return obj
