"""Issue 21 item 5, a new-user trial's leftovers (the real ``orch`` process, piped, ``COLUMNS`` fixed): ``runs
show`` broke a suggested command over two lines; a 66-character host name folded in doctor's table and in
``runs show``'s Hosts table (61 characters had fitted since doctor's stacked layout, 66 did not: 66 + a
10-column checks cell + 7 is 83)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import TINY_CASE, Orch, finished_run, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")

LONG_HOST = "gpu-node-" + "x" * 53 + "-001"  # 66 characters
TABLE = tuple("┏┃┡│└┗┣╇╋")


def test_a_suggested_command_is_never_broken(orch: Orch, store: Store) -> None:
    host = "cpu-node-with-a-rather-long-name-00"
    rid = finished_run(store, "moe-sweep", host, [
        Event(seq=i, type="result", data={"case": {"M": 2**i, **TINY_CASE},
                                          "metrics": {"time_ms": {"value": 0.1 * 2**i, "unit": "ms"}}})
        for i in range(4)
    ], facts={"gpus": []}, preset="tiny")  # fmt: skip
    for columns in (80, 100):
        res = orch("runs", "show", rid, columns=columns)
        assert res.returncode == 0, res.stderr
        command = f"orch run hbm-bandwidth --hosts {host}"
        assert [ln for ln in res.stdout.splitlines() if command in ln], res.stdout  # on one line, never split


def test_a_66_character_host_name_is_not_broken_in_runs_show(orch: Orch, store: Store) -> None:
    rid = finished_run(store, "my-suite", LONG_HOST, [
        Event(seq=0, type="result", data={"case": {"M": 1}, "metrics": {"time_ms": {"value": 1.0, "unit": "ms"}}})
    ])  # fmt: skip
    res = orch("runs", "show", rid, columns=80)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    [row] = [ln for ln in lines if ln.startswith("│") and LONG_HOST in ln]  # the Hosts table gives it its width
    assert row.split("│")[1].strip() == LONG_HOST, res.stdout
    cell = " ".join(ln.split("│")[1].strip() for ln in lines[lines.index(row) :] if ln.startswith("│"))
    assert "status completed; results 1; errors 0" in cell, res.stdout  # its fields under the name
    assert LONG_HOST in lines, res.stdout  # the results table's title: the name whole on its line
    assert max(len(ln) for ln in lines if ln[:1] in TABLE) <= 80, res.stdout


def test_a_66_character_host_name_is_not_broken_in_doctor(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: the host fails at tcp, quickly
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  lab:\n    hosts:\n      {LONG_HOST}: {{address: 127.0.0.1, port: {port}}}\n"
                   "      localhost: {connection: local}\n")  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "80", "ORCH_INVENTORY": str(inv),
           "ORCH_DB_URL": f"sqlite:///{tmp_path / 'orch.db'}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "orchestrator", "doctor", "--timeout", "20"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    [row] = [ln for ln in lines if ln.startswith("│") and LONG_HOST in ln]
    assert row.split("│")[1].strip() == LONG_HOST, res.stdout
    cell = " ".join(ln.split("│")[1].strip() for ln in lines[lines.index(row) :] if ln.startswith("│"))
    assert f"127.0.0.1:{port} FAIL tcp;" in cell, res.stdout  # the address and the checks under the name
    assert max(len(ln) for ln in lines if ln[:1] in TABLE) <= 80, res.stdout
