"""YAML with line numbers, so that errors in the inventory and in suite files name ``file:line`` — pure.

:func:`load` is ``yaml.safe_load`` whose mappings and lists remember the line of every key and item (1-based);
:func:`line_of` finds the line for a pydantic error location. A key given twice is an error, as a reader
expects; a plain key is the text written (``0710:`` is ``"0710"``, not 456); merge keys (``<<: *base``) work as
in ``yaml.safe_load``; a list or mapping as a key is a YamlSyntaxError.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

import yaml


class LinedDict(dict[Any, Any]):
    """A mapping with the line of every key; ``texts`` / ``key_texts``: the text written for plain (unquoted)
    scalar values / keys, so that a reader can take ``NO``, ``0710`` or ``12:30`` as written."""

    lines: dict[Any, int]
    line: int
    texts: dict[Any, str]
    key_texts: dict[Any, str]


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


class YamlNumberError(YamlSyntaxError):
    """A number written in the YAML that a 64-bit float cannot hold as written (``1e400``, ``1.0e-400``)."""

    HINT = "write a number between 4.9e-324 and 1.8e308 in magnitude (or 0), or quote it to make it a string"


class _LineLoader(yaml.SafeLoader):
    """SafeLoader remembering the line of every mapping key and list item."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LinedDict:
    out = LinedDict()
    out.lines, out.line, out.texts, out.key_texts = {}, node.start_mark.line + 1, {}, {}
    own = {id(k) for k, _ in node.value}
    # Merge keys (``<<: *base``) as yaml.SafeLoader reads them: the merged entries come first and a key written
    # in this mapping overrides a merged one; only a key written twice in the mapping itself is a duplicate.
    loader.flatten_mapping(node)
    written_here: set[Any] = set()
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise YamlSyntaxError(
                "a mapping key must be a plain value (a name or a number), not a list or a mapping",
                key_node.start_mark.line + 1,
            )
        plain_key = isinstance(key_node, yaml.ScalarNode) and key_node.style is None
        if plain_key and key is not None and not isinstance(key, str):
            key = key_node.value  # names as written: 0710 and 456, yes and on are different keys, not 456 / True
        if id(key_node) in own:
            if key in written_here:
                raise DuplicateKeyError(key, key_node.start_mark.line + 1)
            written_here.add(key)
        out.pop(key, None)
        out.texts.pop(key, None)
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
        if isinstance(value_node, yaml.ScalarNode) and value_node.style is None:
            out.texts[key] = value_node.value
        if plain_key:
            out.key_texts[key] = key_node.value
    return out


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LinedList:
    out = LinedList(loader.construct_object(n, deep=True) for n in node.value)
    out.lines, out.line = [n.start_mark.line + 1 for n in node.value], node.start_mark.line + 1
    return out


# YAML 1.2's float (the core schema): ``1e5``, ``1.0e5``, ``1E-3`` are numbers. PyYAML resolves by YAML 1.1,
# whose float needs a dot and a signed exponent, so it read them as the strings "1e5" / "1.0e5"; a number
# parameter's default written so was refused as "not a number". Tried after YAML 1.1's own int and float.
_LineLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def _construct_float(loader: _LineLoader, node: yaml.ScalarNode) -> Any:
    """YAML's float, refusing what a double cannot hold as written (``protocol.checked_float``): ``1e400``
    (PyYAML reads inf) and ``1.0e-400`` (a non-zero number read as 0.0) are YamlNumberErrors naming the line,
    never a silent inf or 0 in a suite's default or an inventory value. ``.inf`` and ``.nan`` are YAML's own."""
    value = loader.construct_yaml_float(node)
    text = str(node.value).replace("_", "")
    if isinstance(value, float) and "inf" not in text.lower() and "nan" not in text.lower() and ":" not in text:
        from orchestrator.protocol import Unholdable, checked_float

        held = checked_float(text)
        if isinstance(held, Unholdable):
            why = ("not zero but below the smallest double (4.9e-324), which holds it only as 0; write 0 if 0 is "
                   "meant" if held.tiny else "past the range of a double (±1.8e308)")  # fmt: skip
            raise YamlNumberError(f"the number {node.value} is {why}", node.start_mark.line + 1)
    return value


_LineLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load(text: str) -> Any:
    """Parse YAML text. Raises DuplicateKeyError, YamlNumberError or YamlSyntaxError (with the line), never
    yaml.YAMLError."""
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlSyntaxError(str(problem), mark.line + 1 if mark is not None else 0) from None


def written(node: Any, key: Any) -> Any:
    """``node[key]``, or the text written for it when YAML 1.1 resolved a plain scalar to something other than a
    string (``NO`` -> False, ``0710`` -> 456, ``12:30`` -> 750): that text, unchanged. A null stays None."""
    value = node[key]
    if isinstance(node, LinedDict) and value is not None and not isinstance(value, str) and key in node.texts:
        return node.texts[key]
    return value


def text_keys(node: Any) -> Any:
    """A copy of a mapping whose plain-scalar keys are the text written for them (``NO:`` stays ``"NO"``,
    ``0710:`` ``"0710"``), lines and texts kept; anything but a LinedDict is returned as it is."""
    if not isinstance(node, LinedDict):
        return node
    out = LinedDict()
    out.line, out.lines, out.texts, out.key_texts = node.line, {}, {}, {}
    for key, value in node.items():
        new = key if isinstance(key, str) else node.key_texts.get(key, key)
        if new in out:
            raise DuplicateKeyError(new, node.lines[key])
        out[new] = value
        out.lines[new] = node.lines[key]
        if key in node.texts:
            out.texts[new] = node.texts[key]
        out.key_texts[new] = str(new)
    return out


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
