"""orchestrator.fleet: one host's fleet values from its facts, the per-group majority, health flags, the gate."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.fleet import FIELD_KEYS, describe, fleet_view, gate, host_values

COLUMNS = ("name", "uuid", "driver_version", "memory.total [MiB]", "clocks.max.sm [MHz]", "clocks.max.memory [MHz]",
           "ecc.mode.current", "pci.bus_id", "vbios_version", "persistence_mode", "power.limit [W]",
           "power.default_limit [W]", "clocks.applications.graphics [MHz]", "clocks.applications.memory [MHz]",
           "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max",
           "mig.mode.current", "ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.aggregate.total",
           "retired_pages.pending")  # fmt: skip
ROW = ["NVIDIA H200", "GPU-0", "580.159.04", "143771 MiB", "1980 MHz", "3201 MHz", "Enabled", "00000000:18:00.0",
       "96.00.99.00.01", "Enabled", "700.00 W", "700.00 W", "1980 MHz", "3201 MHz", "5", "5", "16", "16",
       "Disabled", "0", "0", "No"]  # fmt: skip
NVLINK = "GPU 0: NVIDIA H200 (UUID: GPU-0)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n\t Link 2: <inactive>\n"


def facts(*rows: list[str], **more: Any) -> dict[str, Any]:
    csv = ", ".join(COLUMNS) + "\n" + "\n".join(", ".join(r) for r in rows) + "\n"
    doc: dict[str, Any] = {
        "nvidia_smi": {"found": True, "rc": 0, "stdout": csv, "stderr": ""},
        "torch": {"version": "2.11.0+cu130", "cuda_version": "13.0", "nccl_version": "2.27.7"},
        "fleet": {"nvlink": {"rc": 0, "stdout": NVLINK}, "xid": {"readable": True, "count": 0},
                  "cpu_governors": {"performance": 16},
                  "remapped_rows": {"rc": 0, "stdout": "gpu_uuid, remapped_rows.pending, remapped_rows.failure\n"
                                                      "GPU-0, No, No\n"}},
    }  # fmt: skip
    doc.update(more)
    return doc


def with_(**changes: str) -> list[str]:
    row = list(ROW)
    for col, value in changes.items():
        row[[c.split(" [")[0] for c in COLUMNS].index(col.replace("__", "."))] = value
    return row


def test_host_values_of_an_h200() -> None:
    v = host_values(facts(ROW))
    assert set(v) == set(FIELD_KEYS)
    assert v == {
        "gpu_name": "NVIDIA H200", "gpu_count": "1", "gpu_memory": "143771 MiB", "driver": "580.159.04",
        "cuda": "13.0", "torch": "2.11.0+cu130", "nccl": "2.27.7", "vbios": "96.00.99.00.01", "ecc_mode": "Enabled",
        "ecc_uncorrected_volatile": "0", "ecc_uncorrected_aggregate": "0", "retired_pages_pending": "No",
        "remapped_rows_pending": "No", "persistence_mode": "Enabled", "power_limit": "700 W (700 W)",
        "app_clocks": "1980/3201", "max_clocks": "1980/3201", "pcie": "gen5 x16 (gen5 x16)", "mig_mode": "Disabled",
        "nvlink": "2 active links/GPU", "xid": "0", "cpu_governor": "performance",
    }  # fmt: skip


def test_a_host_whose_gpus_disagree_is_mixed_and_unknowns_say_so() -> None:
    v = host_values(facts(ROW, with_(vbios_version="96.00.AA.00.01", **{"power.limit": "[N/A]"})))
    assert v["vbios"] == "mixed: 96.00.99.00.01, 96.00.AA.00.01"
    assert v["power_limit"] == "mixed: 700 W (700 W), unknown"
    assert host_values({})["driver"] == "none" and host_values({})["cuda"] == "unknown"
    assert host_values({"fleet": {"xid": {"readable": False}}})["xid"] == "not readable"


def test_majority_and_health_flags() -> None:
    view = fleet_view([
        ("a", "g", facts(ROW)), ("b", "g", facts(ROW)),
        ("c", "g", facts(with_(driver_version="570.86.15"))),
        ("d", "g", facts(with_(**{"ecc.errors.uncorrected.volatile.total": "3"}))),
        ("x", "other", facts(with_(driver_version="570.86.15"))),
    ], [("gone", "g", "tcp: refused")])  # fmt: skip
    assert [(d.host, d.field, d.value, d.majority) for d in view.differences] == [
        ("c", "driver", "570.86.15", "580.159.04"),
        ("d", "ecc_uncorrected_volatile", "3", "0"),
    ]
    assert view.groups[0].unreachable == {"gone": "tcp: refused"}
    assert describe(view.differences) == [
        "g/c: driver = 570.86.15 (group majority: 580.159.04)",
        "g/d: ecc_uncorrected_volatile = 3 (must be 0)",
    ]
    assert view.to_dict()["groups"][1]["fields"][3] == {
        "field": "driver", "label": "driver", "health": False, "majority": "570.86.15", "differs": {}}


def test_health_fields_flag_even_when_every_host_is_bad() -> None:
    bad = facts(ROW, fleet={"xid": {"readable": True, "count": 2}})
    view = fleet_view([("a", "g", bad), ("b", "g", bad)])
    assert [(d.host, d.field) for d in view.differences] == [("a", "xid"), ("b", "xid")]


def test_gate_allows_fields_and_limits_groups() -> None:
    mig = facts(with_(mig__mode__current="Enabled"))
    view = fleet_view([("a", "g", facts(ROW)), ("b", "g", facts(ROW)), ("c", "g", facts(with_(driver_version="1"))),
                       ("z", "h", facts(ROW)), ("y", "h", facts(ROW)), ("w", "h", mig)])  # fmt: skip
    assert [d.field for d in gate(view)] == ["driver", "mig_mode"]
    assert [d.field for d in gate(view, ["driver"])] == ["mig_mode"]
    assert [d.field for d in gate(view, (), ["g"])] == ["driver"]
    with pytest.raises(ValueError, match="no fleet field 'drivr'"):
        gate(view, ["drivr"])


def test_recorded_h200_fleet_query() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "h200x1_fleet.csv").read_text()
    v = host_values({"nvidia_smi": {"found": True, "rc": 0, "stdout": text, "stderr": ""},
                     "fleet": {"nvlink": {"rc": 0, "stdout": ""}, "cpu_governors": {}}})  # fmt: skip
    assert (v["vbios"], v["power_limit"], v["pcie"], v["mig_mode"]) == (
        "96.00.A5.00.1A", "700 W (700 W)", "gen5 x16 (gen5 x16)", "Disabled")
    assert (v["retired_pages_pending"], v["nvlink"], v["cpu_governor"]) == ("unknown", "none", "unknown")


def test_a_host_without_gpus_invents_no_health_value() -> None:
    """The finding: on a CPU-only host `orch fleet` showed uncorrectable ECC 0, retired pages pending No,
    remapped rows pending No and Xid 0 while every other GPU field said none."""
    from orchestrator.fleet import FIELD_KEYS

    no_smi = {"fleet": {"xid": {"readable": True, "count": 0}, "remapped_rows": {"rc": 0, "stdout": ""}}}
    listed_none = {**no_smi, "nvidia_smi": {"found": True, "rc": 0, "stdout": "", "stderr": ""}}
    for f in (no_smi, listed_none):
        v = host_values(f)
        gpu_fields = {k: v[k] for k in FIELD_KEYS if k not in ("gpu_count", "cuda", "torch", "nccl", "cpu_governor")}
        assert set(gpu_fields.values()) == {"none"}, gpu_fields
        assert v["gpu_count"] == "0"
    failed = {"nvidia_smi": {"found": True, "rc": 9, "stdout": "", "stderr": "NVIDIA-SMI has failed"},
              "fleet": {"xid": {"readable": True, "count": 0}}}  # fmt: skip
    v = host_values(failed)
    assert (v["ecc_uncorrected_volatile"], v["retired_pages_pending"], v["xid"], v["gpu_count"]) == (
        "unknown", "unknown", "unknown", "unknown")  # fmt: skip
    # Xid lines with no GPU listed (one fallen off the bus) are real: shown, and flagged
    v = host_values({**failed, "fleet": {"xid": {"readable": True, "count": 2}}})
    assert v["xid"] == "2"
    view = fleet_view([("a", "g", {**failed, "fleet": {"xid": {"readable": True, "count": 2}}}), ("b", "g", no_smi)])
    assert [(d.host, d.field, d.value) for d in view.differences if d.field == "xid"] == [("a", "xid", "2")]
    assert fleet_view([("b", "g", no_smi), ("c", "g", no_smi)]).differences == []
