"""Shell completion (``orch --install-completion`` / ``--show-completion``, typer over click): host and group
names from the inventory, suite names from the registry.

Click completes with the callbacks skipped, so nothing here may rely on the root callback's AppContext: the
inventory is ``--inventory`` when it was typed before the word being completed, else ``$ORCH_INVENTORY`` or
``./inventory.yaml``. Any failure (no inventory, a malformed one) completes nothing rather than printing an error
into the user's prompt.
"""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.settings import Settings


def _context(ctx: typer.Context):  # type: ignore[no-untyped-def]
    from orchestrator.cli.context import AppContext

    inventory = ctx.find_root().params.get("inventory")
    return AppContext(Settings(inventory=Path(inventory)) if inventory else Settings())


def _matching(names: list[str], incomplete: str, *, comma_list: bool) -> list[str]:
    """Names starting with the word's last comma item; earlier items (``b300,ct``) are kept in front."""
    head, sep, last = incomplete.rpartition(",") if comma_list else ("", "", incomplete)
    prefix = head + sep
    return [prefix + n for n in sorted(set(names)) if n.startswith(last)]


def host_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Hosts of the inventory (for ``orch hosts trust HOST``)."""
    try:
        inv = _context(ctx).inventory()
    except Exception:  # completion must never print an error into the prompt
        return []
    return _matching([h.name for h in inv.hosts], incomplete, comma_list=False)


def selectors(ctx: typer.Context, incomplete: str) -> list[str]:
    """Groups and hosts of the inventory, item by item of a comma list (``--hosts b300,ct200-0``)."""
    try:
        inv = _context(ctx).inventory()
    except Exception:
        return []
    return _matching([*inv.groups, *(h.name for h in inv.hosts)], incomplete, comma_list=True)


def suite_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """Built-in and user suites (``--suite-dir`` typed before the word, ``$ORCH_SUITE_DIR``, the inventory's)."""
    try:
        dirs = [Path(d) for d in (ctx.params.get("suite_dir") or [])]
        names = _context(ctx).registry(dirs).names()
    except Exception:
        return []
    return _matching(names, incomplete, comma_list=False)
