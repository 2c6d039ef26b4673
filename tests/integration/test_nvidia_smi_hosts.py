"""nvidia-smi as it really prints, through doctor's real path: a local host and a real sshd host whose PATH holds a
fake ``nvidia-smi`` replaying recorded output (tests/fixtures/nvidia-smi) with a chosen exit status."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from orchestrator.doctor import DoctorOptions, run_doctor
from orchestrator.inventory import parse_inventory
from tests.integration import peers
from tests.integration.peers import doctor_one, entry
from tests.plugins.sshd import SshdBed

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
WARNING = "WARNING: infoROM is corrupted at gpu 0000:0B:00.0"


def fake_smi_python(tmp_path: Path, stdout: Path, *, rc: int, stderr: str = "") -> str:
    """A ``python:`` wrapper whose PATH holds only an nvidia-smi that prints ``stdout`` (and ``stderr``) and exits
    with ``rc``."""
    bin_dir = tmp_path / "smi-bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    err = f"printf '%s\\n' {shlex.quote(stderr)} >&2\n" if stderr else ""
    exe.write_text(f"#!/bin/sh\n/bin/cat {shlex.quote(str(stdout))}\n{err}exit {rc}\n")
    exe.chmod(0o755)
    return peers.python_wrapper(tmp_path / "py-smi", path_dirs=[bin_dir])


async def test_local_host_warning_on_stdout_exit_0_is_a_gpus_warning_not_an_internal_error(tmp_path: Path) -> None:
    python = fake_smi_python(tmp_path, SMI / "h200x8_inforom_warning.csv", rc=0)
    text = f"groups:\n  here:\n    hosts:\n      box: {{connection: local, python: {python}}}\n"
    report = await run_doctor(parse_inventory(text), None, DoctorOptions(timeout_s=30))
    (h,) = report.hosts
    by_name = {c.name: c for c in h.checks}
    assert [by_name[n].status for n in ("dns", "tcp", "banner", "hostkey", "auth")] == ["skipped"] * 5
    gpus = by_name["gpus"]
    assert gpus.status == "warn", gpus.detail
    assert gpus.data["count"] == 8
    assert gpus.detail.endswith(f"; nvidia-smi: {WARNING}")


@pytest.mark.sshd
async def test_sshd_host_exit_14_with_rows_keeps_the_gpus(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("smi-14")
    python = fake_smi_python(tmp_path, SMI / "h200x8_inforom_warning.csv", rc=14)
    r = await doctor_one("smi-14", entry(h), python=python, timeout_s=30)
    gpus = r.check("gpus")
    assert gpus.status == "warn", gpus.detail
    assert gpus.data["count"] == 8 and gpus.data["exit_status"] == 14
    assert gpus.data["warnings"] == [WARNING]
    # the GPUs count everywhere facts are read: CPU torch beside 8 listed GPUs is the python check's failure
    assert r.check("python").detail.endswith("does not see CUDA although nvidia-smi lists 8 GPU(s)")


@pytest.mark.sshd
async def test_sshd_host_multi_line_error_without_rows_fails_with_the_whole_text(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    h = sshd_bed.add("smi-fail")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    stderr = (SMI / "nvml_mismatch.txt").read_text().strip()
    python = fake_smi_python(tmp_path, empty, rc=255, stderr=stderr)
    r = await doctor_one("smi-fail", entry(h), python=python, timeout_s=30)
    gpus = r.check("gpus")
    assert gpus.status == "fail"
    assert gpus.detail == (
        "nvidia-smi failed (exit 255): Failed to initialize NVML: Driver/library version mismatch; "
        "NVML library version: 580.159"
    )
    assert not r.ok
