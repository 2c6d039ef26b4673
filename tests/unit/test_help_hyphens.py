"""``--help`` never breaks a word at its hyphen (issue 21, item 5): click's textwrap cut the catalog key
``rtx-pro-6000-server`` into ``rtx-`` / ``pro-6000-server`` at 80 columns, and option names at narrower ones."""

from __future__ import annotations

import re

import pytest
import typer

from orchestrator.cli.main import app, main


def _paths() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    todo: list[tuple[tuple[str, ...], object]] = [((), typer.main.get_command(app))]
    while todo:
        path, cmd = todo.pop()
        out.append(path)
        todo.extend(((*path, name), sub) for name, sub in getattr(cmd, "commands", {}).items())
    return sorted(out)


def _broken_words(text: str) -> list[tuple[str, str]]:
    """Pairs of lines where the first ends in the middle of a hyphenated word (``...rtx-``) and the second
    goes on with its rest (``pro-6000-server``)."""
    lines = text.splitlines()
    return [(a, b) for a, b in zip(lines, lines[1:], strict=False)
            if re.search(r"[A-Za-z0-9]-$", a.rstrip()) and re.match(r"\s*[A-Za-z0-9]", b)]  # fmt: skip


def _help(path: tuple[str, ...], columns: int, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> str:  # fmt: skip
    monkeypatch.setenv("COLUMNS", str(columns))
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_every_command_is_walked() -> None:
    paths = _paths()
    assert ("project",) in paths and ("runs", "compare") in paths and len(paths) > 20


@pytest.mark.parametrize("columns", [50, 60, 80, 100])
def test_no_help_breaks_a_word_at_its_hyphen(columns: int, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    broken = {path: bad for path in _paths() if (bad := _broken_words(_help(path, columns, monkeypatch, capsys)))}
    assert broken == {}


def test_the_catalog_key_stays_whole_where_it_was_cut(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    text = _help(("project",), 80, monkeypatch, capsys)
    assert "rtx-pro-6000-server" in text
    assert "\ue000" not in text and "--allreduces-per-layer" in text
