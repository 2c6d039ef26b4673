"""nvidia-smi CSV numbers as they really print (found by a tester on main): a repeated header line, a first line
that is no header, quantities in other units (``1e3 MiB``, ``"143,771 MiB"``, ``140 GiB``, ``150755 MB``,
``1.98 GHz``, ``700000 mW``) and units orch does not know — in the orchestrator's parser (``facts.py``, the one
parser of the facts CSV), what doctor, the stored provenance and the fleet view make of it, and the agent's
lease code, which reads only the UUID column of the same text.

Fixtures (tests/fixtures/nvidia-smi/, see its README): ``h200x8_repeated_header.csv``, ``h200x8_retry_first.csv``,
``h200x4_unit_variants.csv``, ``h200x1_fleet_mw.csv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import leases, sysinfo
from orchestrator.doctor import gpus_check
from orchestrator.facts import host_facts_summary, parse_nvidia_smi, quantity, read_nvidia_smi
from orchestrator.fleet import host_values

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
EIGHT = (SMI / "h200x8_header.csv").read_text()
HEADER = EIGHT.splitlines()[0]


def _facts(stdout: str, rc: int | None = 0) -> dict[str, Any]:
    return {"nvidia_smi": {"found": True, "rc": rc, "stdout": stdout, "stderr": ""}}


def test_a_repeated_header_is_skipped_with_a_warning_not_a_gpu_named_name() -> None:
    text = (SMI / "h200x8_repeated_header.csv").read_text()
    table = parse_nvidia_smi(text)
    assert [g.name for g in table.gpus] == ["NVIDIA H200"] * 8
    assert [g.index for g in table.gpus] == list(range(8))
    assert table.gpus == parse_nvidia_smi(EIGHT).gpus
    assert table.other_lines == [f"{HEADER} (a repeated header line, skipped)"]
    reading = read_nvidia_smi(_facts(text))
    assert len(reading.gpus) == 8 and reading.warnings == table.other_lines
    c = gpus_check(_facts(text))
    assert c.status == "warn" and c.detail.startswith("8x NVIDIA H200"), c.detail
    assert host_facts_summary(_facts(text))["gpu_count"] == 8


def test_a_first_line_that_is_no_header_keeps_every_gpu() -> None:
    text = (SMI / "h200x8_retry_first.csv").read_text()
    table = parse_nvidia_smi(text)
    assert len(table.gpus) == 8 and table.gpus == parse_nvidia_smi(EIGHT).gpus
    assert table.other_lines == ["failed, retrying"]
    summary = host_facts_summary(_facts(text))
    assert summary["gpu_count"] == 8 and summary["nvidia_smi_warnings"] == ["failed, retrying"]
    assert summary["gpu_uuids"][0] == "GPU-ec9f915a-f1aa-9f2e-7716-91cf0b3784e8"


def test_units_are_converted_to_mib_and_mhz() -> None:
    table = parse_nvidia_smi((SMI / "h200x4_unit_variants.csv").read_text())
    assert [g.memory_mib for g in table.gpus] == [1000, 143771, 143360, 143771]
    assert [g.clock_max_sm_mhz for g in table.gpus] == [1980, 1980, 1980, 1980]
    assert [r["memory.total"] for r in table.rows] == ["1000 MiB", "143771 MiB", "143360 MiB", "143771.1716 MiB"]
    assert table.other_lines == []


def test_milliwatts_are_watts_in_the_fleet_view() -> None:
    text = (SMI / "h200x1_fleet_mw.csv").read_text()
    assert "700000 mW, 700000 mW" in text
    v = host_values(_facts(text))
    assert v["power_limit"] == "700 W (700 W)"
    assert v == host_values(_facts((SMI / "h200x1_fleet.csv").read_text()))  # the same GPU in W


@pytest.mark.parametrize(
    ("value", "header_unit", "expected"),
    [
        ("143771 MiB", None, (143771.0, "MiB")),
        ("143771", "MiB", (143771.0, "MiB")),  # --format=csv,nounits: the header's unit
        ("1e3 MiB", None, (1000.0, "MiB")),
        ("143,771 MiB", None, (143771.0, "MiB")),
        ("140 GiB", None, (143360.0, "MiB")),
        ("1 GB", None, (1e9 / 2**20, "MiB")),
        ("700000 mW", None, (700.0, "W")),
        ("700.00 W", None, (700.0, "W")),
        ("1.98 GHz", None, (1980.0, "MHz")),
        ("1980 MHz", "GHz", (1980.0, "MHz")),  # the value's own unit wins over the header's
        ("[N/A]", "MiB", None),
        ("[Not Supported]", "MHz", None),
        ("N/A", None, None),
        ("Enabled", None, None),
        ("96.00.A5.00.1A", None, None),
    ],
)
def test_quantity(value: str, header_unit: str | None, expected: tuple[float, str] | None) -> None:
    got = quantity(value, header_unit)
    assert got == (pytest.approx(expected[0]), expected[1]) if expected is not None else got is None


def test_an_unknown_unit_is_refused_loudly() -> None:
    with pytest.raises(ValueError, match=r"unknown unit 'pages' in '143771 pages' \(orch reads KiB, MiB, GiB"):
        quantity("143771 pages")
    text = HEADER + "\nNVIDIA H200, GPU-1, 580.159.04, 143771 pages, 1980 MHz, 3201 MHz, Enabled, 00000000:18:00.0\n"
    table = parse_nvidia_smi(text)
    (g,) = table.gpus
    assert g.memory_mib is None and g.clock_max_sm_mhz == 1980 and g.name == "NVIDIA H200"
    (warning,) = table.other_lines
    assert warning.endswith("(memory.total: unknown unit 'pages' in '143771 pages' (orch reads KiB, MiB, GiB, TiB, "
                            "kB, MB, GB, TB, mW, W, kW, kHz, MHz, GHz, %, C); the value is left out)")  # fmt: skip
    c = gpus_check(_facts(text))
    assert c.status == "warn" and "unknown unit 'pages'" in c.detail, c.detail


def test_a_quantity_that_is_no_number_is_a_warning() -> None:
    text = HEADER + "\nNVIDIA H200, GPU-1, 580.159.04, lots, 1980 MHz, 3201 MHz, Enabled, 00000000:18:00.0\n"
    table = parse_nvidia_smi(text)
    assert table.gpus[0].memory_mib is None
    assert table.other_lines == [text.splitlines()[1] + " (memory.total: 'lots' is not a quantity; the value is left "
                                 "out)"]  # fmt: skip


def test_noheader_nounits_with_fields_takes_nvidia_smi_units() -> None:
    table = parse_nvidia_smi("NVIDIA H200, GPU-1, 143771, 1980\n", fields=("name", "uuid", "memory.total",
                                                                          "clocks.max.sm"))  # fmt: skip
    assert (table.gpus[0].memory_mib, table.gpus[0].clock_max_sm_mhz) == (143771, 1980)


@pytest.mark.parametrize("name", ["h200x8_repeated_header.csv", "h200x8_retry_first.csv"])
def test_the_agents_lease_code_reads_the_same_uuids(name: str) -> None:
    text = (SMI / name).read_text()
    expected = sorted(g.uuid for g in parse_nvidia_smi(EIGHT).gpus if g.uuid)
    assert leases.gpu_uuids({"nvidia_smi": {"stdout": text}}) == expected


def test_the_agents_fallback_query_is_not_fooled_by_a_line_that_is_no_row() -> None:
    assert not sysinfo._has_row("failed, retrying\n" + HEADER + "\n")
    assert not sysinfo._has_row(HEADER + "\n" + HEADER + "\n")
    assert sysinfo._has_row(EIGHT)
    assert sysinfo._has_row((SMI / "h200x4_unit_variants.csv").read_text())  # a quoted "143,771 MiB"


def test_the_header_must_be_the_query_sysinfo_ran() -> None:
    """sysinfo says which query ran (``fleet``/``base``, both starting with NVIDIA_SMI_FIELDS): a table of other
    fields (here a telemetry-like query) is not read as this one's GPUs."""
    other = "index, uuid, power.draw [W]\n0, GPU-1, 120.5 W\n"
    facts = {"nvidia_smi": {"found": True, "rc": 0, "stdout": other, "stderr": "", "query": "fleet"}}
    reading = read_nvidia_smi(facts)
    assert reading.gpus == [] and reading.warnings == other.strip().splitlines()
    fleet = (SMI / "h200x1_fleet.csv").read_text()
    facts["nvidia_smi"]["stdout"] = fleet  # the real fleet query: clocks.max.memory for clocks.max.mem
    assert [g.name for g in read_nvidia_smi(facts).gpus] == ["NVIDIA H200"]
    facts["nvidia_smi"]["query"] = "base"
    facts["nvidia_smi"]["stdout"] = EIGHT
    assert len(read_nvidia_smi(facts).gpus) == 8
    assert len(parse_nvidia_smi(other).gpus) == 1  # without a query named, any GPU table is read
