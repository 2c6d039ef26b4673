"""Issue 15 over the sshd test bed: fleet drift (``orch fleet``, ``orch run --require-uniform``/``--allow-drift``)
and per-case GPU telemetry, with a fake ``nvidia-smi`` (tests/fixtures/fake-nvidia-smi) on each host's PATH."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.integration import peers
from tests.plugins.sshd import SshdBed

pytestmark = pytest.mark.sshd

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "fake-nvidia-smi" / "nvidia_smi.py"
H200 = {
    "index": "0", "name": "NVIDIA H200", "uuid": "GPU-ec9f915a-f1aa-9f2e-7716-91cf0b3784e8",
    "driver_version": "580.159.04", "memory.total": "143771 MiB", "clocks.max.sm": "1980 MHz",
    "clocks.max.mem": "3201 MHz", "ecc.mode.current": "Enabled", "pci.bus_id": "00000000:18:00.0",
    "vbios_version": "96.00.99.00.01", "persistence_mode": "Enabled", "power.limit": "700.00 W",
    "power.default_limit": "700.00 W", "clocks.applications.graphics": "1980 MHz",
    "clocks.applications.memory": "3201 MHz", "pcie.link.gen.current": "5", "pcie.link.gen.max": "5",
    "pcie.link.width.current": "16", "pcie.link.width.max": "16", "mig.mode.current": "Disabled",
    "ecc.errors.uncorrected.volatile.total": "0", "ecc.errors.uncorrected.aggregate.total": "0",
    "retired_pages.pending": "No", "clocks_event_reasons.active": "0x0000000000000000",
}  # fmt: skip
# one -lms sample as `--format=csv,noheader,nounits` prints it: a busy GPU at full clocks
BUSY = {"clocks.sm": "1980", "clocks.mem": "3201", "power.draw": "612.40", "power.limit": "700.00",
        "temperature.gpu": "54", "utilization.gpu": "100", "utilization.memory": "71",
        "clocks.max.sm": "1980"}  # fmt: skip
POWER_CAP = {**BUSY, "clocks.sm": "1755", "power.draw": "699.80", "clocks_event_reasons.active": "0x0000000000000004"}


def fake_host(bed: SshdBed, tmp_path: Path, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """An sshd host whose `python:` runs with PATH = a fake nvidia-smi (configured by ``config``) + /usr/bin:/bin."""
    h = bed.add(name)
    # one GPU UUID per fake host: GPU leases are node-local, and every fake host is this one machine
    config = {**config, "gpus": [{**g, "uuid": f"GPU-fake-{name}-{i}"} for i, g in enumerate(config["gpus"])]}
    bin_dir = tmp_path / f"{name}-bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!{sys.executable}\n" + FAKE.read_text())
    exe.chmod(0o755)
    (bin_dir / "nvidia-smi.json").write_text(json.dumps(config))
    python = peers.python_wrapper(tmp_path / f"{name}-python", path_dirs=[bin_dir, Path("/usr/bin"), Path("/bin")])
    return {"address": h.address, "port": h.port, "python": python}


def orch_for(tmp_path: Path, groups: dict[str, dict[str, dict[str, Any]]]) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"groups": {g: {"hosts": hosts} for g, hosts in groups.items()}}, sort_keys=False))
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


@pytest.fixture
def fleet4(sshd_bed: SshdBed, tmp_path: Path) -> Orch:
    """ct200: four H200 hosts; fl-3 runs an older driver, fl-4 has two uncorrectable ECC errors."""
    hosts = {
        "fl-1": fake_host(sshd_bed, tmp_path, "fl-1", {"gpus": [H200]}),
        "fl-2": fake_host(sshd_bed, tmp_path, "fl-2", {"gpus": [H200]}),
        "fl-3": fake_host(sshd_bed, tmp_path, "fl-3", {"gpus": [{**H200, "driver_version": "570.86.15"}]}),
        "fl-4": fake_host(sshd_bed, tmp_path, "fl-4",
                          {"gpus": [{**H200, "ecc.errors.uncorrected.aggregate.total": "2"}]}),
    }  # fmt: skip
    return orch_for(tmp_path, {"ct200": hosts})


def test_fleet_flags_the_driver_and_the_ecc_errors(fleet4: Orch) -> None:
    res = fleet4("fleet", "--hosts", "ct200", "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert [(d["host"], d["field"], d["value"], d["majority"]) for d in doc["differences"]] == [
        ("fl-3", "driver", "570.86.15", "580.159.04"),
        ("fl-4", "ecc_uncorrected_aggregate", "2", "0"),
    ]
    (group,) = doc["groups"]
    fields = {f["field"]: f for f in group["fields"]}
    assert fields["gpu_name"]["majority"] == "NVIDIA H200" and fields["gpu_count"]["majority"] == "1"
    assert fields["power_limit"]["majority"] == "700 W (700 W)"
    assert fields["pcie"]["majority"] == "gen5 x16 (gen5 x16)"
    assert fields["driver"]["differs"] == {"fl-3": "570.86.15"}
    table = fleet4("fleet", "--hosts", "ct200", timeout=300)
    assert "fl-3: 570.86.15" in table.stdout and "fl-4: 2" in table.stdout, table.stdout


def test_require_uniform_refuses_then_allow_drift_lets_the_driver_through(fleet4: Orch) -> None:
    run = ("run", "noop", "--hosts", "fl-1,fl-2,fl-3", "--set", "ms=1", "--repeat", "1")
    refused = fleet4(*run, "--require-uniform", timeout=300)
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "refusing to start: 1 fleet difference(s) in fields that matter" in refused.stderr
    assert "ct200/fl-3: driver = 570.86.15 (group majority: 580.159.04)" in refused.stderr
    assert "--allow-drift FIELD" in refused.stderr and "Traceback" not in refused.stderr
    store = Store.from_url(fleet4.db_url)
    assert store.list_runs(limit=5).total == 0  # refused before any run was recorded
    doc = fleet4.json(*run, "--require-uniform", "--allow-drift", "driver", timeout=300)
    assert doc["status"] == "completed", doc
    fleet = store.get_run(doc["run_id"]).info["fleet"]  # every run keeps the fleet view it started with
    assert [(d["host"], d["field"]) for d in fleet["differences"]] == [("fl-3", "driver")]
    assert fleet["hosts"]["fl-1"]["driver"] == "580.159.04"
    bad = fleet4(*run, "--require-uniform", "--allow-drift", "drivr", timeout=300)
    assert bad.returncode == 2 and "no fleet field 'drivr'" in bad.stderr


def test_require_uniform_per_group_in_the_inventory(fleet4: Orch) -> None:
    doc = yaml.safe_load(fleet4.inventory.read_text())
    doc["groups"]["ct200"]["vars"] = {"require_uniform": True}
    fleet4.inventory.write_text(yaml.safe_dump(doc))
    refused = fleet4("run", "noop", "--hosts", "fl-1,fl-4", "--set", "ms=1", "--repeat", "1", timeout=300)
    assert refused.returncode == 1
    assert "ct200/fl-4: ecc_uncorrected_aggregate = 2 (must be 0)" in refused.stderr


def test_telemetry_marks_a_power_capped_case_and_a_shared_gpu(sshd_bed: SshdBed, tmp_path: Path) -> None:
    other = {"pid": 999999, "process_name": "python3", "used_memory": 81000, "gpu_uuid": "GPU-fake-shared-0"}
    orch = orch_for(tmp_path, {"tel": {
        "capped": fake_host(sshd_bed, tmp_path, "capped", {"gpus": [H200], "telemetry": [POWER_CAP, BUSY]}),
        "shared": fake_host(sshd_bed, tmp_path, "shared", {"gpus": [H200], "telemetry": [BUSY], "apps": [other]}),
    }})  # fmt: skip
    # each case sleeps 3 x 1.5 s: time for the fake nvidia-smi to start and print (its first sample is capped)
    doc = orch.json("run", "noop", "--hosts", "tel", "--set", "ms=1500", "--repeat", "3", "--telemetry-ms", "50",
                    timeout=300)  # fmt: skip
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    rows = {r.host: r for r in store.results(doc["run_id"], limit=10).items}
    capped, shared = rows["capped"].info, rows["shared"].info
    tel = capped["telemetry"]
    assert tel["samples"] >= 1 and tel["error"] is None, tel
    assert tel["reasons"]["sw_power_cap"] >= 1 and tel["throttle_samples"] == tel["reasons"]["sw_power_cap"]
    assert tel["fields"]["power.draw"]["max"] == 699.8 and tel["fields"]["clocks.sm"]["min"] == 1755
    assert capped["throttled"] is True and capped["shared_gpu"] is False
    assert capped["throttle_reason"].startswith("power cap in ")
    assert shared["throttled"] is False and shared["shared_gpu"] is True
    assert shared["throttle_reason"] == "shared GPU with pid 999999 (python3)"
    assert shared["telemetry"]["other_processes"][0]["used_memory_mib"] == 81000
    show = orch("runs", "show", doc["run_id"], timeout=120)
    assert "GPU telemetry: 2 of 2 cases throttled or sharing the GPU" in show.stdout, show.stdout
    assert "throttled capped" in show.stdout and "shared GPU shared" in show.stdout
    again = orch.json("run", "noop", "--hosts", "capped", "--set", "ms=1500", "--repeat", "3", timeout=300)
    cmp = orch("runs", "compare", doc["run_id"], again["run_id"], timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    assert f"base {doc['run_id']}: 1 compared case ran on a throttled or shared GPU" in cmp.stdout, cmp.stdout
    assert f"head {again['run_id']}: 1 compared case ran on a throttled or shared GPU" in cmp.stdout
    cmp_json = json.loads(orch("runs", "compare", doc["run_id"], again["run_id"], "--json", timeout=120).stdout)
    assert [f["host"] for f in cmp_json["flagged_cases"][doc["run_id"]]] == ["capped", "shared"]


def test_no_nvidia_smi_means_no_verdict(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("cpu-only")
    empty = tmp_path / "nobin"
    empty.mkdir()
    python = peers.python_wrapper(tmp_path / "py", path_dirs=[empty, Path("/usr/bin"), Path("/bin")])
    assert shutil.which("nvidia-smi", path=f"{empty}:/usr/bin:/bin") is None
    orch = orch_for(tmp_path, {"cpu": {"cpu-only": {"address": h.address, "port": h.port, "python": python}}})
    doc = orch.json("run", "noop", "--hosts", "cpu", "--set", "ms=1", "--repeat", "1", timeout=300)
    (r,) = Store.from_url(orch.db_url).results(doc["run_id"], limit=10).items
    assert r.info["throttled"] is None and r.info["telemetry"]["error"] == "nvidia-smi not found: no GPU telemetry"
    assert r.info["telemetry"]["cpu"]["loadavg_start"] is not None
