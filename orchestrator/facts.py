"""Parsers for remote facts — pure, tested on recorded output in tests/fixtures/.

The remote side (``agents/orch_agent/sysinfo.py``) returns raw command output; these turn it into values.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import asdict, dataclass
from typing import Any

#: The nvidia-smi query orch uses (sysinfo.py runs it with ``--format=csv``, header included).
NVIDIA_SMI_FIELDS = (
    "name",
    "uuid",
    "driver_version",
    "memory.total",
    "clocks.max.sm",
    "clocks.max.mem",
    "ecc.mode.current",
    "pci.bus_id",
)
_ALIASES = {
    "clocks.max.memory": "clocks.max.mem",
    "clocks.max.sm": "clocks.max.sm",
    "clocks.max.graphics": "clocks.max.sm",
}


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi reports it. Memory in MiB (nvidia-smi's unit), clocks in MHz."""

    index: int
    name: str
    uuid: str | None = None
    driver_version: str | None = None
    memory_mib: int | None = None
    clock_max_sm_mhz: int | None = None
    clock_max_mem_mhz: int | None = None
    ecc: str | None = None
    pci_bus_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _na(v: str) -> str | None:
    v = v.strip()
    return None if not v or v.startswith("[") or v in ("N/A", "Not Supported") else v


def _int_unit(v: str) -> int | None:
    s = _na(v)
    if s is None:
        return None
    m = re.match(r"^\s*(\d+)", s)
    return int(m.group(1)) if m else None


def _norm_header(h: str) -> str:
    key = re.sub(r"\s*\[.*\]\s*$", "", h.strip())
    return _ALIASES.get(key, key)


def parse_nvidia_smi_csv(text: str, fields: tuple[str, ...] | None = None) -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader]`` output.

    With ``fields`` None the first line is the header (``name, uuid, memory.total [MiB], ...``); otherwise the
    text has no header and ``fields`` names the columns. Values such as ``[N/A]`` become None.
    Raises ValueError when a line has the wrong number of columns.
    """
    rows = [r for r in csv.reader(io.StringIO(text.strip()), skipinitialspace=True) if r]
    if not rows:
        return []
    if fields is None:
        header = [_norm_header(h) for h in rows[0]]
        rows = rows[1:]
    else:
        header = [_ALIASES.get(f, f) for f in fields]
    gpus = []
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"nvidia-smi line {i + 1} has {len(row)} columns, expected {len(header)}: {row!r}")
        d = dict(zip(header, row, strict=True))
        gpus.append(
            GpuInfo(
                index=i,
                name=(_na(d.get("name", "")) or "unknown GPU"),
                uuid=_na(d.get("uuid", "")),
                driver_version=_na(d.get("driver_version", "")),
                memory_mib=_int_unit(d.get("memory.total", "")),
                clock_max_sm_mhz=_int_unit(d.get("clocks.max.sm", "")),
                clock_max_mem_mhz=_int_unit(d.get("clocks.max.mem", "")),
                ecc=_na(d.get("ecc.mode.current", "")),
                pci_bus_id=_na(d.get("pci.bus_id", "")),
            )
        )
    return gpus


def gpus_from_facts(facts: dict[str, Any]) -> list[GpuInfo]:
    """The GPUs in a sysinfo facts dict (empty when nvidia-smi is missing or failed)."""
    smi = facts.get("nvidia_smi") or {}
    if not smi.get("found") or smi.get("rc") != 0:
        return []
    return parse_nvidia_smi_csv(str(smi.get("stdout", "")))


def host_facts_summary(facts: dict[str, Any]) -> dict[str, Any]:
    """The provenance snapshot stored with every host run: GPU names/UUIDs, driver, CUDA, torch, clocks, ECC."""
    gpus = gpus_from_facts(facts)
    torch = facts.get("torch") or {}
    return {
        "hostname": facts.get("hostname"),
        "kernel": facts.get("kernel"),
        "python": (facts.get("python") or {}).get("version"),
        "torch": torch.get("version"),
        "cuda": torch.get("cuda_version"),
        "cuda_available": torch.get("cuda_available"),
        "gpu_name": gpus[0].name
        if gpus
        else ((torch.get("devices") or [{}])[0].get("name") if torch.get("devices") else None),
        "gpu_count": len(gpus),
        "gpu_uuids": [g.uuid for g in gpus],
        "driver": gpus[0].driver_version if gpus else None,
        "clocks_max_sm_mhz": gpus[0].clock_max_sm_mhz if gpus else None,
        "clocks_max_mem_mhz": gpus[0].clock_max_mem_mhz if gpus else None,
        "ecc": gpus[0].ecc if gpus else None,
        "gpus": [g.to_dict() for g in gpus],
    }
