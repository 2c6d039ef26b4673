"""``orch deploy`` / ``orch run`` end to end over real SSH (sshd test bed), CPU torch, real SQLite store."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd, pytest.mark.torch]


def _agent_procs(run_id: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", run_id], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "_worker" in line or "agent.pyz" in line]


def test_deploy_twice_uploads_nothing_the_second_time(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    first = orch.json("deploy", "--hosts", "ct200,b300")
    assert [r["agent"] for r in first["hosts"]] == ["uploaded", "uploaded"]
    assert all(r["uploaded_bytes"] > 0 for r in first["hosts"])
    second = orch.json("deploy", "--hosts", "ct200,b300")
    assert [r["agent"] for r in second["hosts"]] == ["present", "present"]
    assert [r["uploaded_bytes"] for r in second["hosts"]] == [0, 0]
    sha = first["hosts"][0]["agent_sha"]
    for h in hosts:
        assert (h.home / ".orch" / "agent" / sha / "agent.pyz").is_file()


def test_deploy_build_content_addressed_and_switched(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, hosts = two_hosts
    build = tmp_path / "engine"
    (build / "bin").mkdir(parents=True)
    (build / "bin" / "engine").write_text("#!/bin/sh\necho engine\n")
    (build / "bin" / "engine").chmod(0o755)
    doc = orch.json("deploy", "--hosts", "ct200", "--build", str(build))
    row = doc["hosts"][0]
    assert row["build"] == "uploaded" and row["switched"] is True
    sha = row["build_sha"]
    home = hosts[0].home / ".orch" / "builds"
    assert (home / sha / "bin" / "engine").stat().st_mode & 0o111
    assert (home / "current").resolve().name == sha
    again = orch.json("deploy", "--hosts", "ct200", "--build", str(build))["hosts"][0]
    assert again["build"] == "present" and again["uploaded_bytes"] == 0 and again["build_sha"] == sha


def test_moe_sweep_tiny_on_two_hosts_lands_in_store(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, _ = two_hosts
    doc = orch.json("run", "moe-sweep", "--hosts", "ct200,b300", "--preset", "tiny", "--repeat", "3")
    assert doc["status"] == "completed", doc
    assert sorted((h["host"], h["status"], h["results"]) for h in doc["hosts"]) == [
        ("gpu-a", "completed", 7),
        ("gpu-b", "completed", 7),
    ]
    store = Store.from_url(orch.db_url)
    page = store.results(doc["run_id"], limit=100, samples=True)
    assert len(page.items) == 14
    ms = sorted(r.case["M"] for r in page.items if r.host == "gpu-a")
    assert ms == [1, 2, 4, 8, 16, 32, 64]
    first = next(r for r in page.items if r.host == "gpu-a" and r.case["M"] == 1)
    for name in ("time_ms", "us_per_token", "weight_bytes", "gbps", "tflops", "distinct_experts"):
        assert name in first.metrics, first.metrics.keys()
    # tiny preset: E=16, k=4, one shared expert; M=1 touches 4 routed + 1 shared; 3*H*I*4 B each (fp32)
    assert first.metrics["distinct_experts"]["value"] == 5
    assert first.metrics["weight_bytes"]["value"] == 5 * 3 * 256 * 128 * 4
    assert len(first.metrics["time_ms"]["samples"]) == 3


def test_killing_the_ssh_session_mid_run_loses_nothing(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    proc = orch.popen("run", "moe-sweep", "--hosts", "gpu-a", "--preset", "tiny", "--repeat", "300", "--json")
    store = Store.from_url(orch.db_url)
    deadline = time.monotonic() + 120
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        runs = store.list_runs(limit=1).items if _has_runs(store) else []
        if runs and runs[0].results >= 1:
            hosts[0].kill_sessions()  # sshd's per-connection processes die: the SSH session drops
            killed = True
            break
        time.sleep(0.2)
    assert killed, "the run produced no result to interrupt"
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["status"] == "completed"
    host_run = store.get_run(doc["run_id"]).host_run("gpu-a")
    assert host_run is not None and host_run.info["reconnects"] >= 1
    page = store.results(doc["run_id"], limit=100)
    ms = sorted(r.case["M"] for r in page.items)
    assert ms == [1, 2, 4, 8, 16, 32, 64]  # every case exactly once


def _has_runs(store: Store) -> bool:
    try:
        return store.list_runs(limit=1).total > 0
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return False


def test_ctrl_c_stops_remote_agents_and_marks_cancelled(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    proc = orch.popen("run", "moe-sweep", "--hosts", "ct200,b300", "--preset", "tiny", "--repeat", "2000")
    store = Store.from_url(orch.db_url)
    deadline = time.monotonic() + 120
    run_id = None
    while time.monotonic() < deadline:
        if _has_runs(store):
            r = store.list_runs(limit=1).items[0]
            if r.results >= 1:
                run_id = r.id
                break
        time.sleep(0.2)
    assert run_id, "no result arrived"
    assert _agent_procs(run_id), "agent workers should be running"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    for _ in range(50):
        if not _agent_procs(run_id):
            break
        time.sleep(0.2)
    assert _agent_procs(run_id) == []
    detail = store.get_run(run_id)
    assert detail.status == "cancelled"
    assert detail.results >= 1  # what was ingested is kept


def test_host_without_torch_fails_with_the_python_key_while_others_finish(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    orch, hosts = two_hosts
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    inv = orch.inventory.read_text().replace(
        "    hosts:\n      gpu-b:", f"    vars:\n      python: {bare}/bin/python\n    hosts:\n      gpu-b:"
    )
    orch.inventory.write_text(inv)
    res = orch("run", "moe-sweep", "--hosts", "ct200,b300", "--preset", "tiny", "--repeat", "2", "--json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    assert doc["status"] == "partial"
    by = {h["host"]: h for h in doc["hosts"]}
    assert by["gpu-a"]["status"] == "completed"
    assert by["gpu-b"]["status"] == "failed"
    assert f"{bare}/bin/python cannot import torch: No module named 'torch'" in by["gpu-b"]["error"]
    human = orch("run", "moe-sweep", "--hosts", "b300", "--preset", "tiny", "--repeat", "2")
    assert "set `python:` for gpu-b in the inventory" in human.stdout + human.stderr
