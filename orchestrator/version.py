"""What this orch is: ``orch --version``, ``/healthz`` and every run's provenance (``runs.info["orch"]``).

``commit`` comes from ``orchestrator/_build_info.json``, written into the wheel (and the sdist) by the build hook
``scripts/hatch_build.py`` when the build ran in a git checkout; in a source checkout (editable install, tests)
it is read from git when asked. ``agent_sha256`` is the sha256 of the agent.pyz this orch builds and deploys
(``agent_build``), so a result's ``agent_version`` can be matched to the orch that shipped it.
"""

from __future__ import annotations

import functools
import json
import platform
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import orchestrator
from orchestrator.agent_build import agent_source_sha256

BUILD_INFO = "_build_info.json"
_GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class VersionInfo:
    """``commit``: full git sha or None (built outside git); ``commit_source``: ``"build"`` (recorded in the
    wheel), ``"checkout"`` (read from the source tree's git) or None; ``dirty``: uncommitted changes to tracked
    files at that moment (None when unknown)."""

    version: str
    commit: str | None
    commit_source: str | None
    dirty: bool | None
    python: str
    asyncssh: str | None
    sqlalchemy: str | None
    agent_sha256: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """Three lines for ``orch --version``."""
        if self.commit:
            where = "recorded at build" if self.commit_source == "build" else "source checkout"
            commit = f"commit {self.commit}{' (dirty)' if self.dirty else ''}, {where}"
        else:
            commit = "commit unknown (not built from git)"
        return [
            f"orch {self.version} ({commit})",
            f"python {self.python}, asyncssh {self.asyncssh or '-'}, sqlalchemy {self.sqlalchemy or '-'}",
            f"agent sha256 {self.agent_sha256}",
        ]


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _commit() -> tuple[str | None, str | None, bool | None]:
    package = Path(orchestrator.__file__).resolve().parent
    recorded = package / BUILD_INFO
    if recorded.is_file():
        try:
            info = json.loads(recorded.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
        if info.get("commit"):
            return str(info["commit"]), "build", info.get("dirty")
    root = package.parent
    if (root / ".git").exists():
        sha = _git(root, "rev-parse", "HEAD")
        if sha:
            status = _git(root, "status", "--porcelain", "--untracked-files=no")
            return sha, "checkout", None if status is None else bool(status)
    return None, None, None


@functools.cache
def version_info() -> VersionInfo:
    """This process's orch (computed once: the agent zipapp is built in memory to hash it)."""
    commit, source, dirty = _commit()
    return VersionInfo(
        version=orchestrator.__version__,
        commit=commit,
        commit_source=source,
        dirty=dirty,
        python=platform.python_version(),
        asyncssh=_dist_version("asyncssh"),
        sqlalchemy=_dist_version("sqlalchemy"),
        agent_sha256=agent_source_sha256(),
    )
