"""Command-line text that orch cannot store or show: refused before any command runs — pure.

Python decodes ``sys.argv`` with ``surrogateescape``: a byte that is not UTF-8 (``$'\\xff'`` in bash, a Latin-1
terminal) arrives as a lone surrogate (U+DC80-U+DCFF) that no database, JSON document or terminal can encode.
Without this check it surfaced deep inside a command as a traceback or as a misleading "database error".
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from orchestrator.errors import UsageError


def _undecodable(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _shown(text: str) -> str:
    """``text`` with each undecodable byte written as ``\\xNN``."""
    return os.fsencode(text).decode("utf-8", errors="backslashreplace")


def refuse_undecodable(args: Sequence[str]) -> None:
    """Raise UsageError (exit 2) naming the first argument that is not valid UTF-8 and the option it belongs to.

    An existing file's path is let through: POSIX file names are bytes, and orch only opens them.
    """
    for i, arg in enumerate(args):
        if not _undecodable(arg):
            continue
        name, eq, value = arg.partition("=")
        if os.path.exists(value if eq and name.startswith("--") else arg):
            continue
        if eq and name.startswith("--") and not _undecodable(name):
            where = f"{name} '{_shown(value)}'"
        elif i > 0 and args[i - 1].startswith("-") and not _undecodable(args[i - 1]):
            where = f"{args[i - 1]} '{_shown(arg)}'"
        else:
            where = f"argument {i + 1} ('{_shown(arg)}')"
        raise UsageError(
            f"{where} is not valid UTF-8 text",
            "orch stores and shows names, labels and values as UTF-8: retype it, or check the locale "
            "(LANG/LC_ALL) of the terminal or script that built the command",
        )
