"""Where a run's suite came from, so that a later command on the run (``orch run --resume``) can say which suite
file to give back when the suite is not known without it — pure.

A suite defined in a user's YAML file is known only to a command given its directory (``--suite-dir DIR``,
``ORCH_SUITE_DIR`` or the inventory's ``suite_dir:``). ``orch run`` records the file's path in the run's info
(``suite_file``); ``require_suite`` turns an unknown suite into a usage error naming ``--suite-dir`` and that
path, raised before any host is contacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.errors import SuiteError
from orchestrator.suites.registry import Registry, SuiteDef


def suite_origin(registry: Registry, suite: str) -> dict[str, str]:
    """``{"suite_file": PATH}`` (absolute) for a suite read from a user's suite file; ``{}`` for a built-in suite
    or one of the suite files shipped with orch (always known). Raises SuiteError for an unknown suite."""
    from orchestrator.suites.loader import packaged_suite_files

    cmd = registry.get(suite).command
    if cmd is None or not cmd.source:
        return {}
    path = Path(cmd.source).resolve()
    if path in {p.resolve() for p in packaged_suite_files()}:
        return {}
    return {"suite_file": str(path)}


def require_suite(registry: Registry, suite: str, run_id: str, info: dict[str, Any] | None) -> SuiteDef:
    """The suite of stored run ``run_id``, or SuiteError (exit 2) naming ``--suite-dir`` and, when the run
    recorded it (``info["suite_file"]``), the suite file and its directory."""
    try:
        return registry.get(suite)
    except SuiteError:
        pass
    path = (info or {}).get("suite_file")
    if isinstance(path, str) and path:
        given = f"the run was started from {path}: pass --suite-dir {Path(path).parent}"
    else:
        given = "pass --suite-dir DIR, the directory of the suite file the run was started from"
    from orchestrator.store.compute import short_run_id

    raise SuiteError(
        f"run {short_run_id(run_id)} is of suite {suite!r}, which is not known without its suite file",
        f"{given} (or set ORCH_SUITE_DIR); suites known now: {', '.join(registry.names())}",
    )
