"""YAML with line numbers, so that errors in the inventory and in suite files name ``file:line`` — pure.

:func:`load` is ``yaml.safe_load`` whose mappings and lists remember the line of every key and item (1-based);
:func:`line_of` finds the line for a pydantic error location. A key given twice is an error, as a reader expects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml


class LinedDict(dict[Any, Any]):
    lines: dict[Any, int]
    line: int


class LinedList(list[Any]):
    lines: list[int]
    line: int


class DuplicateKeyError(ValueError):
    def __init__(self, key: Any, line: int) -> None:
        super().__init__(f"duplicate key {key!r} at line {line}")
        self.key, self.line = key, line


class YamlSyntaxError(ValueError):
    """Not valid YAML; ``line`` is 0 when PyYAML gives no position."""

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.problem, self.line = problem, line


class _LineLoader(yaml.SafeLoader):
    """SafeLoader remembering the line of every mapping key and list item."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LinedDict:
    out = LinedDict()
    out.lines, out.line = {}, node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise DuplicateKeyError(key, key_node.start_mark.line + 1)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LinedList:
    out = LinedList(loader.construct_object(n, deep=True) for n in node.value)
    out.lines, out.line = [n.start_mark.line + 1 for n in node.value], node.start_mark.line + 1
    return out


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load(text: str) -> Any:
    """Parse YAML text. Raises DuplicateKeyError or YamlSyntaxError (with the line), never yaml.YAMLError."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlSyntaxError(str(problem), mark.line + 1 if mark is not None else 0) from None


def line_of(doc: Any, loc: Sequence[int | str]) -> int:
    """The line of the deepest key (or list item) of ``loc`` found in ``doc`` (0 when nothing is known)."""
    line, node = getattr(doc, "line", 0), doc
    for part in loc:
        if isinstance(node, LinedDict) and part in node:
            line, node = node.lines[part], node[part]
        elif isinstance(node, LinedList) and isinstance(part, int) and part < len(node):
            line, node = node.lines[part], node[part]
        else:
            break
    return line
