"""GPU and CPU telemetry around each case — stdlib only (the agent's rule), one child process per case.

While a case runs, ``nvidia-smi --query-gpu=<FIELDS>,<reasons> --format=csv,noheader,nounits -lms INTERVAL -i
GPUS`` runs as a child process and a thread reads its rows (one per GPU per interval); every
``APPS_EVERY_S`` seconds (and at the start and the end) ``nvidia-smi --query-compute-apps`` lists the processes on
the GPUs, and processes that are not this worker's (another session) are kept. At the end of the case the child is
stopped and :meth:`CaseTelemetry.stop` returns the summary stored with the result under ``info.telemetry``::

    {"interval_ms": 100, "gpus": ["0"], "samples": 80, "error": None,
     "fields": {"clocks.sm": {"min", "median", "max", "unit": "MHz"}, "clocks.mem", "power.draw" (W),
                "power.limit" (W), "temperature.gpu" (C), "utilization.gpu" (%), "utilization.memory" (%)},
     "reasons": {"sw_power_cap": 12, ...}    samples that carried each clock-event reason
     "throttle_samples": 12                  samples with a throttling reason (THROTTLE_REASONS)
     "low_clock_samples": 0, "low_clock_ratio": 0.9   busy samples whose SM clock was under 0.9 x clocks.max.sm
     "series": {"columns": [...], "rows": [[t_ms, gpu index, sm MHz, mem MHz, W, C, util %, reasons], ...]}
                                             at most SERIES_MAX_ROWS rows, evenly thinned
     "other_processes": [{"pid", "name", "gpu_uuid", "used_memory_mib"}],
     "cpu": {"governors": {name: cpus}, "loadavg_start": [1, 5, 15 min], "loadavg_end": [...]}}

Reasons bitmask (``clocks_event_reasons.active``; ``clocks_throttle_reasons.active`` before driver 535), bit
values from NVML's ``nvmlClocksEventReason*`` constants (nvml.h): 0x1 GPU idle, 0x2 applications clocks setting,
0x4 SW power cap, 0x8 HW slowdown, 0x10 sync boost, 0x20 SW thermal slowdown, 0x40 HW thermal slowdown, 0x80 HW
power brake slowdown, 0x100 display clock setting. Idle, applications-clocks and display-clock settings are not
throttling; the others are (the orchestrator decides ``throttled`` from these counts: analysis/telemetry.py).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from typing import Any

from .sysinfo import cpu_governors, loadavg

DEFAULT_INTERVAL_MS = 100
APPS_EVERY_S = 2.0
APPS_FIELDS = "pid,process_name,used_memory,gpu_uuid"
SERIES_MAX_ROWS = 240
LOW_CLOCK_RATIO = 0.9
FIELDS = (
    "index",
    "uuid",
    "clocks.sm",
    "clocks.mem",
    "power.draw",
    "power.limit",
    "temperature.gpu",
    "utilization.gpu",
    "utilization.memory",
    "clocks.max.sm",
)
UNITS = {
    "clocks.sm": "MHz",
    "clocks.mem": "MHz",
    "power.draw": "W",
    "power.limit": "W",
    "temperature.gpu": "C",
    "utilization.gpu": "%",
    "utilization.memory": "%",
}
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
THROTTLE_MASK = 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80
NOT_THROTTLE_MASK = 0x1 | 0x2 | 0x100
_reason_field_cache: dict[str, str | None] = {}


def _num(v: str) -> float | None:
    v = v.strip()
    try:
        return float(int(v, 16)) if v.lower().startswith("0x") else float(v)
    except ValueError:
        return None


def reason_field(exe: str) -> str | None:
    """The bitmask field this driver knows (the newer name first); None when neither answers. Asked once."""
    if exe in _reason_field_cache:
        return _reason_field_cache[exe]
    found = None
    for name in REASON_FIELDS:
        try:
            proc = subprocess.run([exe, "--query-gpu=" + name, "--format=csv,noheader", "-i", "0"],
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=20, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            found = name
            break
    _reason_field_cache[exe] = found
    return found


def case_gpus(case: dict[str, Any]) -> list[str]:
    """The GPUs a case uses, as nvidia-smi ``-i`` ids: its ``gpus`` parameter (a count, default 1) first ones of
    ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs) when set, else of indices 0, 1, ..."""
    n = case.get("gpus")
    n = n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        return visible[:n]
    return [str(i) for i in range(n)]


def _own_session(pid: int) -> bool:
    try:
        return os.getsid(pid) == os.getsid(0)
    except OSError:
        return False  # another PID namespace or gone: not ours to judge as ours


class CaseTelemetry:
    """Samples the GPUs ``gpus`` every ``interval_ms`` from :meth:`start` to :meth:`stop` (see the module
    docstring). With no nvidia-smi, only the CPU side is recorded."""

    def __init__(self, gpus: list[str], interval_ms: int = DEFAULT_INTERVAL_MS, exe: str | None = None) -> None:
        self.gpus = gpus
        self.interval_ms = max(10, int(interval_ms))
        self.exe = exe if exe is not None else shutil.which("nvidia-smi")
        self.rows: list[tuple[float, list[str]]] = []
        self.apps: dict[int, dict[str, Any]] = {}
        self.error: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._t0 = 0.0
        self._cpu: dict[str, Any] = {}
        self._reason: str | None = None
        self._summary: dict[str, Any] | None = None

    def start(self) -> CaseTelemetry:
        self._t0 = time.monotonic()
        self._cpu = {"governors": cpu_governors(), "loadavg_start": loadavg()}
        if not self.exe:
            return self
        self._reason = reason_field(self.exe)
        fields = FIELDS + ((self._reason,) if self._reason else ())
        argv = [self.exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
                "-lms", str(self.interval_ms), "-i", ",".join(self.gpus)]  # fmt: skip
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, bufsize=1)  # fmt: skip
        except OSError as exc:
            self.error = f"could not start nvidia-smi: {exc}"
            return self
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._poll_apps, daemon=True)]  # fmt: skip
        for t in self._threads:
            t.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self.add_line(line, time.monotonic() - self._t0)

    def add_line(self, line: str, t_s: float) -> None:
        """One ``-lms`` output line taken ``t_s`` seconds after the start; lines that are not rows are skipped."""
        cells = [c.strip() for c in line.strip().split(",")]
        if len(cells) >= len(FIELDS):
            self.rows.append((t_s, cells))

    def _poll_apps(self) -> None:
        while True:
            self._apps_once()
            if self._stop.wait(APPS_EVERY_S):
                return

    def _apps_once(self) -> None:
        if not self.exe:
            return
        try:
            proc = subprocess.run(
                [self.exe, "--query-compute-apps=" + APPS_FIELDS, "--format=csv,noheader,nounits"],
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return
        if proc.returncode != 0:
            return
        for line in proc.stdout.splitlines():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) < 4 or not cells[0].isdigit():
                continue
            pid = int(cells[0])
            if pid in self.apps or _own_session(pid):
                continue
            mem = _num(cells[2])
            self.apps[pid] = {"pid": pid, "name": cells[1], "gpu_uuid": cells[3],
                              "used_memory_mib": int(mem) if mem is not None else None}  # fmt: skip

    def stop(self) -> dict[str, Any]:
        """Stop sampling and return the summary (module docstring); a second call returns the same. Never
        raises."""
        if self._summary is not None:
            return self._summary
        self._stop.set()
        stderr = ""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
            try:
                _, stderr = self._proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                _, stderr = self._proc.communicate()
            for t in self._threads:
                t.join(timeout=5)
            self._apps_once()
            if not self.rows:
                rc = self._proc.returncode
                self.error = (stderr or "").strip()[-500:] or f"nvidia-smi gave no sample (exit {rc})"
        self._cpu["loadavg_end"] = loadavg()
        self._summary = self.summary()
        return self._summary

    def summary(self) -> dict[str, Any]:
        uuids = {cells[1] for _, cells in self.rows}
        others = [a for a in self.apps.values() if not uuids or a["gpu_uuid"] in uuids]
        out: dict[str, Any] = {
            "interval_ms": self.interval_ms,
            "gpus": list(self.gpus),
            "samples": len(self.rows),
            "error": self.error,
            "reason_field": self._reason,
            "other_processes": sorted(others, key=lambda a: a["pid"]),
            "cpu": self._cpu,
        }
        if not self.exe:
            out["error"] = "nvidia-smi not found: no GPU telemetry"
        if not self.rows:
            return out
        cols = {name: i for i, name in enumerate(FIELDS)}
        fields: dict[str, Any] = {}
        for name, unit in UNITS.items():
            vals = [v for v in (_num(c[cols[name]]) for _, c in self.rows) if v is not None]
            if vals:
                fields[name] = {"min": min(vals), "median": statistics.median(vals), "max": max(vals), "unit": unit}
        out["fields"] = fields
        reasons: dict[str, int] = {}
        throttle = low = 0
        series = []
        for t, c in self.rows:
            mask = int(_num(c[len(FIELDS)]) or 0) if self._reason and len(c) > len(FIELDS) else 0
            for bit, name in REASONS.items():
                if mask & bit:
                    reasons[name] = reasons.get(name, 0) + 1
            if mask & THROTTLE_MASK:
                throttle += 1
            sm, mx, util = _num(c[cols["clocks.sm"]]), _num(c[cols["clocks.max.sm"]]), _num(c[cols["utilization.gpu"]])
            busy = util is not None and util > 0 and not mask & NOT_THROTTLE_MASK
            if busy and sm is not None and mx and sm < LOW_CLOCK_RATIO * mx:
                low += 1
            series.append([round(t * 1000), c[cols["index"]], sm, _num(c[cols["clocks.mem"]]),
                           _num(c[cols["power.draw"]]), _num(c[cols["temperature.gpu"]]), util, mask])  # fmt: skip
        if len(series) > SERIES_MAX_ROWS:
            step = len(series) / SERIES_MAX_ROWS
            series = [series[int(i * step)] for i in range(SERIES_MAX_ROWS)]
        out.update(
            reasons=reasons,
            throttle_samples=throttle,
            low_clock_samples=low,
            low_clock_ratio=LOW_CLOCK_RATIO,
            series={"columns": ["t_ms", "gpu", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu",
                                "utilization.gpu", "reasons"], "rows": series},  # fmt: skip
        )
        return out
