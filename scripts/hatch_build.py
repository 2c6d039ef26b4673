"""hatchling build hook (pyproject: [tool.hatch.build.hooks.custom]): records the git commit the wheel or sdist
was built from as ``orchestrator/_build_info.json``, read by ``orchestrator.version`` for ``orch --version``,
``/healthz`` and each run's provenance.

Outside a git checkout (``python -m build`` makes the wheel from the sdist) the sdist's copy of the file is
shipped; editable installs get nothing (they read git at run time).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

TARGET = "orchestrator/_build_info.json"


def _git(root: str, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


class BuildInfoHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        commit = _git(self.root, "rev-parse", "HEAD") if os.path.exists(os.path.join(self.root, ".git")) else None
        if commit is None:
            # e.g. the wheel built from the sdist: ship the sdist's record (force_include: .gitignore lists it)
            recorded = os.path.join(self.root, TARGET)
            if os.path.isfile(recorded):
                build_data["force_include"][recorded] = TARGET
            return
        status = _git(self.root, "status", "--porcelain", "--untracked-files=no")
        info = {"commit": commit, "dirty": None if status is None else bool(status)}
        fd, path = tempfile.mkstemp(prefix="orch-build-info-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(info, f)
        self._tmp = path
        build_data["force_include"][path] = TARGET

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
