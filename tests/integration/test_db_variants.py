"""Variants (issue 10, kinds 8/9): concurrent first starts on a new SQLite file, a database stamped with a newer
Alembic revision (one clear line, exit 2, on every command), and credentials that never show for odd URLs.
SQLite only (plus URLs pointing at a closed port), through the real ``orch`` process."""

from __future__ import annotations

import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from orchestrator.store import migrate
from orchestrator.store.repo import Store
from tests.integration.test_db_lifecycle import (
    _CHILD,
    DEADLINE_S,
    Done,
    _env,
    _free_port,
    _orch,
    _stamp_future,
    serve_process,  # noqa: F401 - the fixture
)


def _mixed_at_once(db_url: str, cwd: Path, argvs: list[list[str]]) -> list[Done]:
    go = cwd / "go"
    env = _env(db_url, cwd)
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(go), *a], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in argvs]  # fmt: skip
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        done = []
        for p in procs:
            out, err = p.communicate(timeout=DEADLINE_S)  # before reading returncode: it is None until then
            done.append(Done(p.returncode, out, err))
        return done
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()




@pytest.mark.parametrize("attempt", range(3))
def test_variant_six_mixed_first_starts_on_a_new_sqlite_file(tmp_path: Path, attempt: int) -> None:
    """Variant of kind 8: six different first commands at once on a new SQLite file (2x db upgrade, 2x run noop,
    runs list, runs list --json), three times. Promised: the writers all succeed, the schema at head, both runs
    completed; a reader either succeeds or (it started before the file existed: by design it creates nothing)
    says "no orch database" — never another error (a half-made schema, a lock, a traceback)."""
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    argvs = [["db", "upgrade"], ["run", "noop", "--hosts", "local", "--json"], ["runs", "list"],
             ["db", "upgrade"], ["run", "noop", "--hosts", "local", "--json"], ["runs", "list", "--json"]]
    for argv, d in zip(argvs, _mixed_at_once(url, tmp_path, argvs), strict=True):
        if argv[0] == "runs" and d.returncode == 2 and d.stderr.startswith("error: no orch database at"):
            continue
        assert d.returncode == 0, (argv, d.stderr[-1500:], d.stdout[-800:])
    s = Store.from_url(url)
    try:
        assert migrate.current_revision(s.engine) == migrate.head_revision()
        runs = s.list_runs().items
        assert len(runs) == 2 and {r.status for r in runs} == {"completed"}
    finally:
        s.close()


def test_variant_six_first_starts_in_a_directory_that_does_not_exist_yet(tmp_path: Path) -> None:
    """Variant of kind 8: the SQLite file's parent directory does not exist; six `run noop` start at once.
    Promised: all succeed (or all give one clear error; never some succeed and others crash)."""
    url = f"sqlite:///{tmp_path / 'new' / 'dir' / 'orch.db'}"
    done = _mixed_at_once(url, tmp_path, [["run", "noop", "--hosts", "local", "--json"]] * 6)
    rcs = [d.returncode for d in done]
    assert all("Traceback" not in d.stderr for d in done), [d.stderr[-800:] for d in done]
    assert rcs == [0] * 6 or (len(set(rcs)) == 1 and all(d.stderr.startswith("error: ") for d in done)), [
        (d.returncode, d.stderr[-600:]) for d in done
    ]


NEWER_COMMANDS = {
    "runs-show-latest": ("runs", "show", "latest"),
    "runs-list-json": ("runs", "list", "--json"),
    "runs-compare": ("runs", "compare", "latest", "latest"),
    "runs-import": ("runs", "import", "SPOOL"),
    "cancel": ("cancel", "latest"),
    "run-resume": ("run", "--resume", "latest"),
    "run-json": ("run", "noop", "--hosts", "local", "--json"),
    "db-upgrade-twice": ("db", "upgrade"),
}


@pytest.mark.parametrize("cmd", NEWER_COMMANDS)
def test_variant_newer_schema_is_one_clear_line_and_exit_2_on_more_commands(tmp_path: Path, cmd: str) -> None:
    """Variant of kind 9: a database stamped with a newer revision, and commands other than the tested four:
    runs show, runs list --json, runs compare, runs import, cancel, run --resume, run --json. Promised: one clear
    line (and its hint), exit 2, on every command; the stamp unchanged."""
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    _stamp_future(url, "abcdef123456")
    spool = tmp_path / "events.jsonl"
    spool.write_text('{"v": 1, "seq": 0, "type": "hello"}\n')
    args = tuple(str(spool) if a == "SPOOL" else a for a in NEWER_COMMANDS[cmd])
    res = _orch(url, tmp_path, *args)
    if cmd == "db-upgrade-twice":
        res = _orch(url, tmp_path, *args)
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert lines and lines[0] == (
        "error: the database was written by a newer orch, revision abcdef123456; "
        f"this orch knows up to {migrate.head_revision()}"
    ), res.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: upgrade orch"), res.stderr
    s = Store.from_url(url)
    try:
        assert migrate.current_revision(s.engine) == "abcdef123456"
    finally:
        s.close()


def test_variant_newer_schema_serve_exit_2(tmp_path: Path) -> None:
    """Variant of kind 9: ``orch serve --host 127.0.0.1`` on a newer-stamped database. Promised: exit 2, one line."""
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    _stamp_future(url, "zzzz_newer")
    res = _orch(url, tmp_path, "serve", "--host", "127.0.0.1", "--port", str(_free_port()))
    assert res.returncode == 2, res
    assert res.stderr.splitlines()[0].startswith("error: the database was written by a newer orch, revision zzzz_newer")


PASSWORDS = {
    "at-sign-unencoded": "p@ss@word9Q",
    "colon": "pa:ss:w9Q",
    "percent-literal": "pa%zz%w9Q",
    "unicode": "päss€wörd9Q",
    "slash-hash-question": "pa/ss#w?9Q",
    "space": "pa ss w9Q",
}


def _pieces(pw: str) -> list[str]:
    """What must not show: the password, its percent-encoded form, and any 4+ char fragment of it between the
    odd characters."""
    import re

    frags = [f for f in re.split(r"[@:%/#? ]", pw) if len(f) >= 4]
    return [pw, urllib.parse.quote(pw, safe=""), *frags]


@pytest.mark.parametrize("pw", PASSWORDS)
@pytest.mark.parametrize("encoded", [False, True], ids=["raw", "percent-encoded"])
def test_variant_no_credential_in_messages_for_odd_passwords(tmp_path: Path, pw: str, encoded: bool) -> None:
    """Variant of kind 9: PostgreSQL URLs (a closed port) whose passwords hold @, :, a literal %, unicode, / # ?
    or spaces, written raw or percent-encoded. Promised: exit 1 or 2, an `error:` line, no traceback, and no part
    of the password in stdout/stderr of db upgrade, runs list, runs show and run."""
    secret = PASSWORDS[pw]
    written = urllib.parse.quote(secret, safe="") if encoded else secret
    url = f"postgresql+psycopg://orch:{written}@127.0.0.1:{_free_port()}/orch"
    for args in (("db", "upgrade"), ("runs", "list"), ("runs", "show", "latest"),
                 ("run", "noop", "--hosts", "local")):  # fmt: skip
        res = _orch(url, tmp_path, *args)
        out = res.stdout + res.stderr
        assert res.returncode in (1, 2), (args, out)
        assert "Traceback" not in out and res.stderr.startswith("error: "), (args, out)
        for piece in _pieces(secret):
            assert piece not in out, (args, piece, out)


def test_variant_no_credential_in_doctor_for_an_odd_url(tmp_path: Path) -> None:
    """Variant of kind 9: ``orch doctor`` checks the database setting; its output must not show the password of
    a URL with an unencoded @ in it."""
    secret = "Zq7@xx:Yy8%W"
    url = f"postgresql+psycopg://orch:{secret}@127.0.0.1:{_free_port()}/orch"
    res = _orch(url, tmp_path, "doctor")
    out = res.stdout + res.stderr
    assert "Traceback" not in out
    for piece in (secret, "Zq7", "Yy8", urllib.parse.quote(secret, safe="")):
        assert piece not in out, (piece, out)


@pytest.mark.parametrize("pw", ["unicode", "percent-literal", "space"])
def test_variant_serve_with_an_odd_password_logs_no_credential(serve_process, pw: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Variant of kind 9: ``orch serve`` on an unreachable PostgreSQL whose password (raw in the URL) holds an
    unencoded @, unicode, or a literal %. Promised: /healthz and the API answer 503, and no part of the password
    shows in the banner, the log or the responses."""
    import httpx

    secret = PASSWORDS[pw]
    url = f"postgresql+psycopg://orch:{secret}@127.0.0.1:{_free_port()}/orch"
    base, proc = serve_process(url)
    health = httpx.get(f"{base}/healthz", timeout=30)
    runs = httpx.get(f"{base}/api/v1/runs", timeout=30)
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert health.status_code == 503 and runs.status_code == 503, (health.text, runs.text)
    text = out + err + health.text + runs.text
    for piece in _pieces(secret):
        assert piece not in text, (piece, text[-3000:])


def test_variant_serve_refuses_an_ambiguous_url_without_showing_the_password(tmp_path: Path) -> None:
    """Variant of kind 9: ``orch serve`` with an unencoded @ in the password is refused (exit 2) without any
    part of the password in its message."""
    secret = PASSWORDS["at-sign-unencoded"]
    res = _orch(f"postgresql+psycopg://orch:{secret}@127.0.0.1:{_free_port()}/orch", tmp_path,
                "serve", "--host", "127.0.0.1", "--port", str(_free_port()))  # fmt: skip
    assert res.returncode == 2 and res.stderr.startswith("error: "), res
    for piece in _pieces(secret):
        assert piece not in res.stdout + res.stderr, (piece, res.stderr)
