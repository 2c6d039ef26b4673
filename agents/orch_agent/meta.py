"""Who this agent is: its version (sha256 of the zipapp it runs from) and how to start another copy of it."""

from __future__ import annotations

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


def deployed_tree() -> str | None:
    """The deployed tree this code runs from (``<agent dir>/<sha256>/tree``, unpacked from the ``agent.pyz`` next
    to it and verified against it by orch's deploy check, ``orchestrator/remote/deploy_helper.py``), or None."""
    tree = os.path.dirname(_PKG_DIR)
    sha = os.path.basename(os.path.dirname(tree))
    if (
        os.path.basename(tree) == "tree"
        and len(sha) == 64
        and all(c in "0123456789abcdef" for c in sha)
        and os.path.isfile(os.path.join(tree, "__main__.py"))
        and os.path.isfile(os.path.join(os.path.dirname(tree), "agent.pyz"))
    ):
        return tree
    return None


def agent_version() -> str:
    """sha256 (hex) of the agent.pyz being run — the same digest orch's build computes — or ``"dev"``. From a
    deployed tree: the name of its directory, the digest the deploy check verified the zipapp and the tree
    against."""
    tree = deployed_tree()
    if tree is not None:
        return os.path.basename(os.path.dirname(tree))
    pyz = archive_path()
    if pyz is None:
        return "dev"
    import hashlib

    h = hashlib.sha256()
    with open(pyz, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def self_argv(*args: str) -> list[str]:
    """argv that runs this agent again with ``args`` under the same interpreter."""
    target = deployed_tree() or archive_path()
    if target is not None:
        return [sys.executable, target, *args]
    return [sys.executable, "-m", __package__ or "orch_agent", *args]


def self_env() -> dict[str, str]:
    """Environment for ``self_argv``: from a source tree, the package's root goes first on PYTHONPATH."""
    env = dict(os.environ)
    if deployed_tree() is None and archive_path() is None and __package__:
        root = _PKG_DIR
        for _ in range(
            __package__.count(".")
        ):  # __package__ is "<pkg>" of this module, e.g. "agents.orch_agent"
            root = os.path.dirname(root)
        root = os.path.dirname(root)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
