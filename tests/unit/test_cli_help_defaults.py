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


def test_repeat_defaults_to_the_suites_own_wherever_it_is_taken() -> None:
    """The finding: `orch run --help` said "--repeat ... (default 20)", while a suite file's own `repeat:` is what
    a run without --repeat takes (calibrate said so already)."""
    helps = {
        " ".join(path): p.help
        for path, cmd in _commands(typer.main.get_command(app), ("orch",))
        for p in cmd.params
        if p.name == "repeat"
    }
    assert {"orch run", "orch calibrate"} <= set(helps), helps
    assert all(h == "Timed samples per case (default: the suite's)." for h in helps.values()), helps
