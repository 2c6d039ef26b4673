"""``orch deploy`` / ``orch run`` end to end over real SSH (sshd test bed), CPU torch, real SQLite store."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.analysis.plateau import moe_points, sweep_plateau
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd, pytest.mark.torch]


def _agent_procs(run_id: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", run_id], capture_output=True, text=True).stdout
    # the agent's start and follow, and the worker forked from start (its command line: start's, with --run-id)
    return [line for line in out.splitlines() if "/.orch/agent/" in line]


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


def test_deploy_to_an_sshd_without_sftp_names_the_subsystem(sshd_bed: SshdBed, tmp_path: Path) -> None:
    # the new-user trial: "SFTP upload ... failed: Session request failed", hint "check free disk space"
    h = sshd_bed.add("no-sftp", extra_config=["Subsystem other /bin/true"])
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"lab": [h]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = orch("deploy", "--hosts", "lab")
    assert res.returncode == 1, res.stdout + res.stderr
    text = " ".join((res.stdout + res.stderr).split())
    assert "the host's sshd offers no SFTP subsystem" in text and "Subsystem sftp internal-sftp" in text, text
    assert "disk space" not in text


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


def test_moe_sweep_tiny_on_two_hosts_lands_in_store(two_hosts_any_db: tuple[Orch, list[Any]]) -> None:
    orch, _ = two_hosts_any_db
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
    # The runner's analysis and what it recorded at start, kept side by side in each host run's info (issue 19:
    # the stored plateau was never read by a test; a overwrite of info would lose the spec).
    detail = store.get_run(doc["run_id"])
    for host in ("gpu-a", "gpu-b"):
        hr = detail.host_run(host)
        assert hr is not None
        points = moe_points((r.case, r.metrics) for r in page.items if r.host == host)
        assert hr.info["plateau"] == sweep_plateau(points).to_dict()
        assert (hr.info["preset"], hr.info["gpu_spec"], hr.info["reconnects"]) == ("tiny", None, 0)
        assert hr.info["spec"]["bench"] == "moe_gemm" and [c["M"] for c in hr.info["spec"]["cases"]] == ms
        assert (hr.results, hr.errors, hr.status) == (7, 0, "completed")
    store.close()


def test_killing_the_ssh_session_mid_run_loses_nothing(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    proc = orch.popen("run", "moe-sweep", "--hosts", "gpu-a", "--preset", "tiny", *FEW_CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    try:
        wait_for(lambda: _first_result(store) or proc.poll() is not None, timeout_s=180, what="a first result")
        assert proc.poll() is None, "the run ended before it could be interrupted"
        hosts[0].kill_sessions()  # sshd's per-connection processes die: the SSH session drops
        out, err = proc.communicate(timeout=scaled(240))
    finally:
        _stop(proc)
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["status"] == "completed"
    host_run = store.get_run(doc["run_id"]).host_run("gpu-a")
    assert host_run is not None and host_run.info["reconnects"] >= 1
    page = store.results(doc["run_id"], limit=100)
    ms = sorted(r.case["M"] for r in page.items)
    assert ms == list(range(1, 41))  # every case exactly once


def _has_runs(store: Store) -> bool:
    try:
        return store.list_runs(limit=1).total > 0
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return False


def _first_result(store: Store) -> str | None:
    """The id of the newest run once it has a stored result, else None."""
    if not _has_runs(store):
        return None
    r = store.list_runs(limit=1).items[0]
    return r.id if r.results >= 1 else None


def _stop(proc: subprocess.Popen[str]) -> None:
    """Do not leave an orch process behind a failed assertion."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


# A run that is still going long after its first result, however busy the machine: many short cases (a first
# result within seconds) rather than a few long ones (--repeat 2000 kept the first result back for minutes at
# load 20, and the Ctrl-C test timed out waiting for it).
MANY_CASES = ("--set", "M=" + ",".join(str(m) for m in range(1, 401)), "--repeat", "10")
FEW_CASES = ("--set", "M=" + ",".join(str(m) for m in range(1, 41)), "--repeat", "10")


def _kill_agents(run_id: str) -> None:
    """Leave no agent worker behind a failed test (they run detached, outside the test's process tree)."""
    for line in _agent_procs(run_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def _start_and_wait_for_a_result(orch: Orch, store: Store, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = orch.popen("run", "moe-sweep", "--preset", "tiny", "--timeout", str(scaled(30)), *MANY_CASES, *args)
    try:
        run_id = wait_for(lambda: _first_result(store) or proc.poll() is not None, timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
    except BaseException:
        _stop(proc)
        raise
    assert isinstance(run_id, str)
    return proc, run_id


def test_ctrl_c_stops_remote_agents_and_marks_cancelled(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    store = Store.from_url(orch.db_url)
    proc, run_id = _start_and_wait_for_a_result(orch, store, "--hosts", "ct200,b300")
    try:
        wait_for(lambda: len(_agent_procs(run_id)) >= 2, timeout_s=60, what="an agent worker on each host")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=scaled(180))
    finally:
        _stop(proc)
    assert proc.returncode == 130, err[-3000:]  # 128 + SIGINT, as a shell reports an interrupted command
    try:
        wait_for(lambda: not _agent_procs(run_id), timeout_s=60, what="the remote agents to stop")
    finally:
        _kill_agents(run_id)
    detail = store.get_run(run_id)
    assert detail.status == "cancelled"
    assert [(h.host, h.status) for h in detail.host_runs] == [("gpu-a", "cancelled"), ("gpu-b", "cancelled")]
    assert detail.results >= 1  # what was ingested is kept
    assert detail.results == store.results(run_id, limit=1).total


def test_orch_cancel_stops_the_agents_of_a_run_whose_orch_died(two_hosts: tuple[Orch, list[Any]]) -> None:
    """Issue 19: `orch cancel RUN_ID` (another process than the one that started the run) was never tested."""
    orch, hosts = two_hosts
    store = Store.from_url(orch.db_url)
    proc, run_id = _start_and_wait_for_a_result(orch, store, "--hosts", "ct200,b300")
    wait_for(lambda: len(_agent_procs(run_id)) >= 2, timeout_s=60, what="an agent worker on each host")
    proc.kill()  # orch dies without a word; the agents run on, detached, on their hosts
    proc.communicate()
    assert len(_agent_procs(run_id)) >= 2
    assert store.get_run(run_id).status == "running"

    doc = orch.json("cancel", run_id, timeout=scaled(240))
    assert doc["run_id"] == run_id and doc["status"] == "cancelled"
    assert sorted((h["host"], h["status"]) for h in doc["hosts"]) == [("gpu-a", "cancelled"), ("gpu-b", "cancelled")]
    try:
        wait_for(lambda: not _agent_procs(run_id), timeout_s=60, what="the remote agents to stop")
    finally:
        _kill_agents(run_id)
    detail = store.get_run(run_id)
    assert detail.status == "cancelled" and [h.status for h in detail.host_runs] == ["cancelled", "cancelled"]
    assert detail.results >= 1
    again = orch("cancel", run_id)
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"run {run_id[-8:]} already finished (cancelled); there is nothing to cancel" in again.stderr


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


def test_a_failed_host_of_a_mixed_run_is_named_once_on_its_line(two_hosts: tuple[Orch, list[Any]]) -> None:
    """A new user's: ``gpu-b: failed — gpu-b: connection refused on port …`` (the host named twice) when another
    host of the run completed; alone it read ``gpu-b: failed — connection refused …``."""
    orch, hosts = two_hosts
    hosts[1].stop()
    res = orch("run", "noop", "--hosts", "ct200,b300", "--timeout", str(scaled(20)), timeout=scaled(300))
    assert res.returncode == 1, res.stdout + res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("gpu-b: failed"))
    assert line.startswith("gpu-b: failed — ") and "gpu-b: failed — gpu-b:" not in line, res.stdout
    assert "connection refused" in line, line
