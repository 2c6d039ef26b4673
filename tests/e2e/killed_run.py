"""An ``orch run`` SIGKILLed once its first result is stored, its agent left to finish on the host: the set-up of
the resume tests (tests/e2e/test_run_lifecycle.py, tests/e2e/test_resume_spool_check.py)."""

from __future__ import annotations

import subprocess

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.timing import wait_for


def first_result(store: Store) -> str | None:
    """The latest run's id once it has a stored result, else None (also before the run created the schema)."""
    try:
        runs = store.list_runs(limit=1).items
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return None
    return runs[0].id if runs and runs[0].results >= 1 else None


def wait_first_result(store: Store, proc: subprocess.Popen[str]) -> str:
    """The run id of ``proc``'s run once its first result is stored; fails when ``proc`` ended before."""
    run_id = wait_for(lambda: first_result(store) or proc.poll() is not None, timeout_s=120,
                      what="a first stored result")  # fmt: skip
    assert proc.poll() is None and isinstance(run_id, str), proc.communicate()[1][-3000:]
    return run_id


def killed_after_first_result(orch: Orch, store: Store, *run_args: str) -> str:
    """``orch run *run_args`` SIGKILLed once its first result is stored (orch dies without a word; the agent runs
    on, detached); its run id."""
    proc = orch.popen("run", *run_args)
    try:
        return wait_first_result(store, proc)
    finally:
        proc.kill()
        proc.communicate()
