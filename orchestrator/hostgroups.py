"""Hosts that share one finding, printed once: host lists folded into ranges as Slurm and pdsh write them.

``fold(["n1", ..., "n200"])`` is ``"n[1-200]"``; zero padding (``n[001-010]``), several numeric fields
(``r[1-2]n[01-04]``) and names without digits (``login``) are folded by ClusterShell's ``NodeSet`` (the library
behind ``clush``/``nodeset``, same syntax as Slurm's hostlist). A name that NodeSet would read as a pattern
(brackets, commas, spaces, ``@``/``!``/``&``/``^``) is never folded: it is listed as written.

``group_by(pairs)`` turns ``(host, finding)`` pairs into groups ordered by how many hosts each finding hit
(most first; ties keep the order the findings were first seen). ``generalize`` replaces a host's own name,
address and port in a message with ``{host}``, ``{address}``, ``{port}`` so that "connection refused by
10.0.0.5:22" on 200 hosts is one finding. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# what NodeSet reads as a literal node name; anything else (e.g. "a[1]", "x,y", "@group") is a pattern to it
_FOLDABLE = re.compile(r"[A-Za-z0-9_.:+=/-]+")


def fold(names: Iterable[str]) -> str:
    """A comma-separated host list with numeric runs folded into ranges, e.g. ``b300-[0-3],login,n[001-120]``.

    Duplicates are dropped. Names NodeSet cannot take literally come last, as written, in the order given; if
    folding would not give back exactly the names given (checked by expanding it again), the names are listed
    unfolded, sorted.
    """
    seen: dict[str, None] = dict.fromkeys(names)
    plain = [n for n in seen if _FOLDABLE.fullmatch(n)]
    odd = [n for n in seen if not _FOLDABLE.fullmatch(n)]
    folded = ""
    if plain:
        # imported here: ClusterShell costs ~12 ms of every `orch run`, which folds names only for many hosts
        from ClusterShell.NodeSet import NodeSet

        ns = NodeSet.fromlist(plain)
        folded = str(ns)
        if set(NodeSet(folded)) != set(plain):  # never show a range that means other names
            folded = ",".join(sorted(plain))
    return ",".join(([folded] if folded else []) + odd)


def generalize(text: str, *, host: str, address: str | None = None, port: int | None = None) -> str:
    """``text`` with this host's own ``address:port``, ``address``, name and ``port`` (after an address or
    "port ") written as ``{address}:{port}``, ``{address}``, ``{host}``, ``{port}``; each only as a whole word
    (``n1`` is not replaced inside ``n10``)."""

    def word(s: str) -> str:
        return rf"(?<![\w.-]){re.escape(s)}(?![\w-]|[.:]\w)"  # a trailing '.' or ':' ends a sentence/field

    out = text
    if address and port is not None:
        out = re.sub(word(f"{address}:{port}"), "{address}:{port}", out)
        out = re.sub(word(f"[{address}]:{port}"), "[{address}]:{port}", out)
    if address:
        out = re.sub(word(address), "{address}", out)
    if host and host != address:
        out = re.sub(word(host), "{host}", out)
    if port is not None:
        out = re.sub(rf"(?<=port ){port}(?!\d)", "{port}", out)
    return out


@dataclass(frozen=True)
class Group(Generic[K]):
    """One finding and the hosts it hit (in the order first seen)."""

    key: K
    hosts: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.hosts)

    @property
    def hostlist(self) -> str:
        return fold(self.hosts)


def group_by(pairs: Iterable[tuple[str, K]]) -> list[Group[K]]:
    """Group ``(host, key)`` pairs by key: most hosts first, ties in first-seen order."""
    by_key: dict[K, list[str]] = {}
    for host, key in pairs:
        hosts = by_key.setdefault(key, [])
        if not hosts or hosts[-1] != host:
            hosts.append(host)
    groups = [Group(k, tuple(dict.fromkeys(v))) for k, v in by_key.items()]
    return sorted(groups, key=lambda g: -g.count)  # stable: ties keep first-seen order
