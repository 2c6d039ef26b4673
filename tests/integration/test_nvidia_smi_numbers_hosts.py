"""nvidia-smi numbers through doctor's real path on a real sshd host: the agent's sysinfo runs a fake
``nvidia-smi`` replaying a fixture (tests/fixtures/nvidia-smi), the orchestrator parses what came back.
A repeated header is no GPU named "name", a first line that is no header drops no GPU, GiB are not MiB."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.peers import doctor_one, entry
from tests.integration.test_nvidia_smi_hosts import SMI, fake_smi_python
from tests.plugins.sshd import SshdBed

HEADER = (SMI / "h200x8_header.csv").read_text().splitlines()[0]


@pytest.mark.sshd
@pytest.mark.parametrize(
    ("fixture", "warnings"),
    [
        ("h200x8_repeated_header.csv", [f"{HEADER} (a repeated header line, skipped)"]),
        ("h200x8_retry_first.csv", ["failed, retrying"]),
    ],
)
async def test_sshd_host_keeps_its_eight_gpus(
    sshd_bed: SshdBed, tmp_path: Path, fixture: str, warnings: list[str]
) -> None:
    name = "smi-" + fixture.split("_")[1].replace(".csv", "")
    h = sshd_bed.add(name)
    python = fake_smi_python(tmp_path, SMI / fixture, rc=0)
    r = await doctor_one(name, entry(h), python=python, timeout_s=60)
    gpus = r.check("gpus")
    assert gpus.status == "warn", gpus.detail
    assert gpus.data["count"] == 8 and gpus.data["warnings"] == warnings
    assert {g["name"] for g in gpus.data["gpus"]} == {"NVIDIA H200"}
    assert [g["memory_mib"] for g in gpus.data["gpus"]] == [143771] * 8
    assert gpus.detail.startswith("8x NVIDIA H200, 143771 MiB each, driver 580.159.04; nvidia-smi: "), gpus.detail


@pytest.mark.sshd
async def test_sshd_host_units_are_converted(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("smi-units")
    python = fake_smi_python(tmp_path, SMI / "h200x4_unit_variants.csv", rc=0)
    r = await doctor_one("smi-units", entry(h), python=python, timeout_s=60)
    gpus = r.check("gpus")
    assert gpus.status == "ok", gpus.detail
    assert [g["memory_mib"] for g in gpus.data["gpus"]] == [1000, 143771, 143360, 143771]
    assert [g["clock_max_sm_mhz"] for g in gpus.data["gpus"]] == [1980] * 4
