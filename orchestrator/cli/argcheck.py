"""Command-line text that orch cannot store or show: refused before any command runs — pure.

Python decodes ``sys.argv`` with ``surrogateescape``: a byte that is not UTF-8 (``$'\\xff'`` in bash, a Latin-1
terminal) arrives as a lone surrogate (U+DC80-U+DCFF) that no database, JSON document or terminal can encode.
Without this check it surfaced deep inside a command as a traceback or as a misleading "database error".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

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


def _foreign_digits(text: str) -> bool:
    return any(ch.isdecimal() and not ch.isascii() for ch in text)  # what int()/float() read as digits


def _ascii_number(text: str) -> str:
    return "".join(str(int(ch)) if ch.isdecimal() else "." if ch == "\u066b" else ch for ch in text)


def _takes_number(param: Any) -> bool:
    """Whether a typer/click parameter's value is an int or a float (typer 0.29 resolves click types lazily: its
    ``type_descriptor.annotation`` is the Python annotation, e.g. ``int | None``)."""
    import typing

    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if ann is not None:
        kinds = set(typing.get_args(ann)) or {ann}
        return bool(kinds & {int, float})
    name = type(getattr(param, "type", None)).__name__
    return name.startswith(("Int", "Float"))


def numeric_options(cmd: Any) -> frozenset[str]:
    """The option names (``--repeat``, ``--timeout``...) that take an int or a float anywhere in the command tree
    ``cmd`` (the click group typer builds)."""
    names: set[str] = set()
    stack = [cmd]
    while stack:
        c = stack.pop()
        for p in getattr(c, "params", []):
            if getattr(p, "param_type_name", "") == "option" and _takes_number(p):
                names.update((*p.opts, *p.secondary_opts))
        stack.extend(getattr(c, "commands", {}).values())
    return frozenset(names)


def refuse_foreign_digits(args: Sequence[str], numeric: frozenset[str]) -> None:
    """Raise UsageError (exit 2) for a number option whose value is written with another script's digits:
    click reads ``--repeat ١٢`` with Python's int(), which takes any Unicode decimal digit, as 12 — orch reads
    numbers in ASCII digits 0-9 only (as ``--set`` does)."""
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if eq and name in numeric:
            opt, val = name, value
        elif arg in numeric and i + 1 < len(args):
            opt, val = arg, args[i + 1]
        else:
            continue
        if _foreign_digits(val):
            raise UsageError(
                f"{opt} {val!r}: a number must be written in ASCII digits 0-9",
                f"for example {opt} {_ascii_number(val)}",
            )


LABEL_MAX = 255  # characters; the runs.label column's String(255)


def check_label(text: str, example: str) -> None:
    """Refuse a run label that is not one line of at most ``LABEL_MAX`` characters without control characters
    (``orch runs label`` and ``orch run --label`` alike): UsageError (exit 2), ``example`` as its hint."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text) or len(text) > LABEL_MAX:
        raise UsageError(f"a label is one line of at most {LABEL_MAX} characters, without control characters", example)
