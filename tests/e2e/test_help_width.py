"""``--help`` in 80 and 100 columns (the real ``orch``, piped, ``COLUMNS`` set), issue 21: typer's rich panels kept
the docstrings' line breaks (``... clocks, PCIe,`` / ``NVLink, ...`` mid-sentence in 80 columns) and cut
``--allreduces-per-layer`` to ``--allreduces-per-lay…``. Now click's own layout: each paragraph filled to the
width, option names whole."""

from __future__ import annotations

import re

import pytest
import typer

from orchestrator.cli.main import app
from tests.e2e.conftest import Orch, local_orch

orch = pytest.fixture(local_orch, name="orch")

COMMANDS = [(), ("project",), ("runs",), ("runs", "compare"), ("doctor",), ("run",), ("hosts", "trust")]


def _options(path: tuple[str, ...]) -> list[str]:
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return [o for p in cmd.params for o in p.opts if o.startswith("--")]


def _unfilled(text: str, width: int) -> list[tuple[str, str]]:
    """Pairs of lines (a, b) where b continues a's paragraph (b's text starts in the column where a text column
    of a starts) although b's first word would have fit at the end of a: a break in mid-sentence."""
    lines = [re.sub(r"[│╭╮╰╯─]", " ", ln).rstrip() for ln in text.splitlines()]
    bad = []
    listing = False  # click's "Commands:" section: one line per command, its help cut with "..."
    for a, b in zip(lines, lines[1:], strict=False):
        listing = (listing or a == "Commands:") and bool(a)
        indent = len(b) - len(b.lstrip())
        if listing or not a or not b or indent == 0 or b.lstrip().startswith("-"):
            continue
        if len(a) > indent and a[indent - 1] == " " and a[indent] != " " and len(a) + 1 + len(b.split()[0]) <= width:
            bad.append((a, b))
    return bad


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "orch")
def test_help_fills_its_lines_and_keeps_option_names_whole(orch: Orch, path: tuple[str, ...], columns: int) -> None:
    res = orch(*path, "--help", columns=columns)
    assert res.returncode == 0, res.stderr
    assert max(len(ln) for ln in res.stdout.splitlines()) <= columns, res.stdout
    # click's HelpFormatter fills to min(terminal, max_width=80) - 2 columns (click/formatting.py)
    assert _unfilled(res.stdout, min(columns, 80) - 2) == [], res.stdout
    assert "…" not in res.stdout, res.stdout
    words = set(re.findall(r"--[a-z][a-z-]*[a-z]", res.stdout))
    assert set(_options(path)) <= words, set(_options(path)) - words
