"""The fleet view: per group, the facts that change results, their majority value and the hosts that differ — pure.

Input is what each host's facts probe returned (``agents/orch_agent/sysinfo.py``: the nvidia-smi CSV with the
fleet fields, ``fleet`` and ``torch``); :func:`host_values` turns one host's facts into one text per field and
:func:`fleet_view` compares them within each inventory group. Two kinds of field:

- **uniform** fields (GPU name, count and memory; driver; CUDA runtime; torch; NCCL; VBIOS; ECC mode; persistence
  mode; power limit with its default; application and max clocks; PCIe generation and width, current of max; MIG
  mode; NVLink; the CPU frequency governor): a host differs when its value is not the group's majority (ties: the
  value of the first host in inventory order). ``unknown`` (the fact could not be read) is a value like any other.
- **health** fields (uncorrectable ECC errors, volatile and aggregate; pending retired pages; pending remapped
  rows; Xid lines in the kernel log): a host is flagged whenever its count is above zero (or ``Yes`` pending),
  whatever the others say — one bad GPU in a fleet of bad GPUs is still bad.

Field sources (nvidia-smi ``--help-query-gpu`` names): ``name``, ``memory.total``, ``driver_version``,
``vbios_version``, ``ecc.mode.current``, ``ecc.errors.uncorrected.volatile.total``,
``ecc.errors.uncorrected.aggregate.total``, ``retired_pages.pending``, ``persistence_mode``, ``power.limit``,
``power.default_limit``, ``clocks.applications.graphics``/``.memory``, ``clocks.max.sm``/``.memory``,
``pcie.link.gen.current``/``.max``, ``pcie.link.width.current``/``.max``, ``mig.mode.current``;
``--query-remapped-rows`` ``remapped_rows.pending``; ``nvidia-smi nvlink -s`` (links per GPU that report a
speed, not ``<inactive>``); ``dmesg`` lines with ``NVRM: Xid``; torch's ``torch.version.cuda`` and
``torch.cuda.nccl.version()``; ``/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor``.

:func:`gate` is ``orch run --require-uniform``: the differences in every field not let through by
``--allow-drift FIELD``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.facts import read_nvidia_smi
from orchestrator.textlines import output_lines

UNKNOWN = "unknown"


@dataclass(frozen=True)
class FleetField:
    """One compared fact: ``key`` (what ``--allow-drift`` names), ``label`` (table heading), ``health``: flagged
    when above zero rather than when it differs from the majority."""

    key: str
    label: str
    health: bool = False


FIELDS: tuple[FleetField, ...] = (
    FleetField("gpu_name", "GPU"),
    FleetField("gpu_count", "GPUs"),
    FleetField("gpu_memory", "GPU memory"),
    FleetField("driver", "driver"),
    FleetField("cuda", "CUDA runtime"),
    FleetField("torch", "torch"),
    FleetField("nccl", "NCCL"),
    FleetField("vbios", "VBIOS"),
    FleetField("ecc_mode", "ECC mode"),
    FleetField("ecc_uncorrected_volatile", "uncorrectable ECC (volatile)", health=True),
    FleetField("ecc_uncorrected_aggregate", "uncorrectable ECC (aggregate)", health=True),
    FleetField("retired_pages_pending", "retired pages pending", health=True),
    FleetField("remapped_rows_pending", "remapped rows pending", health=True),
    FleetField("persistence_mode", "persistence mode"),
    FleetField("power_limit", "power limit (default)"),
    FleetField("app_clocks", "application clocks SM/mem"),
    FleetField("max_clocks", "max clocks SM/mem"),
    FleetField("pcie", "PCIe link (max)"),
    FleetField("mig_mode", "MIG mode"),
    FleetField("nvlink", "NVLink"),
    FleetField("xid", "Xid errors (kernel log)", health=True),
    FleetField("cpu_governor", "CPU governor"),
)
FIELD_KEYS = tuple(f.key for f in FIELDS)
# Fields read from the GPUs (nvidia-smi, and the kernel log's NVRM Xid lines): "none" on a host without a GPU.
_GPU_DERIVED = frozenset(FIELD_KEYS) - {"gpu_count", "cuda", "torch", "nccl", "cpu_governor"}
_BY_KEY = {f.key: f for f in FIELDS}


def _per_gpu(values: Sequence[str | None]) -> str:
    """One text for a host's GPUs: the value when all agree, else ``mixed: a, b`` (a host at odds with itself)."""
    texts = [v if v is not None else UNKNOWN for v in values]
    if not texts:
        return UNKNOWN
    distinct = list(dict.fromkeys(texts))
    return distinct[0] if len(distinct) == 1 else "mixed: " + ", ".join(distinct)


def _num(v: str | None) -> float | None:
    if v is None:
        return None
    m = re.match(r"^\s*(-?\d+(?:\.\d+)?)", v)
    return float(m.group(1)) if m else None


def _watts(v: str | None) -> str | None:
    n = _num(v)
    return None if n is None else f"{n:g} W"


def _mhz(v: str | None) -> str:
    n = _num(v)
    return "?" if n is None else f"{n:g}"


def _count_sum(values: Sequence[str | None]) -> str:
    nums = [_num(v) for v in values]
    if not nums or any(n is None for n in nums):
        return UNKNOWN if not nums or all(n is None for n in nums) else f"{sum(n for n in nums if n):g} (some unknown)"
    return f"{sum(n for n in nums if n is not None):g}"


def _pending(values: Sequence[str | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return UNKNOWN
    yes = sum(1 for v in known if v.strip().lower() in ("yes", "1", "true"))
    return f"Yes on {yes} GPU(s)" if yes else "No"


def _nvlink(raw: Any) -> str:
    """``nvidia-smi nvlink -s``: per GPU the number of links that report a speed; ``none`` when no link is
    listed (a PCIe-only board)."""
    if not isinstance(raw, dict) or raw.get("rc") != 0:
        return UNKNOWN
    per_gpu: list[int] = []
    for line in output_lines(str(raw.get("stdout") or "")):
        if line.startswith("GPU "):
            per_gpu.append(0)
        elif re.match(r"^\s+Link \d+:", line) and per_gpu and "inactive" not in line.lower():
            per_gpu[-1] += 1
    if not per_gpu or not any(per_gpu):
        return "none"
    distinct = sorted(set(per_gpu))
    if len(distinct) == 1:
        return f"{distinct[0]} active links/GPU"
    return "active links/GPU: " + ",".join(str(n) for n in per_gpu)


def _remapped(raw: Any) -> str:
    if not isinstance(raw, dict) or raw.get("rc") != 0:
        return UNKNOWN
    lines = [ln for ln in output_lines(str(raw.get("stdout") or "")) if ln.strip()]
    if len(lines) < 2:
        return UNKNOWN
    header = [h.strip() for h in lines[0].split(",")]
    if "remapped_rows.pending" not in header:
        return UNKNOWN
    i = header.index("remapped_rows.pending")
    values = [(ln.split(",") + [""] * len(header))[i].strip() for ln in lines[1:]]
    return _pending([None if (not v or v.startswith("[")) else v for v in values])


def _xid(raw: Any) -> str:
    if not isinstance(raw, dict) or not raw.get("readable"):
        return "not readable"
    count = raw.get("count")
    return str(count) if isinstance(count, int) else UNKNOWN


def _governor(raw: Any) -> str:
    if not isinstance(raw, dict) or not raw:
        return UNKNOWN
    if len(raw) == 1:
        return str(next(iter(raw)))
    return "mixed: " + ", ".join(f"{g} x{n}" for g, n in sorted(raw.items()))


def host_values(facts: Any) -> dict[str, str]:
    """One text per :data:`FIELDS` key for one host's facts; ``unknown`` where the fact could not be read; on a
    host without a GPU row every GPU-derived field (health counts and Xid included) is ``none`` (``unknown`` when
    nvidia-smi failed), never an invented 0 or ``No``. Never raises."""
    facts = facts if isinstance(facts, dict) else {}
    smi = read_nvidia_smi(facts)
    rows = smi.rows
    torch = facts.get("torch") if isinstance(facts.get("torch"), dict) else {}
    fleet = facts.get("fleet") if isinstance(facts.get("fleet"), dict) else {}

    def col(*names: str) -> list[str | None]:
        out: list[str | None] = []
        for r in rows:
            out.append(next((r[n] for n in names if r.get(n) is not None), None))
        return out

    def pair(a: Sequence[str | None], b: Sequence[str | None], fmt: str) -> str:
        return _per_gpu([None if x is None and y is None else fmt.format(x=x, y=y) for x, y in zip(a, b, strict=True)])

    power = [
        None if cur is None else f"{_watts(cur)} ({_watts(dflt) or '?'})"
        for cur, dflt in zip(col("power.limit"), col("power.default_limit"), strict=True)
    ]
    pcie = [
        None if g is None and w is None else f"gen{g or '?'} x{w or '?'} (gen{gm or '?'} x{wm or '?'})"
        for g, w, gm, wm in zip(col("pcie.link.gen.current"), col("pcie.link.width.current"),
                                col("pcie.link.gen.max"), col("pcie.link.width.max"), strict=True)
    ]  # fmt: skip
    app = [_mhz(a) + "/" + _mhz(b) if a or b else None
           for a, b in zip(col("clocks.applications.graphics"), col("clocks.applications.memory"), strict=True)]
    mx = [_mhz(a) + "/" + _mhz(b) if a or b else None
          for a, b in zip(col("clocks.max.sm"), col("clocks.max.mem"), strict=True)]  # fmt: skip
    if not rows:
        # No GPU row: every GPU-derived field is "none" (no GPU: nvidia-smi missing, or it lists none) or
        # "unknown" (nvidia-smi failed) — never a count of 0 errors or "No" pending for GPUs that are not there.
        absent = UNKNOWN if smi.failed else "none"
        gpu_fields = {f.key: absent for f in FIELDS if f.key in _GPU_DERIVED}
        # The kernel log is read whatever nvidia-smi says: Xid lines on a host whose nvidia-smi lists no GPU
        # (a GPU fallen off the bus) are shown; "0" of a host without GPUs is "none", like its other GPU fields.
        xid = _xid(fleet.get("xid"))
        return {
            **gpu_fields,
            "xid": absent if xid == "0" else xid,
            "gpu_count": UNKNOWN if smi.failed else "0",
            "cuda": str(torch.get("cuda_version") or UNKNOWN),
            "torch": str(torch.get("version") or UNKNOWN),
            "nccl": str(torch.get("nccl_version") or UNKNOWN),
            "cpu_governor": _governor(fleet.get("cpu_governors")),
        }
    return {
        "gpu_name": _per_gpu([g.name for g in smi.gpus]),
        "gpu_count": str(len(smi.gpus)),
        "gpu_memory": _per_gpu([f"{g.memory_mib} MiB" if g.memory_mib else None for g in smi.gpus]),
        "driver": _per_gpu([g.driver_version for g in smi.gpus]),
        "cuda": str(torch.get("cuda_version") or UNKNOWN),
        "torch": str(torch.get("version") or UNKNOWN),
        "nccl": str(torch.get("nccl_version") or UNKNOWN),
        "vbios": _per_gpu(col("vbios_version")),
        "ecc_mode": _per_gpu(col("ecc.mode.current")),
        "ecc_uncorrected_volatile": _count_sum(col("ecc.errors.uncorrected.volatile.total")),
        "ecc_uncorrected_aggregate": _count_sum(col("ecc.errors.uncorrected.aggregate.total")),
        "retired_pages_pending": _pending(col("retired_pages.pending")),
        "remapped_rows_pending": _remapped(fleet.get("remapped_rows")),
        "persistence_mode": _per_gpu(col("persistence_mode")),
        "power_limit": _per_gpu(power),
        "app_clocks": _per_gpu(app),
        "max_clocks": _per_gpu(mx),
        "pcie": _per_gpu(pcie),
        "mig_mode": _per_gpu(col("mig.mode.current")),
        "nvlink": _nvlink(fleet.get("nvlink")),
        "xid": _xid(fleet.get("xid")),
        "cpu_governor": _governor(fleet.get("cpu_governors")),
    }


def _bad_health(value: str) -> bool:
    n = _num(value)
    return (n is not None and n > 0) or value.startswith("Yes")


@dataclass(frozen=True)
class Difference:
    """One host whose ``field`` is ``value`` where its group's majority is ``majority`` (health fields: the
    count that is above zero)."""

    group: str
    field: str
    host: str
    value: str
    majority: str

    def to_dict(self) -> dict[str, str]:
        return {"group": self.group, "field": self.field, "host": self.host, "value": self.value,
                "majority": self.majority}  # fmt: skip


@dataclass(frozen=True)
class GroupView:
    group: str
    hosts: list[str]
    majority: dict[str, str]
    differences: list[Difference]
    unreachable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "hosts": list(self.hosts),
            "fields": [
                {"field": f.key, "label": f.label, "health": f.health, "majority": self.majority.get(f.key, UNKNOWN),
                 "differs": {d.host: d.value for d in self.differences if d.field == f.key}}
                for f in FIELDS
            ],
            "unreachable": dict(self.unreachable),
        }  # fmt: skip


@dataclass(frozen=True)
class FleetView:
    """Per group, the majority value of every field and the hosts that differ (see the module docstring)."""

    groups: list[GroupView]
    values: dict[str, dict[str, str]]

    @property
    def differences(self) -> list[Difference]:
        return [d for g in self.groups for d in g.differences]

    def to_dict(self) -> dict[str, Any]:
        return {
            "groups": [g.to_dict() for g in self.groups],
            "differences": [d.to_dict() for d in self.differences],
            "hosts": {h: dict(v) for h, v in self.values.items()},
        }


def fleet_view(hosts: Iterable[tuple[str, str, Any]], unreachable: Iterable[tuple[str, str, str]] = ()) -> FleetView:
    """Compare hosts within their groups. ``hosts``: (name, group, facts) in inventory order; ``unreachable``:
    (name, group, why) for hosts whose facts could not be read (listed, never compared)."""
    by_group: dict[str, list[tuple[str, dict[str, str]]]] = {}
    values: dict[str, dict[str, str]] = {}
    for name, group, facts in hosts:
        v = host_values(facts)
        values[name] = v
        by_group.setdefault(group, []).append((name, v))
    lost: dict[str, dict[str, str]] = {}
    for name, group, why in unreachable:
        lost.setdefault(group, {})[name] = why
        by_group.setdefault(group, [])
    groups = []
    for group, members in by_group.items():
        majority: dict[str, str] = {}
        diffs: list[Difference] = []
        for f in FIELDS:
            counts = Counter(v[f.key] for _, v in members)
            if not counts:
                continue
            top = max(counts.values())
            maj = next(v[f.key] for _, v in members if counts[v[f.key]] == top)
            majority[f.key] = maj
            for name, v in members:
                value = v[f.key]
                if (f.health and _bad_health(value)) or (not f.health and value != maj):
                    diffs.append(Difference(group, f.key, name, value, maj))
        groups.append(GroupView(group, [n for n, _ in members], majority, diffs, lost.get(group, {})))
    return FleetView(groups, values)


def check_fields(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` when every one is a fleet field key; else ValueError naming the others and listing the keys."""
    names = tuple(names)
    unknown = sorted(set(names) - set(FIELD_KEYS))
    if unknown:
        raise ValueError(f"no fleet field {', '.join(map(repr, unknown))}; fields: {', '.join(FIELD_KEYS)}")
    return names


def gate(view: FleetView, allow: Iterable[str] = (), groups: Iterable[str] | None = None) -> list[Difference]:
    """``--require-uniform``: the differences that refuse a run — every one outside the ``allow``-ed fields, in
    ``groups`` (all when None). Raises ValueError naming an ``allow`` entry that is no field."""
    allowed = set(check_fields(allow))
    chosen = set(groups) if groups is not None else None
    return [d for d in view.differences if d.field not in allowed and (chosen is None or d.group in chosen)]


def field_label(key: str) -> str:
    return _BY_KEY[key].label if key in _BY_KEY else key


def view_of_reports(reports: Iterable[Any], group_of: dict[str, str]) -> FleetView:
    """The fleet view of doctor's host reports (``host``, ``facts``, failed ``checks``): hosts without facts are
    listed as unreachable with their first failed check. ``group_of``: host name -> inventory group."""
    seen: list[tuple[str, str, Any]] = []
    lost: list[tuple[str, str, str]] = []
    for r in reports:
        group = group_of.get(r.host, "")
        if r.facts is not None:
            seen.append((r.host, group, r.facts))
        else:
            failed = next((c for c in r.checks if c.status == "fail"), None)
            lost.append((r.host, group, f"{failed.name}: {failed.detail}" if failed else "no facts"))
    return fleet_view(seen, lost)


def describe(differences: Sequence[Difference]) -> list[str]:
    """One line per difference: ``group/host: field value (group majority: x)``."""
    out = []
    for d in differences:
        f = _BY_KEY.get(d.field)
        if f is not None and f.health:
            out.append(f"{d.group}/{d.host}: {d.field} = {d.value} (must be 0)")
        else:
            out.append(f"{d.group}/{d.host}: {d.field} = {d.value} (group majority: {d.majority})")
    return out
