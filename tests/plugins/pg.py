"""A real PostgreSQL for the tests, from Debian's binaries (``/usr/lib/postgresql/<v>/bin``).

``pg_server`` (session): ``initdb`` in a fresh directory and ``postgres`` on 127.0.0.1 on a free port,
trust auth, superuser ``postgres``. initdb refuses to run as root, so under uid 0 the cluster runs as the
``postgres`` system user (``runuser -u postgres --``) in a directory that user owns. ``ORCH_PG_BINDIR`` names
another directory of PostgreSQL binaries. When PostgreSQL cannot start, the tests that need it FAIL with the
reason (tests/plugins/services.py): a run must never silently lose the Postgres half. Skipping them is an
explicit opt-in, ``ORCH_TEST_SKIP_SERVICES=postgres``.

``pg_url`` (function): a fresh, empty database per test (``CREATE DATABASE``), as a SQLAlchemy URL
``postgresql+psycopg://postgres@127.0.0.1:PORT/NAME``; dropped afterwards.

``db_url`` (function, parametrized ``sqlite`` / ``postgres``): an empty database on either engine, and
``store`` (function): a migrated ``Store`` on it — every store and API test runs on both.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.plugins.services import service_unavailable
from tests.plugins.timing import scaled

if TYPE_CHECKING:
    from orchestrator.store.repo import Store

START_TIMEOUT_S = scaled(60.0)


@dataclass(frozen=True)
class PgServer:
    host: str
    port: int
    user: str

    def url(self, dbname: str) -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{dbname}"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"


def _bindir() -> Path | None:
    env = os.environ.get("ORCH_PG_BINDIR")
    if env:
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    return Path(found[0]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unavailable(reason: str) -> None:
    fix = "apt-get install postgresql (scripts/setup.sh --system)"
    if os.environ.get("ORCH_PG_BINDIR"):
        fix = f"point ORCH_PG_BINDIR (now {os.environ['ORCH_PG_BINDIR']!r}) at a directory holding initdb and postgres"
    service_unavailable("postgres", reason, fix)


class PgUnavailable(RuntimeError):
    pass


@contextmanager
def running_postgres() -> Iterator[PgServer]:
    """A throwaway PostgreSQL cluster for the duration of the block (also used by bench/api.py).

    Raises PgUnavailable with the reason when it cannot start.
    """
    bindir = _bindir()
    if bindir is None or not (bindir / "initdb").exists():
        where = f"ORCH_PG_BINDIR={bindir}" if os.environ.get("ORCH_PG_BINDIR") else "/usr/lib/postgresql/*/bin"
        raise PgUnavailable(f"no initdb in {where}")
    prefix: list[str] = []
    root = tempfile.mkdtemp(prefix="orch-pg-")
    if os.geteuid() == 0:
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError as exc:
            raise PgUnavailable("running as root and there is no 'postgres' user to run initdb as") from exc
        os.chown(root, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(root, "data")
    port = _free_port()
    log = os.path.join(root, "postgres.log")
    proc: subprocess.Popen[bytes] | None = None
    try:
        init = subprocess.run(
            [*prefix, str(bindir / "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
             "--no-sync", "--no-locale"],
            capture_output=True, text=True, timeout=scaled(120),
        )  # fmt: skip
        if init.returncode != 0:
            raise PgUnavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
        with open(log, "w") as log_file:
            proc = subprocess.Popen(
                [*prefix, str(bindir / "postgres"), "-D", data, "-h", "127.0.0.1", "-p", str(port),
                 "-k", root, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                 "-c", "max_connections=200"],
                stdout=subprocess.DEVNULL, stderr=log_file,
            )  # fmt: skip
        server = PgServer("127.0.0.1", port, "postgres")
        _wait_ready(server, proc, log)
        yield server
    except (OSError, subprocess.SubprocessError) as exc:
        raise PgUnavailable(str(exc)) from exc
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    reason = None
    try:
        with running_postgres() as server:
            yield server
    except PgUnavailable as exc:
        reason = str(exc)
    if reason is not None:  # outside the except: the failure reads as one message, not a chained traceback
        _unavailable(reason)


def _wait_ready(server: PgServer, proc: subprocess.Popen[bytes], log: str) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PgUnavailable(f"postgres exited with {proc.returncode}: {Path(log).read_text()[-800:]}")
        try:
            with psycopg.connect(server.dsn(), connect_timeout=max(2, int(scaled(5)))):
                return
        except psycopg.OperationalError as exc:
            last = str(exc)
            time.sleep(0.1)
    raise PgUnavailable(f"postgres did not accept connections within {START_TIMEOUT_S:g} s: {last}")


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.url(name)
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'orch.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    from orchestrator.store.repo import Store

    s = Store.from_url(db_url)
    s.upgrade()
    yield s
    s.close()
