"""``orch serve`` refuses what it cannot serve before it prints its banner, with exit 2 and the fix: a port in use
(it printed the banner, then uvicorn's raw ``[Errno 98]`` and exit 3) and a database URL the CLI refuses (it
started on ``sqlite:////nonexistent-dir/x.db`` and answered 503s). The real ``orch`` process."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch, local_orch

orch = pytest.fixture(local_orch, name="orch")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_port_in_use_is_exit_2_naming_it(orch: Orch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = orch("serve", "--port", str(port), timeout=120)
    err = _flat(res.stderr)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"error: port {port} on 127.0.0.1 is already in use" in err
    assert "hint: pick a free port with --port" in err
    assert "Errno" not in err and "orch results API on" not in err and "Traceback" not in err


def test_a_database_the_cli_refuses_is_refused_at_start(orch: Orch, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent-dir" / "x.db"
    url = f"sqlite:///{missing}"
    listed = orch("--db", url, "runs", "list")
    assert listed.returncode == 2 and "no orch database at" in listed.stderr  # what the CLI says
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = orch("--db", url, "serve", "--port", str(port), timeout=120)
    err = _flat(res.stderr)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"error: no orch database at {missing}" in err and "hint:" in err
    assert "orch results API on" not in err and not missing.parent.exists()
