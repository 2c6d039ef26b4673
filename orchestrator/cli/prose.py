"""Free text (hints, notes, verdict and footer lines) wrapped at word boundaries to the console's width.

Rich wraps a printed string at words but breaks whatever does not fit, a suggested command included
(``details: orch runs show`` / ``d532c35c``). :func:`say` wraps each line of a message itself:

- at spaces, never inside a word: a word longer than the width (a path, a URL) stays whole where it is and
  runs past the width (rich would fold it);
- a suggested command (``orch SUBCOMMAND ...`` up to ``;``, ``,``, ``(``, ``)``, a backtick, ``: `` or the end
  of a sentence) is one unit: when it does not fit on the current line it goes on a line of its own, indented
  by :data:`COMMAND_INDENT` more than the text, and is never broken (it may run past the width if longer);
- a line's leading spaces are its indentation, kept on every line it wraps into.

Styles (rich markup) are kept across the breaks. Lines that fit are printed as given.
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

COMMAND_INDENT = 2
"""Extra indentation, in cells, of a suggested command moved to a line of its own."""

# "orch" and its arguments: tokens without the characters that end a command in prose; ": " ends it too (a
# colon inside a token, as in SHA256:..., does not)
_COMMAND = re.compile(r"(?<![\w/.-])orch(?: +(?!\()[^\s;,()`]+(?<!:))+")
_WORD = re.compile(r"\S+")


def _units(plain: str) -> list[tuple[int, int]]:
    """The unbreakable spans of ``plain`` as (start, end): its words, the words of one command joined (with what
    touches the command's ends: ``(orch runs show x)``)."""
    commands = [m.span() for m in _COMMAND.finditer(plain)]
    units: list[tuple[int, int]] = []
    in_command: tuple[int, int] | None = None
    for w in _WORD.finditer(plain):
        start, end = w.span()
        command = next((c for c in commands if c[0] < end and start < c[1]), None)
        if command is not None and command == in_command:
            units[-1] = (units[-1][0], end)  # the command goes on: one unit
        else:
            units.append((start, end))
        in_command = command
    return units


def wrap(text: Text, width: int) -> list[Text]:
    """``text`` as lines of at most ``width`` cells, broken at spaces only (see the module docstring); a word or
    a command longer than ``width`` stays whole on a line of its own."""
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        plain = line.plain
        if cell_len(plain) <= width:
            out.append(line)
            continue
        indent = len(plain) - len(plain.lstrip(" "))
        rows: list[tuple[int, list[tuple[int, int]]]] = []  # (leading spaces, units) per printed line
        row: list[tuple[int, int]] = []
        used = indent
        for u in _units(plain):
            size = cell_len(plain[u[0] : u[1]])
            word = " " not in plain[u[0] : u[1]]
            if row and (used + 1 + size <= width or (word and indent + size > width)):  # no line holds it: run past
                row.append(u)
                used += 1 + size
            elif not row:
                row, used = [u], indent + size
            elif not word:  # a command that does not fit after the text: a line of its own
                rows += [(indent, row), (indent + COMMAND_INDENT, [u])]
                row, used = [], indent
            else:
                rows.append((indent, row))
                row, used = [u], indent + size
        if row:
            rows.append((indent, row))
        out.extend(Text(" " * lead) + line[units[0][0] : units[-1][1]] for lead, units in rows)
    return out


def say(console: Any, message: str | Text, *, style: str | None = None) -> None:
    """Print ``message`` (rich markup, or a ``Text``) wrapped to ``console.width`` (see the module docstring)."""
    text = Text.from_markup(message, emoji=False) if isinstance(message, str) else message
    for line in wrap(text, console.width):
        Console.print(console, line, soft_wrap=True, style=style)


class ProseConsole(Console):
    """The CLI's console: a message printed on its own (one markup string or ``Text``, with at most ``style``
    and ``markup``) is prose, wrapped by :func:`wrap` at the width instead of rich's wrap (which breaks a
    suggested command and drops a line's indentation on the lines it wraps into); ``soft_wrap=True`` lines,
    tables and other renderables print as rich prints them."""

    def on_broken_pipe(self) -> None:
        """stdout's reader went away (``orch runs list | head -1``): :func:`fastexit.broken_pipe`."""
        from orchestrator.cli import fastexit

        self.quiet = True
        fastexit.broken_pipe()

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if len(objects) == 1 and isinstance(objects[0], (str, Text)) and set(kwargs) <= _PROSE_KWARGS:
            message = objects[0]
            if isinstance(message, str):
                markup = kwargs.get("markup")
                message = Text.from_markup(message, emoji=False) if markup is not False else Text(message)
            if _COMMAND.search(message.plain):  # only a line holding a command: the others wrap as rich wraps
                say(self, message, style=kwargs.get("style"))
                return
        super().print(*objects, **kwargs)


_PROSE_KWARGS = {"style", "markup"}
