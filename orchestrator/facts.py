"""Parsers for remote facts — pure, tested on recorded output in tests/fixtures/.

The remote side (``agents/orch_agent/sysinfo.py``) returns raw command output; these turn it into values.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from orchestrator.textlines import output_lines

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


#: Units nvidia-smi prints (``--help-query-gpu``: memory in MiB, power in W, clocks in MHz) and the ones other
#: builds, wrappers and locales have been seen to print; each maps to (canonical unit, factor). MB/GB are decimal
#: (10^6 / 10^9 bytes), MiB/GiB binary.
UNITS: dict[str, tuple[str, float]] = {
    "kib": ("MiB", 1 / 1024), "mib": ("MiB", 1.0), "gib": ("MiB", 1024.0), "tib": ("MiB", 1024.0**2),
    "kb": ("MiB", 1e3 / 2**20), "mb": ("MiB", 1e6 / 2**20), "gb": ("MiB", 1e9 / 2**20), "tb": ("MiB", 1e12 / 2**20),
    "mw": ("W", 1e-3), "w": ("W", 1.0), "kw": ("W", 1e3),
    "khz": ("MHz", 1e-3), "mhz": ("MHz", 1.0), "ghz": ("MHz", 1e3),
    "%": ("%", 1.0), "c": ("C", 1.0),
}  # fmt: skip
_UNIT_NAMES = ("KiB", "MiB", "GiB", "TiB", "kB", "MB", "GB", "TB", "mW", "W", "kW", "kHz", "MHz", "GHz", "%", "C")
#: Fields whose values are quantities, with nvidia-smi's unit for them (``--help-query-gpu``) where neither the
#: value nor the header names one (``--format=csv,noheader,nounits`` read with ``fields``).
_QUANTITY_FIELDS = (("memory.", "MiB"), ("power.", "W"), ("enforced.power", "W"), ("clocks.", "MHz"),
                    ("temperature.", "C"))  # fmt: skip
_QUANTITY = re.compile(r"^([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([A-Za-z%]+)?$")


def quantity(value: str | None, header_unit: str | None = None) -> tuple[float, str] | None:
    """``(number, canonical unit)`` of an nvidia-smi value such as ``143771 MiB``, ``"143,771 MiB"``, ``1e3 MiB``,
    ``140 GiB`` (143360 MiB), ``700000 mW`` (700 W) or ``1.98 GHz`` (1980 MHz); a value without a unit takes the
    header's (``--format=csv,nounits``: ``memory.total [MiB]``). None for ``[N/A]``/``[Not Supported]``, text
    that is not a number, or a number with no unit at all. Raises ValueError naming the unit when it is one orch
    does not know (never a silent misreading)."""
    v = _na(value or "")
    if v is None:
        return None
    m = _QUANTITY.match(v)
    if m is None or not any(ch.isdigit() for ch in m.group(1)):
        return None
    unit = m.group(2) or header_unit
    if unit is None:
        return None
    try:
        number = float(m.group(1).replace(",", ""))
    except ValueError:
        return None
    known = UNITS.get(unit.lower())
    if known is None:
        raise ValueError(f"unknown unit {unit!r} in {v!r} (orch reads {', '.join(_UNIT_NAMES)})")
    if not math.isfinite(number):
        return None
    return number * known[1], known[0]


def _whole(q: tuple[float, str] | None, unit: str) -> int | None:
    return round(q[0]) if q is not None and q[1] == unit else None


def _norm_header(h: str) -> str:
    key = re.sub(r"\s*\[.*\]\s*$", "", h.strip())
    return _ALIASES.get(key, key)


def _header_unit(h: str) -> str | None:
    m = re.search(r"\[([^\]]*)\]\s*$", h.strip())
    return m.group(1).strip() or None if m else None


_HEADER_COLUMN = re.compile(r"^[a-z][a-z0-9_.]*(\s*\[[^\]]*\])?$")
#: A header names at least one column that identifies a GPU: a line such as ``failed, retrying`` is no header.
_IDENTITY_FIELDS = frozenset({"name", "uuid", "index", "pci.bus_id", "serial", "gpu_name", "gpu_uuid"})


def _csv_cells(line: str) -> list[str]:
    return next(csv.reader([line], skipinitialspace=True), [])


def _is_header(cells: list[str]) -> bool:
    return (
        len(cells) >= 2
        and all(_HEADER_COLUMN.match(c.strip()) for c in cells)
        and any(_norm_header(c) in _IDENTITY_FIELDS for c in cells)
    )


@dataclass(frozen=True)
class SmiTable:
    """The CSV part of one nvidia-smi output: the GPU rows, and every other non-empty line (warnings such as
    ``WARNING: infoROM is corrupted at gpu 0000:0B:00.0``, rows with the wrong number of columns, a repeated
    header line, a value with a unit orch does not know — each with what was wrong).
    ``rows``: each GPU's values by field name, ``[N/A]`` as None, quantities in canonical units (``143771 MiB``,
    ``700 W``, ``1980 MHz``)."""

    gpus: list[GpuInfo]
    other_lines: list[str]
    rows: list[dict[str, str | None]] = field(default_factory=list)


def parse_nvidia_smi(
    text: str, fields: tuple[str, ...] | None = None, expect: tuple[str, ...] | None = None
) -> SmiTable:
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output; never raises.

    With ``fields`` None the header is the first line whose every column is a field name (``name, uuid,
    memory.total [MiB], ...``: lower case, dots, a ``[unit]``) and that names a GPU-identifying field (``name``,
    ``uuid``, ``index``, ``pci.bus_id``), so a first line such as ``failed, retrying`` is no header; otherwise the
    text has no header and ``fields`` names the columns. With ``expect`` (the fields the query asked, first),
    the header must name those fields first (aliases such as ``clocks.max.memory`` allowed): the output of
    another query is not taken for this one. A row is a line with as many columns as the header and at
    least one value; every other non-empty line (before or after the header, a header repeated, a warning
    nvidia-smi printed on stdout, a cut row, ``,,,``) is kept in ``other_lines``. ``[N/A]`` and ``[Not
    Supported]`` become None. Quantities are converted (:func:`quantity`): memory to MiB (MiB/GiB/MB/GB), power
    to W (W/mW), clocks to MHz (MHz/GHz), a value without unit in the header's unit; a value whose unit orch
    does not know becomes None and its line is kept in ``other_lines`` with the reason.
    """
    header: list[str] | None = [_ALIASES.get(f, f) for f in fields] if fields is not None else None
    wanted = [_ALIASES.get(f, f) for f in expect or ()]
    units: list[str | None] = [None] * len(header) if header is not None else []
    gpus: list[GpuInfo] = []
    other: list[str] = []
    rows: list[dict[str, str | None]] = []
    for raw in output_lines(str(text)):
        line = raw.strip()
        if not line:
            continue
        cells = _csv_cells(line)
        if header is None:
            if _is_header(cells) and (expect is None or [_norm_header(c) for c in cells[: len(expect)]] == wanted):
                header = [_norm_header(c) for c in cells]
                units = [_header_unit(c) for c in cells]
            else:
                other.append(line)
            continue
        if _is_header(cells) and [_norm_header(c) for c in cells] == header:
            other.append(f"{line} (a repeated header line, skipped)")
            continue
        if len(cells) != len(header) or all(_na(c) is None for c in cells):  # ",,," or "[N/A], [N/A]" is no GPU
            other.append(line)
            continue
        d: dict[str, str | None] = {}
        q: dict[str, tuple[float, str] | None] = {}
        for key, unit, cell in zip(header, units, cells, strict=True):
            default = next((u for prefix, u in _QUANTITY_FIELDS if key.startswith(prefix)), None)
            if unit is None and default is None:
                d[key], q[key] = _na(cell), None  # text: a name, UUID, driver version, bus id, Enabled ...
                continue
            try:
                got = quantity(cell, unit or default)
            except ValueError as exc:
                got = None
                other.append(f"{line} ({key}: {exc}; the value is left out)")
            else:
                if got is None and _na(cell) is not None:
                    other.append(f"{line} ({key}: {cell.strip()!r} is not a quantity; the value is left out)")
            q[key] = got
            d[key] = None if got is None else f"{_shown(got[0])} {got[1]}"
        rows.append(d)
        gpus.append(
            GpuInfo(
                index=len(gpus),
                name=(d.get("name") or "unknown GPU"),
                uuid=d.get("uuid"),
                driver_version=d.get("driver_version"),
                memory_mib=_whole(q.get("memory.total"), "MiB"),
                clock_max_sm_mhz=_whole(q.get("clocks.max.sm"), "MHz"),
                clock_max_mem_mhz=_whole(q.get("clocks.max.mem"), "MHz"),
                ecc=d.get("ecc.mode.current"),
                pci_bus_id=d.get("pci.bus_id"),
            )
        )
    return SmiTable(gpus, other, rows)


def _shown(x: float) -> str:
    return f"{x:.10g}"


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
    # sysinfo says which query ran ("fleet" or "base"): both start with NVIDIA_SMI_FIELDS
    expect = NVIDIA_SMI_FIELDS if smi.get("query") in ("fleet", "base") else None
    table = parse_nvidia_smi(str(smi.get("stdout") or ""), expect=expect)
    stderr = [ln.strip() for ln in output_lines(str(smi.get("stderr") or "")) if ln.strip()]
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
