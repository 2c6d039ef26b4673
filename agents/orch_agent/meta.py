"""Who this agent is: its version (sha256 of the zipapp it runs from) and how to start another copy of it."""

from __future__ import annotations

import hashlib
import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def archive_path() -> str | None:
    """The agent.pyz this code was imported from, or None when it runs from a source tree."""
    path = _PKG_DIR
    while True:
        if os.path.isfile(path):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def agent_version() -> str:
    """sha256 (hex) of the agent.pyz being run — the same digest orch's build computes — or ``"dev"``."""
    pyz = archive_path()
    if pyz is None:
        return "dev"
    h = hashlib.sha256()
    with open(pyz, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def self_argv(*args: str) -> list[str]:
    """argv that runs this agent again with ``args`` under the same interpreter."""
    pyz = archive_path()
    if pyz is not None:
        return [sys.executable, pyz, *args]
    return [sys.executable, "-m", __package__ or "orch_agent", *args]


def self_env() -> dict[str, str]:
    """Environment for ``self_argv``: from a source tree, the package's root goes first on PYTHONPATH."""
    env = dict(os.environ)
    if archive_path() is None and __package__:
        root = _PKG_DIR
        for _ in range(
            __package__.count(".")
        ):  # __package__ is "<pkg>" of this module, e.g. "agents.orch_agent"
            root = os.path.dirname(root)
        root = os.path.dirname(root)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
