"""bench/fanout_scale.py's set-up and its second run floor against real sshd: hosts of one machine whose PATH holds
an ``nvidia-smi`` listing a GPU see none through the bench's ``python:`` wrapper, and the remote commands recorded
from ``orch run noop`` on one host, replayed by bare asyncssh on the others, run the agent's worker to ``done``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.remote_replay import host_commands, nogpu_python, read_log, record, replay_floor
from orchestrator.store.compute import uuid7
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.plugins.sshfleet import loopback_addresses, start_fleet_sshd

pytestmark = pytest.mark.sshd

SMI_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "h200x1_fleet.csv"


async def test_nogpu_hosts_and_the_replayed_run_floor(sshd_bed: SshdBed, tmp_path: Path) -> None:
    names = ["h0", "h1", "h2"]
    addrs = loopback_addresses(len(names), second_octet=37)
    sshd = start_fleet_sshd(sshd_bed, "fleet", addrs)[0]
    smi_bin = tmp_path / "smi-bin"  # one machine's real GPU, as on the lent H200 machine
    smi_bin.mkdir()
    (smi_bin / "nvidia-smi").write_text(f"#!/bin/sh\nexec /bin/cat {SMI_CSV}\n")
    (smi_bin / "nvidia-smi").chmod(0o755)
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python, hidden = nogpu_python(tmp_path / "python-nogpu", str(bare / "bin" / "python"), f"{smi_bin}:/usr/bin:/bin")
    assert hidden == [str(smi_bin)]
    inv = tmp_path / "inventory.yaml"
    rows = "".join(f"      {n}: {{address: {a}, port: {sshd.port}}}\n" for n, a in zip(names, addrs, strict=True))
    inv.write_text(f"defaults: {{python: {python}}}\ngroups:\n  fleet:\n    hosts:\n{rows}")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)

    doc = orch.json("doctor", "--timeout", "30", expect_rc=1, timeout=600)
    gpus = {h["host"]: next(c for c in h["checks"] if c["name"] == "gpus") for h in doc["hosts"]}
    no_gpu = ("warn", "no GPU: nvidia-smi not found on the host")
    assert {h: (c["status"], c["detail"]) for h, c in gpus.items()} == dict.fromkeys(names, no_gpu)

    env = orch.env()
    first = record(["run", "noop", "--hosts", "h0", "--json", "--timeout", "30"], env, tmp_path / "rec-1.jsonl")
    assert first["status"] == "completed", first
    with pytest.raises(ValueError, match="uploaded files"):  # the first run put the agent into the shared HOME
        host_commands(read_log(tmp_path / "rec-1.jsonl"), "h0")
    second = record(["run", "noop", "--hosts", "h0", "--json", "--timeout", "30"], env, tmp_path / "rec-2.jsonl")
    assert second["status"] == "completed", second
    cmds = host_commands(read_log(tmp_path / "rec-2.jsonl"), "h0")
    assert [(c["kind"], c["argv"][0], c["argv"][3] if c["kind"] == "run" else c["argv"][2]) for c in cmds] == [
        ("run", python, "ensure"),  # the deploy check with the facts: python -c <helper> ensure ... --facts
        ("stream", python, "start"),  # agent start --spec - --follow, the spec on stdin
    ]

    run_id = uuid7()
    client = sshd_bed.client
    spec = {"hosts": [[n, a, sshd.port] for n, a in zip(names[1:], addrs[1:], strict=True)], "cmds": cmds,
            "recorded_host": "h0", "recorded_run": second["run_id"], "run_id": run_id, "concurrency": 64,
            "known_hosts": str(client.known_hosts), "key": str(client.key), "timeout": 30}  # fmt: skip
    assert await replay_floor(spec) == {"ok": 2, "failed": 0}
    for n in names[1:]:  # the worker ran the noop suite on each host, in the floor's own run
        lines = (sshd.home / ".orch" / "runs" / run_id / n / "events.jsonl").read_text().splitlines()
        done = json.loads(lines[-1])
        assert (done["type"], done["status"], done["counts"]["results"], done["counts"]["errors"]) == (
            "done", "completed", 1, 0), done  # fmt: skip

    run = orch.json("run", "noop", "--hosts", "fleet", "--timeout", "30", timeout=600)
    assert [(h["host"], h["status"]) for h in run["hosts"]] == [(n, "completed") for n in names]
