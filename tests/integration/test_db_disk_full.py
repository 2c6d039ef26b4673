"""orch's own SQLite store on a full filesystem (issue 10: write errors are named), through the real ``orch``.

The database is made and given a run while there is room, then the filesystem (a 2 MiB tmpfs) is filled. SQLite
then cannot create or grow the -shm wal-index every WAL connection maps ("disk I/O error", SQLITE_IOERR_SHMSIZE),
so every command failed with "database migration to head failed: disk I/O error" and a hint to check the database
is "reachable". Now: a command that writes (or migrates) is exit 1 with one line naming the file and ENOSPC and a
hint with the fix; ``orch runs list`` (a read) opens the file read-only without a -shm and lists the stored run.
Nothing stored is changed. Needs root (tmpfs mounts)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 240.0


def orch(db: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    inv = cwd / "inventory.yaml"
    if not inv.exists():
        host = f"{{connection: local, orch_home: {cwd / 'h'}}}"
        inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {host}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "ORCH_DB_URL": f"sqlite:///{db}", "ORCH_INVENTORY": str(inv),
           "XDG_CACHE_HOME": str(cwd / "cache"), "COLUMNS": "400"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.fixture
def small(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True, timeout=60)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=60)


def _fill(mnt: Path) -> None:
    fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (65536, 4096, 512, 1):  # down to the last byte
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    assert os.statvfs(mnt).f_bavail == 0


@pytest.fixture
def full_db(tmp_path: Path, small: Path) -> tuple[Path, str]:
    """A database at head holding one run, on a filesystem then filled; (its path, the run's id)."""
    db = small / "orch.db"
    res = orch(db, tmp_path, "run", "noop", "--hosts", "local", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    run_id = json.loads(res.stdout)["run_id"]
    _fill(small)
    return db, run_id


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


@pytest.mark.parametrize("args", [("run", "noop", "--hosts", "local"), ("db", "upgrade")], ids=["run", "db-upgrade"])
def test_a_write_on_a_full_disk_names_the_file_and_enospc(tmp_path: Path, full_db: tuple[Path, str],
                                                          args: tuple[str, ...]) -> None:  # fmt: skip
    db, _ = full_db
    before = _digest(db)
    res = orch(db, tmp_path, *args)
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2, res.stderr
    assert lines[0].startswith("error: ") and f"the filesystem holding {db} is full" in lines[0], lines[0]
    assert "ENOSPC" in lines[0] and "migration" not in lines[0], lines[0]
    assert lines[1].startswith("hint: ") and "--db" in lines[1] and "reachable" not in lines[1], lines[1]
    assert "Traceback" not in res.stderr
    assert _digest(db) == before  # nothing stored was changed


def test_runs_list_on_a_full_disk_reads_the_store(tmp_path: Path, full_db: tuple[Path, str]) -> None:
    db, run_id = full_db
    before = _digest(db)
    res = orch(db, tmp_path, "runs", "list", "--json")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert run_id in res.stdout and "Traceback" not in res.stderr, (res.stdout, res.stderr)
    assert _digest(db) == before
