"""``--help`` laid out by click with words never broken at their hyphens.

click wraps help with ``textwrap`` and its default ``break_on_hyphens=True``: at 80 columns ``rtx-pro-6000-server``
came out as ``rtx-`` / ``pro-6000-server`` and an option named in a help text could be cut the same way, so
a catalog key or option copied from the help was wrong. Here every hyphen of a help text is held as a private-use
character (one column, as wide as the hyphen, not a break point) while click wraps, then put back."""

from __future__ import annotations

from typing import Any

_HELD = "\ue000"  # Unicode private use: never in a help text, one column wide like "-"


def _formatter_class(base: type[Any]) -> type[Any]:
    class HelpFormatter(base):  # type: ignore[misc]
        def _restore(self, start: int) -> None:
            self.buffer[start:] = [part.replace(_HELD, "-") for part in self.buffer[start:]]

        def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
            start = len(self.buffer)
            super().write_usage(prog, args.replace("-", _HELD), prefix)
            self._restore(start)

        def write_text(self, text: str) -> None:
            start = len(self.buffer)
            super().write_text(text.replace("-", _HELD))
            self._restore(start)

        def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
            start = len(self.buffer)
            super().write_dl([(first, *(c.replace("-", _HELD) for c in rest)) for first, *rest in rows],
                             col_max, col_spacing)  # fmt: skip
            self._restore(start)

    return HelpFormatter


def unbroken_hyphens(root: Any) -> None:
    """Give ``root`` (the click command tree ``typer.main.get_command`` builds) and every command under it a
    context whose help formatter never breaks a word at a hyphen. Only these commands change; no I/O."""
    base = root.context_class

    class Context(base):  # type: ignore[misc,valid-type]
        formatter_class = _formatter_class(base.formatter_class)

    todo = [root]
    while todo:
        cmd = todo.pop()
        cmd.context_class = Context
        todo.extend(getattr(cmd, "commands", {}).values())
