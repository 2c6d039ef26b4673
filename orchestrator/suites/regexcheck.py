"""Refusing the regexes that backtrack exponentially by their shape alone — pure.

A repeat whose whole body is itself an unbounded repeat, ``(a+)+`` or ``(?:\\d*)*``, can split a run of N
matching characters in 2^N ways, and Python's backtracking ``re`` tries every one when the text almost matches
(``'a' * 40 + '!'`` for ``(a+)+b``): the parse never ends. This module finds that shape in the parsed pattern
(``re._parser``, the standard library's own regex parser, as ``re.compile`` reads it), so a suite file is refused
at load with its file:line. It is deliberately narrow — ``(\\w+\\s?)+`` backtracks just as badly and is not caught;
the time bound on every parse (orchestrator/parsepool.py) is what stops those.
"""

from __future__ import annotations

import importlib
from typing import Any

sre: Any = importlib.import_module("re._parser")  # no stub in typeshed; sre_parse, its old name, warns on import

_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT"})  # POSSESSIVE_REPEAT never backtracks into its body


def _unbounded(op: Any, av: Any) -> bool:
    return str(op) in _REPEATS and av[1] == sre.MAXREPEAT


def _only_item(items: list[Any]) -> tuple[Any, Any] | None:
    """The single item of a sub-pattern, looking through plain groups ``(...)``/``(?:...)``; None otherwise."""
    while len(items) == 1:
        op, av = items[0]
        if str(op) != "SUBPATTERN":
            return op, av
        items = list(av[3])
    return None


def _walk(items: list[Any]) -> bool:
    for op, av in items:
        name = str(op)
        if name in _REPEATS or name == "POSSESSIVE_REPEAT":
            body = list(av[2])
            inner = _only_item(body)
            if _unbounded(op, av) and inner is not None and _unbounded(*inner):
                return True
            if _walk(body):
                return True
        elif name == "SUBPATTERN":
            if _walk(list(av[3])):
                return True
        elif name == "BRANCH":
            if any(_walk(list(alt)) for alt in av[1]):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            if _walk(list(av[1])):
                return True
        elif name == "ATOMIC_GROUP":
            if _walk(list(av)):
                return True
        elif name == "GROUPREF_EXISTS":
            if _walk(list(av[1])) or (av[2] is not None and _walk(list(av[2]))):
                return True
    return False


def nested_quantifier(pattern: str, flags: int = 0) -> bool:
    """True when ``pattern`` (a valid regex) repeats a group that is only an unbounded repeat: ``(a+)+``,
    ``(?P<v>(\\d+)*)``, ``((?:x*))+``. Not for ``(ab+)+`` (something else in the group) or ``(a{1,3})+``."""
    return _walk(list(sre.parse(pattern, flags).data))
