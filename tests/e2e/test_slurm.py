"""``orch run`` / ``orch cancel`` / ``orch run --resume`` through a real Slurm (tests/plugins/slurm.py: slurmctld,
slurmd, slurmdbd with MariaDB, munge — one node, partition ``cpu``), with ``login: local``: the CLI as a
subprocess, the real agent under ``srun`` on the node, the embedded SQLite store."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Orch
from tests.plugins.slurm import SlurmCluster
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(scaled(600))]


def _inventory(tmp_path: Path, cluster: SlurmCluster, **slurm: Any) -> Orch:
    opts = {"partition": cluster.partition, "nodes": 1, **slurm}
    doc = {
        "groups": {
            "cluster": {
                "slurm": opts,
                "login": "local",
                "vars": {"python": sys.executable, "orch_home": str(tmp_path / "shared-orch")},
            }
        }
    }
    inv = tmp_path / "inventory.yaml"
    inv.write_text(json.dumps(doc))  # JSON is YAML
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


def _wait_for(what: str, probe: Any, deadline_s: float = 120.0) -> Any:
    deadline = time.monotonic() + scaled(deadline_s)
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: not seen within {scaled(deadline_s):g} s (last: {last!r})")


def _latest(orch: Orch) -> dict[str, Any] | None:
    res = orch("runs", "show", "latest", "--json")
    return json.loads(res.stdout) if res.returncode == 0 else None


def _sacct_state(cluster: SlurmCluster, job_id: str) -> str:
    res = cluster.run("sacct", "-n", "-X", "-P", "-o", "State", "-j", job_id)
    return res.stdout.strip().split(" ")[0]


def _finish(proc: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=scaled(240))
    return proc.returncode, json.loads(out), err


@contextmanager
def _killed_if_left(proc: subprocess.Popen[str]) -> Iterator[None]:
    """Kill ``proc`` (an ``orch run``) if the block leaves it running, e.g. when an assertion fails."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _cancel(orch: Orch, slurm_env: SlurmCluster, proc: subprocess.Popen[str], run_id: str,
            job: str) -> tuple[int, dict[str, Any], str]:  # fmt: skip
    """``orch cancel RUN`` while ``proc`` runs it; returns ``proc``'s exit code, JSON and stderr once sacct says the
    job is CANCELLED."""
    cancel = orch.json("cancel", run_id)
    assert cancel["status"] == "cancelled"
    assert _wait_for("sacct CANCELLED", lambda: _sacct_state(slurm_env, job) == "CANCELLED")
    return _finish(proc)


def test_cpu_suite_end_to_end_into_the_store(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    doc = orch.json("run", "noop", "--hosts", "cluster", "--set", "ms=2", "--repeat", "3")
    node = slurm_env.node
    assert doc["status"] == "completed"
    assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [(node, "completed", 1, 0)]
    job = doc["slurm"]["job_id"]
    assert doc["slurm"]["group"] == "cluster" and doc["slurm"]["nodes"] == [node]
    assert doc["slurm"]["state"] == "COMPLETED"
    assert _wait_for("sacct COMPLETED", lambda: _sacct_state(slurm_env, job) == "COMPLETED")
    run_dir = tmp_path / "shared-orch" / "runs" / doc["run_id"]
    lines = (run_dir / node / "events.jsonl").read_text().splitlines()
    types = [json.loads(x)["type"] for x in lines]
    assert types[0] == "hello" and types[-1] == "done" and types.count("result") == 1
    script = (run_dir / "_slurm" / "job.sh").read_text()
    assert "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --kill-on-bad-exit=0" in script
    assert (run_dir / "_slurm" / "spec.json").stat().st_mode & 0o077 == 0  # the spec may hold secrets
    shown = orch.json("runs", "show", doc["run_id"])
    assert [(h["host"], h["status"], h["results"]) for h in shown["hosts"]] == [(node, "completed", 1)]
    text = orch("runs", "show", doc["run_id"]).stdout
    assert f"slurm job {job} (group cluster): COMPLETED" in text
    # the node is a host of the store, in the Slurm group
    hosts = orch.json("runs", "show", doc["run_id"])["run"]["host_runs"]
    assert hosts[0]["info"]["slurm_job"] == job
    # the node's facts, read by its worker and sent in its hello line, are the host run's provenance
    assert hosts[0]["facts"]["hostname"] == socket.gethostname() and hosts[0]["facts"]["python"]


def test_pending_job_is_shown_with_its_reason_and_cancellable(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, nodes=5)  # the cluster has one node: pending (PartitionConfig)
    proc = orch.popen("run", "noop", "--hosts", "cluster", "--json")
    with _killed_if_left(proc):
        pending = _wait_for("a pending job with its reason",
                            lambda: (d := _latest(orch)) and (d.get("slurm") or {}).get("reason") and d)  # fmt: skip
        assert pending["slurm"]["state"] == "PENDING"
        assert pending["slurm"]["reason"] == "PartitionConfig"
        job = pending["slurm"]["job_id"]
        assert job in slurm_env.squeue_ids()
        text = orch("runs", "show", pending["run_id"]).stdout
        assert f"slurm job {job} (group cluster): PENDING, reason PartitionConfig" in text
        rc, doc, err = _cancel(orch, slurm_env, proc, pending["run_id"], job)
    assert rc == 1 and doc["status"] == "cancelled", err[-2000:]
    assert job not in slurm_env.squeue_ids() or _sacct_state(slurm_env, job) == "CANCELLED"
    assert _latest(orch)["status"] == "cancelled"  # type: ignore[index]


def test_a_job_killed_at_its_time_limit_is_timeout(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="1")  # one minute; the case sleeps ten
    res = orch("run", "noop", "--hosts", "cluster", "--set", "ms=600000", "--repeat", "1", "--json",
               timeout=scaled(420))  # fmt: skip
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    node = slurm_env.node
    [host] = doc["hosts"]
    assert host["host"] == node and host["status"] == "failed"
    assert f"Slurm job {doc['slurm']['job_id']} TIMEOUT: the job was killed at its time limit (1 min" in host["error"]
    assert doc["slurm"]["state"] == "TIMEOUT"
    assert _sacct_state(slurm_env, doc["slurm"]["job_id"]) == "TIMEOUT"


def test_orch_cancel_runs_scancel_on_a_running_job(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    proc = orch.popen("run", "noop", "--hosts", "cluster", "--set", "ms=600000", "--repeat", "1", "--json")
    with _killed_if_left(proc):
        running = _wait_for("the node's hello stored", lambda: (d := _latest(orch)) and d["hosts"] and
                            (d.get("slurm") or {}).get("state") == "RUNNING" and d)  # fmt: skip
        rc, doc, err = _cancel(orch, slurm_env, proc, running["run_id"], running["slurm"]["job_id"])
        job = running["slurm"]["job_id"]
    assert rc == 1 and doc["status"] == "cancelled", err[-2000:]
    assert [h["status"] for h in doc["hosts"]] == ["cancelled"]
    assert job not in slurm_env.squeue_ids() or _sacct_state(slurm_env, job) == "CANCELLED"


def test_resume_after_killing_orch_mid_job(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    # one case sleeping 20 s: orch is killed once the node's first lines are stored, the job goes on
    proc = orch.popen("run", "noop", "--hosts", "cluster", "--set", "ms=20000")
    try:
        running = _wait_for("the node's hello stored", lambda: (d := _latest(orch)) and d["hosts"] and
                            d["hosts"][0]["status"] == "running" and d)  # fmt: skip
    finally:
        proc.send_signal(signal.SIGKILL)  # orch dies without a word; the job goes on
        proc.communicate()
    job = running["slurm"]["job_id"]
    assert _wait_for("sacct COMPLETED", lambda: _sacct_state(slurm_env, job) == "COMPLETED")
    late = orch("cancel", running["run_id"])  # the job ended while no orch followed it
    assert late.returncode == 2, late.stdout + late.stderr
    assert f"Slurm job {job} of run {running['run_id'][-8:]} already ended (COMPLETED)" in late.stderr
    assert f"orch run --resume {running['run_id'][-8:]}" in late.stderr
    doc = orch.json("run", "--resume", running["run_id"], timeout=scaled(240))
    node = slurm_env.node
    assert doc["status"] == "completed"
    assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [(node, "completed", 1, 0)]
    assert doc["slurm"]["state"] == "COMPLETED"
    run = orch.json("runs", "show", running["run_id"])["run"]
    [hr] = run["host_runs"]
    spool = (tmp_path / "shared-orch" / "runs" / running["run_id"] / node / "events.jsonl").read_text().splitlines()
    assert hr["last_seq"] == len(spool) - 1  # every line stored once, at its position


def test_doctor_for_a_slurm_group_login_partition_nodes_and_probe(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env)
    node = slurm_env.node
    doc = orch.json("doctor", "--hosts", "cluster", "--probe-nodes", timeout=scaled(300))
    login, row = doc["hosts"]
    checks = {c["name"]: c for c in login["checks"]}
    assert login["host"] == "cluster-login" and login["ok"]
    assert checks["slurm"]["status"] == "ok" and checks["slurm"]["detail"].startswith("slurm-wlm 22.05")  # Debian 12
    assert checks["partition"]["status"] == "ok"
    assert checks["partition"]["detail"].startswith("cpu: 1 node(s): 1 idle; 1 usable, the group asks for 1")
    node_checks = {c["name"]: c for c in row["checks"]}
    assert row["host"] == node and row["ok"]
    assert node_checks["node"]["status"] == "ok" and node_checks["node"]["detail"] == "idle"
    assert node_checks["python"]["status"] == "ok" and node_checks["python"]["interpreter"] == sys.executable
    assert not list((tmp_path / "shared-orch" / "doctor").iterdir())  # the probe's files are removed

    drained = slurm_env.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=bad dimm 3")
    assert drained.returncode == 0, drained.stderr
    try:
        res = orch("doctor", "--hosts", "cluster", "--json", timeout=scaled(120))
        assert res.returncode == 1, res.stderr[-2000:]
        login, row = json.loads(res.stdout)["hosts"]
        part = next(c for c in login["checks"] if c["name"] == "partition")
        assert part["status"] == "fail" and "0 usable, the group asks for 1" in part["detail"]
        assert "lower slurm.nodes" in part["hint"]
        state = next(c for c in row["checks"] if c["name"] == "node")
        assert state["status"] == "fail" and state["detail"] == "idle+DRAIN: bad dimm 3"
        assert state["hint"].endswith(f"scontrol update nodename={node} state=resume")
        text = orch("doctor", "--hosts", "cluster").stdout
        assert f"{node} node: idle+DRAIN: bad dimm 3" in text
    finally:
        slurm_env.run("scontrol", "update", f"nodename={node}", "state=resume")
        _wait_for("the node idle again", lambda: "idle" in slurm_env.run("sinfo", "-h", "-o", "%T").stdout)


SPAN_SUITE = """\
name: span-probe
description: how many nodes the case's own job step spans, as Slurm tells the command
command: ["printenv", "SLURM_STEP_NUM_NODES"]
spans_nodes: true
parser: {name: regex, pattern: '(?P<nodes>[0-9]+)'}
metrics: {nodes: {path: nodes, unit: count}}
"""


def test_a_suite_spanning_nodes_runs_one_case_with_srun_across_the_allocation(
    slurm_env: SlurmCluster, tmp_path: Path
) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "span.yaml").write_text(SPAN_SUITE)
    orch = _inventory(tmp_path, slurm_env, time="5")
    doc = orch.json("run", "span-probe", "--hosts", "cluster", "--suite-dir", str(suites))
    node = slurm_env.node
    assert doc["status"] == "completed"
    assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [(node, "completed", 1)]
    shown = orch.json("runs", "show", doc["run_id"])
    [result] = shown["results"]
    assert result["metrics"]["nodes"]["value"] == 1  # the command ran inside its own srun step of the job
    assert result["info"]["argv"][:4] == ["srun", "--nodes=1", "--ntasks=1", "--ntasks-per-node=1"]
    assert result["info"]["nodes"] == [node]  # stored once, with every node of the allocation
    [hr] = shown["run"]["host_runs"]
    assert hr["info"]["nodes"] == [node]
    script = (tmp_path / "shared-orch" / "runs" / doc["run_id"] / "_slurm" / "job.sh").read_text().splitlines()
    assert script[-1].split()[2] == "slurm-task"  # one agent on the batch host, not under srun


def test_node_local_agent_dir_is_filled_by_sbcast(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    inv = json.loads(orch.inventory.read_text())
    inv["groups"]["cluster"]["agent_dir"] = str(tmp_path / "node-local")
    orch.inventory.write_text(json.dumps(inv))
    doc = orch.json("run", "noop", "--hosts", "cluster", "--set", "ms=1")
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 1
    [copied] = (tmp_path / "node-local").glob("agent-*.pyz")
    script = (tmp_path / "shared-orch" / "runs" / doc["run_id"] / "_slurm" / "job.sh").read_text()
    assert "sbcast --force " in script and str(copied) in script.splitlines()[-1]


def test_ctrl_c_scancels_the_job(slurm_env: SlurmCluster, tmp_path: Path) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    proc = orch.popen("run", "noop", "--hosts", "cluster", "--set", "ms=600000")
    with _killed_if_left(proc):
        running = _wait_for("the node's hello stored", lambda: (d := _latest(orch)) and d["hosts"] and
                            d["hosts"][0]["status"] == "running" and d)  # fmt: skip
        job = running["slurm"]["job_id"]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130
    assert _wait_for("sacct CANCELLED", lambda: _sacct_state(slurm_env, job) == "CANCELLED")
    after = _latest(orch)
    assert after is not None and after["status"] == "cancelled" and after["hosts"][0]["status"] == "cancelled"


def test_login_node_over_ssh(slurm_env: SlurmCluster, sshd_bed: SshdBed, tmp_path: Path) -> None:
    """``login: HOST``: sbatch, squeue, sacct and every node's follow run on the login node through the SSH
    transport (a real sshd whose sessions see the cluster's SLURM_CONF), the agent deployed in its home."""
    login = sshd_bed.add("login-0", start=False)
    login.env["SLURM_CONF"] = str(slurm_env.conf)
    login.start()
    doc = yaml.safe_load(sshd_bed.inventory_yaml({"login": [login]}, python=sys.executable))
    doc["groups"]["cluster"] = {
        "slurm": {"partition": slurm_env.partition, "nodes": 1, "time": "5"},
        "login": "login-0",
        "vars": {"python": sys.executable, "orch_home": str(tmp_path / "shared-orch")},
    }
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(doc))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    out = orch.json("run", "noop", "--hosts", "cluster", "--set", "ms=1")
    assert out["status"] == "completed"
    assert [(h["host"], h["status"], h["results"]) for h in out["hosts"]] == [(slurm_env.node, "completed", 1)]
    assert list((login.home / ".orch" / "agent").glob("*/agent.pyz"))  # deployed over SFTP to the login node
    assert _wait_for("sacct COMPLETED", lambda: _sacct_state(slurm_env, out["slurm"]["job_id"]) == "COMPLETED")


def test_a_node_interpreter_that_does_not_exist_fails_with_slurms_words(
    slurm_env: SlurmCluster, tmp_path: Path
) -> None:
    orch = _inventory(tmp_path, slurm_env, time="5")
    inv = json.loads(orch.inventory.read_text())
    inv["groups"]["cluster"]["vars"]["python"] = "/nonexistent/python3"
    orch.inventory.write_text(json.dumps(inv))
    res = orch("run", "noop", "--hosts", "cluster", "--json", timeout=scaled(240))
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    [host] = doc["hosts"]
    job = doc["slurm"]["job_id"]
    assert doc["status"] == "failed" and host["status"] == "failed" and doc["slurm"]["state"] == "FAILED"
    assert host["error"].startswith(f"Slurm job {job} FAILED: the job failed")
    assert f"_slurm/slurm-{job}.out) ends: " in host["error"] and "/nonexistent/python3" in host["error"]
