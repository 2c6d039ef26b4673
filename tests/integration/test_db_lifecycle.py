"""The database's lifecycle through the real ``orch`` process, on SQLite and PostgreSQL: concurrent first starts,
a schema written by a newer orch, /healthz, and credentials that never reach a message, banner or log."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from orchestrator.api.app import STORE_UNAVAILABLE
from orchestrator.api.routes.health import UNHEALTHY
from orchestrator.errors import StoreError
from orchestrator.settings import Settings
from orchestrator.store import migrate, session
from orchestrator.store.repo import Store
from orchestrator.version import version_info

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 240.0  # a loaded 2-core machine: six processes importing orch, each running an agent
SECRET = "S3cr3tPw"

# A child that imports orch, says "ready", waits for the start file, then runs the CLI: the six start together
# without the test relying on sleeps.
_CHILD = """
import os, sys, time
from orchestrator.cli.main import main
print("ready", flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.005)
main(sys.argv[2:])
"""


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def _env(db_url: str, cwd: Path) -> dict[str, str]:
    inv = cwd / "inventory.yaml"
    if not inv.exists():
        inv.write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    return {**os.environ, "PYTHONPATH": str(REPO), "ORCH_DB_URL": db_url, "ORCH_INVENTORY": str(inv),
            "XDG_CACHE_HOME": str(cwd / "cache"), "COLUMNS": "200"}  # fmt: skip


def _orch(db_url: str, cwd: Path, *args: str) -> Done:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd, env=_env(db_url, cwd), capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    return Done(proc.returncode, proc.stdout, proc.stderr)


def _at_once(db_url: str, cwd: Path, args: list[str], n: int = 6) -> list[Done]:
    go = cwd / "go"
    env = _env(db_url, cwd)
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD, str(go), *args], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        for _ in range(n)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        done = []
        for p in procs:
            out, err = p.communicate(timeout=DEADLINE_S)
            done.append(Done(p.returncode, out, err))
        return done
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- case 8: first use of a new database, six processes at once ---------------------------------------------


def test_six_first_upgrades_at_once_all_succeed(db_url: str, tmp_path: Path) -> None:
    done = _at_once(db_url, tmp_path, ["db", "upgrade"])
    assert [d.returncode for d in done] == [0] * 6, [d.stderr[-800:] for d in done if d.returncode]
    head = migrate.head_revision()
    assert all(f"is at revision {head} (head)" in d.stdout for d in done)
    store = Store.from_url(db_url)
    try:
        assert migrate.current_revision(store.engine) == head
    finally:
        store.close()


def test_six_first_runs_at_once_all_succeed(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'orch.db'}"
    done = _at_once(db_url, tmp_path, ["run", "noop", "--hosts", "local", "--json"])
    assert [d.returncode for d in done] == [0] * 6, [(d.stderr[-800:], d.stdout[-1500:]) for d in done if d.returncode]
    store = Store.from_url(db_url)
    try:
        runs = store.list_runs().items
        assert len(runs) == 6 and {r.status for r in runs} == {"completed"}
    finally:
        store.close()


def test_a_busy_sqlite_file_says_who_holds_it_not_that_tables_cannot_be_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'orch.db'}"
    first = Store.from_url(db_url)
    first.upgrade()
    first.close()
    monkeypatch.setattr(session, "SQLITE_BUSY_TIMEOUT_MS", 200)  # the holder never lets go: any wait fails
    waiter = Store.from_url(db_url)
    holder = sqlite3.connect(tmp_path / "orch.db", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError) as err:
            waiter.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1"],
                              started_by="t", started_on="t")  # fmt: skip
        holder.execute("ROLLBACK")
        assert "database is locked" in err.value.message
        assert "busy timeout" in err.value.hint and "create tables" not in err.value.hint
    finally:
        holder.close()
        waiter.close()


# -- case 9: a database written by a newer orch ---------------------------------------------------------------


def _stamp_future(db_url: str, revision: str = "9999_future") -> None:
    store = Store.from_url(db_url)
    try:
        store.upgrade()
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    finally:
        store.close()


@pytest.mark.parametrize(
    "args",
    [("db", "upgrade"), ("runs", "list"), ("run", "noop", "--hosts", "local"), ("serve", "--port", "0")],
    ids=["db-upgrade", "runs-list", "run", "serve"],
)
def test_a_newer_schema_is_one_clear_line_and_exit_2(db_url: str, tmp_path: Path, args: tuple[str, ...]) -> None:
    _stamp_future(db_url)
    if args[0] == "serve":
        args = ("serve", "--port", str(_free_port()))
    res = _orch(db_url, tmp_path, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    assert lines[0] == (
        f"error: the database was written by a newer orch, revision 9999_future; "
        f"this orch knows up to {migrate.head_revision()}"
    )
    assert lines[1].startswith("hint: upgrade orch") and len(lines) == 2, res.stderr
    store = Store.from_url(db_url)
    try:  # nothing was written: still the newer stamp
        assert migrate.current_revision(store.engine) == "9999_future"
    finally:
        store.close()


def test_tables_without_a_revision_are_refused_whole_exit_2(db_url: str, tmp_path: Path) -> None:
    # the variant tester: with alembic_version emptied, `db upgrade` failed "table builds already exists", exit 1,
    # hinting the database might be unreachable
    store = Store.from_url(db_url)
    try:
        store.upgrade()
        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM alembic_version"))
    finally:
        store.close()
    res = _orch(db_url, tmp_path, "db", "upgrade")
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "holds orch's tables but no schema revision (its alembic_version table is missing or empty)" in err
    assert "nothing in this one was changed" in err and "reachable" not in err and "Traceback" not in err


@pytest.mark.postgres
def test_an_unmigrated_server_database_is_exit_2_naming_db_upgrade(pg_url: str, tmp_path: Path) -> None:
    # the variant tester: exit 1 for an unmigrated PostgreSQL (a configuration state, like a newer schema's 2)
    res = _orch(pg_url, tmp_path, "runs", "list")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "is at schema revision (none)" in res.stderr and "run `orch db upgrade`" in res.stderr


# -- /healthz -------------------------------------------------------------------------------------------------


def test_healthz_is_503_unless_the_schema_is_at_head(
    db_url: str, serve: Callable[[Settings, Store], str], caplog: pytest.LogCaptureFixture
) -> None:
    store = Store.from_url(db_url)
    try:
        url = serve(Settings(), store)
        with httpx.Client(base_url=url, timeout=30) as c:
            empty = c.get("/healthz")  # not migrated
            assert (empty.status_code, empty.json()) == (503, {"detail": UNHEALTHY})
            runs = c.get("/api/v1/runs")  # the routes say as little as /healthz
            assert (runs.status_code, runs.json()) == (503, {"detail": STORE_UNAVAILABLE})
            store.upgrade()
            ok = c.get("/healthz")
            assert ok.status_code == 200 and ok.json()["schema_revision"] == migrate.head_revision()
            assert ok.json()["orch"] == version_info().as_dict()  # the same as `orch --version`
            with store.engine.begin() as conn:
                conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
            newer = c.get("/healthz")
            assert (newer.status_code, newer.json()) == (503, {"detail": UNHEALTHY})
    finally:
        store.close()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "orch.api")
    assert "no such table" in logged or "does not exist" in logged  # why the route failed
    assert "this orch needs" in logged and "written by a newer orch, revision 9999_future" in logged


# -- credentials ----------------------------------------------------------------------------------------------


def _shapes(closed_port: int) -> list[str]:
    return [
        f"postgresql+psycopg://orch:{SECRET}@127.0.0.1:{closed_port}/orch",  # nothing listens
        f"postgresql+psycopg://orch:S3c@r/3tPw@127.0.0.1:{closed_port}/orch",  # unencoded @ and /
        f"postgresql+psycopg://orch:{SECRET}@127.0.0.1:notaport/orch",  # port not a number
        f"postgresql+psycopg://orch:{SECRET}@[::1/orch",  # broken IPv6 literal
        f"orch:{SECRET}@127.0.0.1/orch",  # no scheme
        f"postgresql+psycopg:///orch?password={SECRET}&host=127.0.0.1&port={closed_port}",  # password in the query
        f"nosuchdialect://orch:{SECRET}@127.0.0.1/orch",  # no such driver
        f"host=127.0.0.1 user=orch password={SECRET}",  # a libpq DSN where a URL belongs
    ]


def _assert_no_secret(text_: str) -> None:
    for piece in (SECRET, "3tPw", "S3c@r", "r/3t"):
        assert piece not in text_, text_


@pytest.mark.parametrize("shape", range(8))
def test_no_message_shows_a_credential_whatever_the_url(tmp_path: Path, shape: int) -> None:
    url = _shapes(_free_port())[shape]
    for args in (("db", "upgrade"), ("runs", "list")):  # `orch run` opens the store as `runs list` does
        res = _orch(url, tmp_path, *args)
        assert res.returncode in (1, 2), (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "hit a bug" not in res.stderr, res.stderr
        assert res.stderr.startswith("error: "), res.stderr
        _assert_no_secret(res.stdout + res.stderr)


@pytest.mark.postgres
def test_a_real_server_error_does_not_show_the_password(pg_url: str, tmp_path: Path) -> None:
    url = pg_url.replace("postgresql+psycopg://postgres@", f"postgresql+psycopg://postgres:{SECRET}@")
    missing = url.rsplit("/", 1)[0] + "/no_such_database"
    res = _orch(missing, tmp_path, "db", "upgrade")
    assert res.returncode == 1 and "no_such_database" in res.stderr and "does not exist" in res.stderr
    _assert_no_secret(res.stdout + res.stderr)
    ok = _orch(url, tmp_path, "db", "upgrade")  # the same server and password work; the banner hides it
    assert ok.returncode == 0 and "postgresql+psycopg://***@127.0.0.1:" in ok.stdout
    _assert_no_secret(ok.stdout + ok.stderr)


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[[str], tuple[str, subprocess.Popen[str]]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(db_url: str) -> tuple[str, subprocess.Popen[str]]:
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "serve", "--port", str(port)], cwd=tmp_path,
            env=_env(db_url, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                httpx.get(f"{base}/openapi.json", timeout=5)
                return base, proc
            except httpx.TransportError:
                time.sleep(0.2)
        raise AssertionError(f"orch serve did not start: rc={proc.poll()}")

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)


@pytest.mark.parametrize("shape", [0, 5])
def test_serve_on_an_unreachable_database_answers_503_and_logs_without_the_password(
    serve_process: Callable[[str], tuple[str, subprocess.Popen[str]]], shape: int
) -> None:
    url = _shapes(_free_port())[shape]
    base, proc = serve_process(url)
    health = httpx.get(f"{base}/healthz", timeout=30)
    runs = httpx.get(f"{base}/api/v1/runs", timeout=30)
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert (health.status_code, health.json()) == (503, {"detail": UNHEALTHY})
    assert (runs.status_code, runs.json()) == (503, {"detail": STORE_UNAVAILABLE})
    assert "orch results API on http://127.0.0.1:" in err  # the banner ...
    assert "/healthz: cannot read the database's schema revision" in err  # ... and the reason, in the log
    assert "database error: " in err and "database error: database error" not in err  # said once
    _assert_no_secret(out + err + health.text + runs.text)


# -- the everyday schema check needs no Alembic -------------------------------------------------------------


def test_a_database_at_head_is_checked_without_importing_alembic(db_url: str, tmp_path: Path) -> None:
    first = _orch(db_url, tmp_path, "db", "upgrade")  # asks Alembic, records its head in the cache
    assert first.returncode == 0, first.stdout + first.stderr
    cached = list((tmp_path / "cache" / "orch").glob("schema-head-*.json"))
    assert len(cached) == 1 and migrate.head_revision() in cached[0].read_text()
    env = _env(db_url, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", "runs", "list", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "sqlalchemy" in imported and "alembic" not in imported


def test_a_stale_or_wrong_cache_falls_back_to_alembic(db_url: str, tmp_path: Path) -> None:
    assert _orch(db_url, tmp_path, "db", "upgrade").returncode == 0
    (cache,) = (tmp_path / "cache" / "orch").glob("schema-head-*.json")
    # A cache that names another head (e.g. a hand-edited file): the database is not "at head" by it, so the
    # full check runs and passes, and rewrites the cache with Alembic's answer.
    cache.write_text(cache.read_text().replace(migrate.head_revision() or "", "0001_initial_schema"))
    res = _orch(db_url, tmp_path, "runs", "list", "--json")
    assert res.returncode == 0, res.stderr
    assert migrate.head_revision() in cache.read_text()
    # A newer stamp with a cache present still gets the one clear line and exit 2.
    _stamp_future(db_url)
    res = _orch(db_url, tmp_path, "runs", "list")
    assert res.returncode == 2 and "written by a newer orch" in res.stderr


def test_orch_help_imports_neither_sqlalchemy_nor_asyncssh_nor_numpy(tmp_path: Path) -> None:
    """The inner loop (issue 21): the CLI's import pays only for what every command needs; a store, SSH or
    statistics are imported by the commands that use them (two regressions of this came from a status tuple and
    a dataclass imported from heavy modules)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", "--help"],
        cwd=tmp_path, env=_env("sqlite:///" + str(tmp_path / "o.db"), tmp_path), capture_output=True, text=True,
        timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "orchestrator.cli.main" in imported
    assert not imported & {"sqlalchemy", "asyncssh", "numpy", "scipy", "alembic", "matplotlib", "plotly",
                           "pydantic", "orchestrator.inventory"}  # the inventory's models: 0.15 s, via limits.py once
