"""Every option's help says its default once: typer prints ``[default: X]``, so a help text that also says
"default 10" repeats it (issue 21, item 5) — checked over the whole command tree, in-process."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer

from orchestrator.cli.main import app


def _commands(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, cmd


def test_no_help_text_repeats_the_default_typer_prints() -> None:
    repeated = []
    commands = list(_commands(typer.main.get_command(app), ("orch",)))
    assert len(commands) > 20  # the walk reaches the subcommands (runs show, hosts trust, db upgrade, ...)
    for path, cmd in commands:
        for p in cmd.params:
            shown = p.show_default is not False and p.default is not None and not getattr(p, "is_flag", False)
            if shown and p.help and re.search(r"\bdefault", p.help, re.IGNORECASE):
                repeated.append(f"{' '.join(path)} {p.name}: {p.help}")
    assert repeated == []
