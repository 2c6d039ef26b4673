"""orchestrator.facts parsers and doctor's pure gpus/disk checks, on nvidia-smi output recorded on an H200."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.doctor import disk_check, gpus_check
from orchestrator.facts import (
    GpuInfo,
    gpus_from_facts,
    host_facts_summary,
    parse_nvidia_smi,
    parse_nvidia_smi_csv,
    read_nvidia_smi,
)

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
ISSUE_FIELDS = ("name", "uuid", "driver_version", "memory.total", "clocks.max.mem")


def _facts(stdout: str, *, found: bool = True, rc: int | None = 0, stderr: str = "") -> dict[str, Any]:
    return {"nvidia_smi": {"found": found, "rc": rc, "stdout": stdout, "stderr": stderr}}


def test_the_h200_line_from_the_issue_noheader() -> None:
    gpus = parse_nvidia_smi_csv((SMI / "h200_noheader.csv").read_text(), fields=ISSUE_FIELDS)
    assert gpus == [
        GpuInfo(
            index=0,
            name="NVIDIA H200",
            uuid="GPU-ec9f915a-f1aa-9f2e-7716-91cf0b3784e8",
            driver_version="580.159.04",
            memory_mib=143771,
            clock_max_sm_mhz=None,
            clock_max_mem_mhz=3201,
        )
    ]


def test_clocks_max_memory_alias_in_fields() -> None:
    fields = ("name", "uuid", "driver_version", "memory.total", "clocks.max.memory")
    gpus = parse_nvidia_smi_csv((SMI / "h200_noheader.csv").read_text(), fields=fields)
    assert gpus[0].clock_max_mem_mhz == 3201


def test_recorded_h200_with_header() -> None:
    text = (SMI / "h200x1_header.csv").read_text()
    assert text.splitlines()[0] == (
        "name, uuid, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.memory [MHz], "
        "ecc.mode.current, pci.bus_id"
    )
    (g,) = parse_nvidia_smi_csv(text)
    assert g == GpuInfo(0, "NVIDIA H200", "GPU-5ec90601-772b-3f3e-4a44-5cc5a77333dc", "580.159.04", 143771, 1980,
                        3201, "Enabled", "00000000:00:06.0")  # fmt: skip


def test_recorded_h200_nounits_parses_the_same() -> None:
    with_units = parse_nvidia_smi_csv((SMI / "h200x1_header.csv").read_text())
    assert parse_nvidia_smi_csv((SMI / "h200x1_nounits.csv").read_text()) == with_units


def test_eight_gpus_with_na_values() -> None:
    gpus = parse_nvidia_smi_csv((SMI / "h200x8_header.csv").read_text())
    assert [g.index for g in gpus] == list(range(8))
    assert {g.name for g in gpus} == {"NVIDIA H200"}
    assert len({g.uuid for g in gpus}) == 8
    assert gpus[0].uuid == "GPU-ec9f915a-f1aa-9f2e-7716-91cf0b3784e8"
    assert all(g.memory_mib == 143771 and g.driver_version == "580.159.04" for g in gpus)
    assert gpus[5].ecc is None and gpus[4].ecc == "Enabled"  # [N/A]
    assert gpus[7].clock_max_sm_mhz is None and gpus[6].clock_max_sm_mhz == 1980  # [N/A]
    assert gpus[7].clock_max_mem_mhz == 3201
    assert [g.pci_bus_id for g in gpus][:2] == ["00000000:18:00.0", "00000000:2A:00.0"]


@pytest.mark.parametrize("value", ["[N/A]", "N/A", "[Not Supported]", "Not Supported", ""])
def test_unavailable_values_become_none(value: str) -> None:
    text = f"name, memory.total [MiB], ecc.mode.current\nNVIDIA H200, {value}, {value}\n"
    (g,) = parse_nvidia_smi_csv(text)
    assert (g.memory_mib, g.ecc) == (None, None)


def test_a_row_with_the_wrong_column_count_is_a_warning_line_not_an_error() -> None:
    text = (SMI / "h200x8_header.csv").read_text().splitlines()
    cut = text[3].rsplit(",", 1)[0]  # drop the bus id of the third GPU
    text[3] = cut
    table = parse_nvidia_smi("\n".join(text))
    assert [g.pci_bus_id for g in table.gpus][:2] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert len(table.gpus) == 7 and table.other_lines == [cut]


def test_empty_output_is_no_gpu() -> None:
    assert parse_nvidia_smi_csv("") == []
    assert parse_nvidia_smi_csv("\n\n") == []


def test_gpus_from_facts_keeps_rows_whatever_the_exit_status() -> None:
    text = (SMI / "h200x8_header.csv").read_text()
    assert len(gpus_from_facts(_facts(text))) == 8
    assert gpus_from_facts(_facts(text, found=False)) == []
    assert len(gpus_from_facts(_facts(text, rc=14))) == 8
    assert gpus_from_facts({}) == []


@pytest.mark.parametrize(
    "facts",
    [
        {"nvidia_smi": None},
        {"nvidia_smi": {"found": True, "rc": "x", "stdout": None, "stderr": 3}},
        {"nvidia_smi": {"found": True, "rc": 0, "stdout": "name, uuid\n\"unclosed, x\n,,,,\n\x00\n"}},
        {"nvidia_smi": []},
        {"torch": {"devices": ["x"]}, "python": "3.11"},
        [],
    ],
)
def test_facts_parsing_never_raises(facts: Any) -> None:
    assert isinstance(read_nvidia_smi(facts).gpus, list)
    assert host_facts_summary(facts)["gpu_count"] >= 0
    if isinstance(facts, dict):
        assert gpus_check(facts).status in ("ok", "warn", "fail")


def test_gpus_check_statuses() -> None:
    ok = gpus_check(_facts((SMI / "h200x8_header.csv").read_text()))
    assert (ok.status, ok.detail, ok.data["count"]) == ("ok", "8x NVIDIA H200, 143771 MiB each, driver 580.159.04", 8)
    missing = gpus_check(_facts("", found=False, rc=None, stderr="nvidia-smi not found on PATH"))
    assert (missing.status, missing.detail) == ("warn", "no GPU: nvidia-smi not found on the host")
    none = gpus_check(_facts("name, uuid\n"))
    assert (none.status, none.detail) == ("warn", "no GPU: nvidia-smi lists none")
    driver = gpus_check(
        _facts(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
            "the latest NVIDIA driver is installed and running.\n",
            rc=9,
        )
    )
    assert driver.status == "fail"
    assert driver.detail.startswith("nvidia-smi failed (exit 9): NVIDIA-SMI has failed because")
    assert "driver" in driver.data["hint"]
    garbled = gpus_check(_facts("name, uuid\nNVIDIA H200\n"))
    assert (garbled.status, garbled.detail) == ("warn", "no GPU: nvidia-smi lists none; it said: NVIDIA H200")


def test_infoROM_warning_with_exit_14_keeps_every_gpu_and_warns_next_to_them() -> None:
    text = (SMI / "h200x8_inforom_warning.csv").read_text()
    c = gpus_check(_facts(text, rc=14))
    assert c.status == "warn"
    assert c.detail == (
        "8x NVIDIA H200, 143771 MiB each, driver 580.159.04; nvidia-smi exit 14: "
        "WARNING: infoROM is corrupted at gpu 0000:0B:00.0"
    )
    assert c.data["count"] == 8 and c.data["exit_status"] == 14
    assert c.data["warnings"] == ["WARNING: infoROM is corrupted at gpu 0000:0B:00.0"]
    s = host_facts_summary(_facts(text, rc=14))
    assert s["gpu_count"] == 8 and len(set(s["gpu_uuids"])) == 8
    assert (s["nvidia_smi_exit"], s["nvidia_smi_warnings"]) == (14, c.data["warnings"])


def test_infoROM_warning_on_stdout_with_exit_0_is_a_warning_not_a_crash() -> None:
    c = gpus_check(_facts((SMI / "h200x8_inforom_warning.csv").read_text(), rc=0))
    assert c.status == "warn" and c.data["count"] == 8
    assert c.detail.endswith("; nvidia-smi: WARNING: infoROM is corrupted at gpu 0000:0B:00.0")


def test_warning_on_stderr_with_rows_is_a_warning() -> None:
    c = gpus_check(_facts((SMI / "h200x1_header.csv").read_text(), stderr="WARNING: something odd\n"))
    assert (c.status, c.data["count"], c.data["warnings"]) == ("warn", 1, ["WARNING: something odd"])


def test_a_multi_line_error_without_rows_fails_with_every_line() -> None:
    text = (SMI / "nvml_mismatch.txt").read_text()
    c = gpus_check(_facts(text, rc=255))
    assert c.status == "fail"
    assert c.detail == (
        "nvidia-smi failed (exit 255): Failed to initialize NVML: Driver/library version mismatch; "
        "NVML library version: 580.159"
    )
    assert c.data["error"] == text.strip()
    assert c.data["count"] is None  # not known: nvidia-smi failed, which is not "0 GPUs"
    stderr_only = gpus_check(_facts("", rc=255, stderr=text))
    assert stderr_only.detail == c.detail
    hung = gpus_check(_facts("", rc=None, stderr="nvidia-smi timed out after 30 s"))
    assert (hung.status, hung.detail) == ("fail", "nvidia-smi failed (did not finish): nvidia-smi timed out after 30 s")


def test_mig_and_vgpu_names_and_unsupported_values() -> None:
    gpus = parse_nvidia_smi_csv((SMI / "mig_vgpu.csv").read_text())
    assert [g.name for g in gpus] == ["NVIDIA A100-SXM4-80GB MIG 3g.40gb", "GRID A100-40C", "NVIDIA H100XM-80C"]
    assert (gpus[0].memory_mib, gpus[0].clock_max_sm_mhz, gpus[0].ecc) == (81920, 1410, "Enabled")
    assert (gpus[1].memory_mib, gpus[1].clock_max_sm_mhz, gpus[1].clock_max_mem_mhz, gpus[1].ecc) == (
        40960, None, None, None,
    )  # fmt: skip
    assert (gpus[2].driver_version, gpus[2].memory_mib, gpus[2].pci_bus_id) == (None, None, "00000000:03:00.0")
    c = gpus_check(_facts((SMI / "mig_vgpu.csv").read_text()))
    assert c.status == "ok" and c.detail.startswith("3x GRID A100-40C, NVIDIA A100-SXM4-80GB MIG 3g.40gb, ")


def test_lines_before_the_header_are_warnings() -> None:
    text = "WARNING: a line first\n" + (SMI / "h200x1_header.csv").read_text()
    table = parse_nvidia_smi(text)
    assert len(table.gpus) == 1 and table.other_lines == ["WARNING: a line first"]


def test_host_facts_summary_carries_provenance() -> None:
    facts = _facts((SMI / "h200x1_header.csv").read_text())
    facts["torch"] = {"version": "2.8.0+cu128", "cuda_version": "12.8", "cuda_available": True}
    s = host_facts_summary(facts)
    assert s["gpu_name"] == "NVIDIA H200"
    assert s["gpu_count"] == 1
    assert s["gpu_uuids"] == ["GPU-5ec90601-772b-3f3e-4a44-5cc5a77333dc"]
    assert (s["driver"], s["clocks_max_sm_mhz"], s["clocks_max_mem_mhz"], s["ecc"]) == (
        "580.159.04",
        1980,
        3201,
        "Enabled",
    )
    assert (s["torch"], s["cuda"]) == ("2.8.0+cu128", "12.8")


@pytest.mark.parametrize(
    ("free", "status", "shown"),
    # the last: df -B1 on the H200 box; 3 significant figures, so 0.5 GB is not rounded to "0.5" or 40 MB to "0.0"
    [(500 * 10**6, "fail", "0.500"), (40 * 10**6, "fail", "0.0400"), (10 * 10**9, "warn", "10.0"),
     (68_578_856_960, "ok", "68.6")],
)
def test_disk_check_thresholds(free: int, status: str, shown: str) -> None:
    c = disk_check({"disk": {"path": "/root/.orch", "free_bytes": free, "total_bytes": 270_553_174_016}})
    assert c.status == status
    assert c.detail.startswith(f"{shown} GB free at /root/.orch")
    assert c.data["free_bytes"] == free


def test_disk_check_unknown() -> None:
    assert disk_check({}).status == "warn"


@pytest.mark.parametrize("row", [",,,,", " , , , , ", "[N/A], [N/A], [N/A], [Not Supported], [N/A]"])
def test_a_row_without_any_value_is_no_gpu(row: str) -> None:
    """Regression (found by a tester): a fake nvidia-smi printing ``,,,`` was counted as one GPU."""
    real = "NVIDIA H200, GPU-1, 570.1, 143771 MiB, 3201 MHz"
    table = parse_nvidia_smi(f"{row}\n{real}\n{row}\n", fields=ISSUE_FIELDS)
    assert [g.name for g in table.gpus] == ["NVIDIA H200"] and table.gpus[0].index == 0
    assert table.other_lines == [row.strip(), row.strip()]
    reading = read_nvidia_smi(_facts(f"{', '.join(ISSUE_FIELDS)}\n{row}\n"))
    assert reading.gpus == [] and reading.warnings == [row.strip()]
