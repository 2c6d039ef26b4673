"""Tables that fit the terminal without breaking a word or a number.

Rich squeezes every column of a table that is wider than the console, folding ids, host names and numbers in
the middle (``localho|st``, ``137,1|60``), and a column's ``min_width`` only makes the table wider than the
console (rich's collapse does not honour it). ``fitted_table`` decides the widths itself instead:

- a column's least width is its header's longest word and its cells' longest word (a word: a run of non-space
  characters, which rich's word wrap never breaks when the column is at least that wide); a ``no_wrap`` column's
  least width is its widest cell; a ``fold`` column (a host's error: what it says matters more than where a
  path in it breaks) is at least its header's longest word and at most ``FOLD_WIDTH`` wide, longer words folded;
- when the least widths do not fit, whole columns are left out, those with the largest ``drop`` rank first (the
  table's caption names them: ``not shown in 80 columns: by; --json has every field``);
- what room is left goes to the wrapping columns, the narrowest first, up to each one's widest cell;
- when even the columns never left out do not fit, the rows are stacked (``stacked_table``): one column, each
  row's first cell on a line of its own and every other field under it by name, wrapped at words — nothing cut,
  nothing left out.

A rich table with the default box and padding takes ``sum(widths) + 3 * columns + 1`` cells: one space each side
of a cell and one rule between and around the columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len
from rich.markup import escape
from rich.text import Text

JustifyMethod = Literal["default", "left", "center", "right", "full"]

FOLD_WIDTH = 20
"""The least width, in cells, a ``fold`` column is given when its longest word is wider: a word longer than the
column is folded onto the next line rather than the column left out."""


@dataclass(frozen=True)
class Col:
    """One column: ``header`` (plain text), its ``cells`` (rich markup, one per row), ``drop`` (``None``: always
    shown; else columns are left out in decreasing ``drop`` order while the table does not fit), ``wrap`` (may
    wrap between words; otherwise kept on one line), ``fold`` (with ``wrap``: a word wider than the column may be
    folded, see ``FOLD_WIDTH``) and ``justify``."""

    header: str
    cells: Sequence[str]
    drop: int | None = None
    wrap: bool = False
    justify: JustifyMethod = "left"
    fold: bool = False


def _plain(cell: str) -> str:
    """The text a cell shows: its markup applied, emoji codes left as typed (the consoles print with
    ``emoji=False``; ``:thumbs_up:`` measured as one emoji would wrap the column)."""
    return Text.from_markup(cell, emoji=False).plain


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _widest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def least_width(col: Col) -> int:
    """The narrowest the column may be without breaking a word (``wrap``) or a cell (not ``wrap``), in cells; a
    ``fold`` column's words may be broken past ``FOLD_WIDTH``."""
    cells = [_plain(c) for c in col.cells]
    if col.fold:
        return max(_longest_word(col.header), min(FOLD_WIDTH, max((_longest_word(c) for c in cells), default=0)))
    if col.wrap:
        return max([_longest_word(col.header), *(_longest_word(c) for c in cells)])
    return max([cell_len(col.header), *(_widest_line(c) for c in cells)])


def natural_width(col: Col) -> int:
    """The width that shows the column's every cell and its header on one line each, in cells."""
    return max([cell_len(col.header), *(_widest_line(_plain(c)) for c in col.cells)])


def table_width(widths: Sequence[int]) -> int:
    """Cells a default-box, padded rich table takes for these column widths."""
    return sum(widths) + 3 * len(widths) + 1


def fit(cols: Sequence[Col], width: int) -> tuple[list[Col], list[int], list[Col]]:
    """The columns shown (in their order), their widths, and the columns left out, for a console ``width``."""
    shown = list(cols)
    left_out: list[Col] = []
    while table_width([least_width(c) for c in shown]) > width:
        droppable = [c for c in shown if c.drop is not None]
        if not droppable:
            break
        worst = max(c.drop for c in droppable if c.drop is not None)
        gone = [c for c in droppable if c.drop == worst]  # columns of one rank go together (base and head)
        shown = [c for c in shown if not any(c is g for g in gone)]
        left_out.extend(gone)
    widths = [least_width(c) for c in shown]
    room = width - table_width(widths)
    # water-fill: the narrowest wrapping column grows first, each up to its natural width
    while room > 0:
        growable = [i for i, c in enumerate(shown) if c.wrap and widths[i] < natural_width(c)]
        if not growable:
            break
        i = min(growable, key=lambda j: widths[j])
        widths[i] += 1
        room -= 1
    return shown, widths, [c for c in cols if any(c is x for x in left_out)]


def fitted_table(cols: Sequence[Col], width: int) -> tuple[Any, str | None]:
    """A rich ``Table`` (no title) of ``cols`` laid out by ``fit`` for a console ``width``, and a note naming the
    columns left out (``None`` when all are shown). Every column must have one cell per row."""
    from rich.table import Table

    shown, widths, left_out = fit(cols, width)
    note = None
    if left_out:
        names = ", ".join(escape(c.header) for c in left_out)
        note = f"[dim]not shown in {width} columns: {names} (a wider terminal or --json shows them)[/dim]"
    t = Table()
    for c, w in zip(shown, widths, strict=True):
        if c.wrap:
            t.add_column(c.header, justify=c.justify, width=w, overflow="fold")
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True, min_width=w)
    rows = len(cols[0].cells) if cols else 0
    for r in range(rows):
        t.add_row(*(c.cells[r] for c in shown))
    return t, note


def stacked_table(cols: Sequence[Col]) -> Any:
    """A rich ``Table`` of one column for a terminal too narrow for ``cols`` side by side: per row its first cell,
    then, indented under it, every other column's cell that is not empty or ``-`` as ``header value``, joined by
    ``; `` (wrapped at words; a word wider than the terminal folded). Every column must have one cell per row."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table

    t = Table()
    t.add_column(f"{escape(cols[0].header)} / " + ", ".join(escape(c.header) for c in cols[1:]), overflow="fold")
    for r in range(len(cols[0].cells)):
        fields = "; ".join(f"{escape(c.header)} {c.cells[r]}" for c in cols[1:] if _plain(c.cells[r]) not in ("", "-"))
        t.add_row(Group(cols[0].cells[r], Padding(fields, (0, 0, 0, 2))))
    return t


def print_fitted(console: Any, title: str, cols: Sequence[Col]) -> None:
    """Print ``title`` (rich markup, in the style of a table title but wrapped at the console's width, not the
    table's), the fitted table of ``cols`` and the note naming what was left out; when the columns never left
    out (``drop`` None) do not fit side by side, the rows stacked instead (``stacked_table``)."""
    if table_width([least_width(c) for c in cols if c.drop is None]) > console.width:
        console.print(title, style="table.title")
        console.print(stacked_table(cols))
        return
    table, note = fitted_table(cols, console.width)
    console.print(title, style="table.title")
    console.print(table)
    if note:
        console.print(note)
