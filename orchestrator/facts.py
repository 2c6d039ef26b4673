"""Parsers for remote facts — pure, tested on recorded output in tests/fixtures/.

The remote side (``agents/orch_agent/sysinfo.py``) returns raw command output; these turn it into values.
"""

from __future__ import annotations

import csv
import re
from dataclasses import asdict, dataclass, field
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
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
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


_HEADER_COLUMN = re.compile(r"^[a-z][a-z0-9_.]*(\s*\[[^\]]*\])?$")


def _csv_cells(line: str) -> list[str]:
    return next(csv.reader([line], skipinitialspace=True), [])


@dataclass(frozen=True)
class SmiTable:
    """The CSV part of one nvidia-smi output: the GPU rows, and every other non-empty line (warnings such as
    ``WARNING: infoROM is corrupted at gpu 0000:0B:00.0``, or rows with the wrong number of columns)."""

    gpus: list[GpuInfo]
    other_lines: list[str]
    rows: list[dict[str, str | None]] = field(default_factory=list)


def parse_nvidia_smi(text: str, fields: tuple[str, ...] | None = None) -> SmiTable:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output; never raises.

    With ``fields`` None the header is the first line whose every column is a field name (``name, uuid,
    memory.total [MiB], ...``: lower case, dots, a ``[unit]``); otherwise the text has no header and ``fields``
    names the columns. A row is a line with as many columns as the header and at least one value; every other
    non-empty line (before or after the header, a warning nvidia-smi printed on stdout, a cut row, ``,,,``) is
    kept in ``other_lines``. Values such
    as ``[N/A]`` and ``[Not Supported]`` become None; memory in MiB, clocks in MHz, as nvidia-smi prints them.
    """
    header: list[str] | None = [_ALIASES.get(f, f) for f in fields] if fields is not None else None
    gpus: list[GpuInfo] = []
    other: list[str] = []
    rows: list[dict[str, str | None]] = []
    for raw in str(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = _csv_cells(line)
        if header is None:
            if len(cells) >= 2 and all(_HEADER_COLUMN.match(c.strip()) for c in cells):
                header = [_norm_header(c) for c in cells]
            else:
                other.append(line)
            continue
        if len(cells) != len(header) or all(_na(c) is None for c in cells):  # ",,," or "[N/A], [N/A]" is no GPU
            other.append(line)
            continue
        d = dict(zip(header, cells, strict=True))
        rows.append({k: _na(v) for k, v in d.items()})
        gpus.append(
            GpuInfo(
                index=len(gpus),
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
    return SmiTable(gpus, other, rows)


def parse_nvidia_smi_csv(text: str, fields: tuple[str, ...] | None = None) -> list[GpuInfo]:
    """The GPU rows of :func:`parse_nvidia_smi` (lines that are not rows are dropped here); never raises."""
    return parse_nvidia_smi(text, fields).gpus


@dataclass(frozen=True)
class SmiReading:
    """What sysinfo's nvidia-smi call gave, judged: ``gpus`` from the CSV rows whatever the exit status;
    ``warnings``: lines that are not rows (stdout) and stderr's lines, in order; ``exit_status`` (None when it
    did not run to the end); ``error``: the whole error text (every line) when it exited non-zero or did not
    finish, else None; ``found``: whether nvidia-smi is on the host's PATH."""

    found: bool
    exit_status: int | None
    gpus: list[GpuInfo]
    warnings: list[str]
    error: str | None
    rows: list[dict[str, str | None]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """nvidia-smi ran (or hung) and gave no GPU row with a failure: nothing to go on."""
        return self.found and self.error is not None and not self.gpus


def read_nvidia_smi(facts: Any) -> SmiReading:
    """Judge the ``nvidia_smi`` entry of a sysinfo facts dict (``{found, rc, stdout, stderr}``); never raises,
    whatever the dict holds."""
    smi = facts.get("nvidia_smi") if isinstance(facts, dict) else None
    if not isinstance(smi, dict) or not smi.get("found"):
        return SmiReading(False, None, [], [], None)
    rc = smi.get("rc")
    rc = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
    table = parse_nvidia_smi(str(smi.get("stdout") or ""))
    stderr = [ln.strip() for ln in str(smi.get("stderr") or "").splitlines() if ln.strip()]
    warnings = table.other_lines + stderr
    error = None
    if rc != 0:
        error = "\n".join(warnings) or (f"exit status {rc}" if rc is not None else "did not finish")
    return SmiReading(True, rc, table.gpus, warnings, error, table.rows)


def gpus_from_facts(facts: dict[str, Any]) -> list[GpuInfo]:
    """The GPUs in a sysinfo facts dict: the CSV rows nvidia-smi printed, whatever its exit status (empty when
    it is missing or printed no row). Never raises."""
    return read_nvidia_smi(facts).gpus


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def host_facts_summary(facts: dict[str, Any]) -> dict[str, Any]:
    """The provenance snapshot stored with every host run: GPU names/UUIDs, driver, CUDA, torch, clocks, ECC,
    and what nvidia-smi said besides its rows (``nvidia_smi_warnings``, ``nvidia_smi_exit``)."""
    smi = read_nvidia_smi(facts)
    gpus = smi.gpus
    facts = facts if isinstance(facts, dict) else {}
    torch = _dict(facts.get("torch"))
    devices = [d for d in torch.get("devices") or [] if isinstance(d, dict)]
    return {
        "hostname": facts.get("hostname"),
        "kernel": facts.get("kernel"),
        "python": _dict(facts.get("python")).get("version"),
        "torch": torch.get("version"),
        "cuda": torch.get("cuda_version"),
        "cuda_available": torch.get("cuda_available"),
        "gpu_name": gpus[0].name if gpus else (devices[0].get("name") if devices else None),
        "gpu_count": len(gpus),
        "gpu_uuids": [g.uuid for g in gpus],
        "driver": gpus[0].driver_version if gpus else None,
        "clocks_max_sm_mhz": gpus[0].clock_max_sm_mhz if gpus else None,
        "clocks_max_mem_mhz": gpus[0].clock_max_mem_mhz if gpus else None,
        "ecc": gpus[0].ecc if gpus else None,
        "gpus": [g.to_dict() for g in gpus],
        "nvidia_smi_exit": smi.exit_status,
        "nvidia_smi_warnings": smi.warnings,
    }
