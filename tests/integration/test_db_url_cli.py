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


# -- item 4: every command, one exit code per kind of bad URL -------------------------------------------------------
# A URL that is malformed, names no file or a driver that is not installed is the user's setting to fix: exit 2,
# "error: --db / ORCH_DB_URL ..." and a hint. A server that is down or refuses the credentials is the
# environment: exit 1 (README, "Exit status"), also from `db upgrade`; `orch serve` alone starts anyway and
# answers 503 until the database is reachable (test_db_lifecycle.py). Never a traceback, never the password.

SECRET = "Pw0rdS3cret"
# serve fails before it binds the port; doctor, which never opens the store, checks the setting all the same
ALL_COMMANDS = [*COMMANDS, ("runs", "list"), ("serve", "--port", "1"), ("doctor",)]
CONFIG_SHAPES = {
    "in-memory": "sqlite:///",
    "unknown-driver": "nosuch://x",
    "broken-ipv6": f"postgresql://u:{SECRET}@[::1/x",
    "empty": "",
    "driver-not-installed": f"mysql://u:{SECRET}@h/x",
}


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: "-".join(c[:2]))
@pytest.mark.parametrize("shape", sorted(CONFIG_SHAPES))
def test_a_url_that_cannot_be_used_as_written_is_exit_2(tmp_path: Path, shape: str,
                                                        command: tuple[str, ...]) -> None:  # fmt: skip
    res = orch(CONFIG_SHAPES[shape], tmp_path, *command)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: --db / ORCH_DB_URL ") and lines[1].startswith("hint: ")
    assert res.stdout == "" and SECRET not in res.stderr


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: "-".join(c[:2]))
@pytest.mark.parametrize("what", ["dev-null", "fifo"])
def test_an_sqlite_path_that_is_not_a_regular_file_is_exit_2(tmp_path: Path, what: str,
                                                              command: tuple[str, ...]) -> None:  # fmt: skip
    """Issue 21: ``--db sqlite:////dev/null`` exited 1 ("database migration to head failed: disk I/O error", as if
    a database had failed), and a FIFO hung every command on SQLite's open. A device or a FIFO is a setting to
    fix: exit 2 naming the path, what it is, and the fix."""
    if what == "dev-null":
        path, kind = Path("/dev/null"), "a character device"
    else:
        path, kind = tmp_path / "db.fifo", "a FIFO"
        os.mkfifo(path)
    res = orch(f"sqlite:///{path}", tmp_path, *command)
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert lines[0] == (f"error: --db / ORCH_DB_URL names {path}, {kind}, not an SQLite database file "
                        f"(sqlite:///{path})"), res.stderr  # fmt: skip
    assert len(lines) == 2 and lines[1].startswith("hint: ") and "sqlite:///./orch.db" in lines[1], res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr

def test_doctor_checks_the_database_setting_but_never_connects(tmp_path: Path) -> None:
    """Issue 21: ``orch doctor`` took any ``--db`` (``not a url``, ``sqlite:////nonexistent/dir/x.db``) and exited 0.
    A setting every other command refuses as written is exit 2 in doctor too (the URL shapes above); a directory
    missing for an SQLite file as ``orch run`` refuses it, nothing created. Doctor does not use the store, so a
    server that is down is not its failure: it never connects."""
    missing = tmp_path / "no" / "such" / "x.db"
    res = orch(f"sqlite:///{missing}", tmp_path, "doctor")
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert lines[0] == f"error: --db / ORCH_DB_URL names an SQLite file in a directory that does not exist: {missing}"
    assert len(lines) == 2 and f"create {missing.parent}" in lines[1] and "sqlite:///./orch.db" in lines[1], lines
    assert res.stdout == "" and not (tmp_path / "no").exists()
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = orch(f"postgresql://u:{SECRET}@127.0.0.1:{port}/x", tmp_path, "doctor")
    assert res.returncode in (0, 1) and res.stderr == "", (res.stdout, res.stderr)  # the hosts' verdict, no store's
    assert "hosts passed" in res.stdout and SECRET not in res.stdout

@pytest.mark.parametrize("command", ALL_COMMANDS[:3], ids=lambda c: "-".join(c[:2]))
def test_a_server_that_is_down_is_exit_1_on_every_command(tmp_path: Path, command: tuple[str, ...]) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = orch(f"postgresql://u:{SECRET}@127.0.0.1:{port}/x", tmp_path, *command)
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and "Connection refused" in lines[0] and lines[1].startswith("hint: "), res.stderr
    assert SECRET not in res.stdout + res.stderr and "Traceback" not in res.stderr


@pytest.mark.postgres
@pytest.mark.parametrize("command", ALL_COMMANDS[:3], ids=lambda c: "-".join(c[:2]))
def test_a_server_that_refuses_the_credentials_is_exit_1_on_every_command(pg_url: str, tmp_path: Path,
                                                                         command: tuple[str, ...]) -> None:  # fmt: skip
    url = pg_url.replace("postgresql+psycopg://postgres@", f"postgresql+psycopg://nosuchrole:{SECRET}@")
    res = orch(url, tmp_path, *command)
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and 'role "nosuchrole" does not exist' in lines[0], res.stderr
    assert lines[1].startswith("hint: ") and SECRET not in res.stdout + res.stderr
