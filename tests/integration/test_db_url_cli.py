"""Bad database settings through the real ``orch`` process (issue 10, follow-up): each is a configuration error,
exit 2, one line naming the setting or the path and a hint with the fix — never a traceback, never a wait.

- An SQLite database where the migration lock beside it cannot be created (/proc, a missing directory, a file
  where a directory should be): before, filelock retried the open for the whole 900 s migration deadline (/proc),
  created the missing directories on the way (the run then went into a database nobody asked for), or the
  error surfaced from SQLite as exit 1. Only a lock held by another process is waited for
  (``test_db_lifecycle.py``: six concurrent first starts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 240.0  # a loaded 2-core machine; the old behaviour waited 900 s


def orch(db_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    inv = cwd / "inventory.yaml"
    if not inv.exists():
        inv.write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ORCH_DB_URL": db_url, "ORCH_INVENTORY": str(inv),
           "XDG_CACHE_HOME": str(cwd / "cache"), "COLUMNS": "400"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)  # fmt: skip


COMMANDS = [("db", "upgrade"), ("run", "noop", "--hosts", "localhost")]


@pytest.mark.parametrize("command", COMMANDS, ids=["db-upgrade", "run"])
@pytest.mark.parametrize("where", ["proc", "missing-dir", "file-as-dir"])
def test_a_lock_that_cannot_be_created_fails_at_once_naming_it(tmp_path: Path, where: str,
                                                                command: tuple[str, ...]) -> None:  # fmt: skip
    if where == "proc":
        db, code, fix = Path("/proc/orch-misc10-test.db"), "(ENOENT)", "a directory you can write to (not /proc)"
    elif where == "missing-dir":
        db, code = tmp_path / "no" / "such" / "x.db", "(ENOENT)"
        fix = f"the directory {tmp_path}/no/such does not exist"
    else:
        (tmp_path / "afile").write_text("x")
        db, code, fix = tmp_path / "afile" / "x.db", "(ENOTDIR)", f"{tmp_path}/afile is a file, not a directory"
    res = orch(f"sqlite:///{db}", tmp_path, *command)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert lines[0] == f"error: cannot create the migration lock {db}.lock beside the SQLite database {db}: " + (
        "Not a directory " if where == "file-as-dir" else "No such file or directory "
    ) + code, res.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: ") and fix in lines[1] and "ORCH_DB_URL" in lines[1]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "no").exists()  # no directory is created on the way
