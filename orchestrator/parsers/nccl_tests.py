"""nccl-tests output (``all_reduce_perf`` and its siblings) into rows — pure.

Two formats, both written by NVIDIA/nccl-tests ``src/util.cu``:

- the text table on stdout: ``#`` header lines (``# nThread 1 nGpus 8 minBytes ...``, one ``#  Rank  r ...
  device d [bus] NAME`` line per rank, the two column-title lines), one line per size — ``size(B) count type
  redop root`` then ``time(us) algbw(GB/s) busbw(GB/s) #wrong`` for out-of-place and again for in-place
  (``#wrong`` is ``N/A`` without validation; a trace-replay line has blanks instead of the out-of-place block;
  with per-iteration timing each block has four more columns ``i_min i_max i_p99 i_cv%``) — and the footer
  ``# Out of bounds values : N OK`` / ``# Avg bus bandwidth    : X``. Other lines (NCCL INFO logs) are skipped.
- the ``-J FILE`` JSON: ``{"version": 2, "config": {"nthreads", "ngpus", ..., "devices": [...]}, "results":
  [{"size", "count", "type", "redop", "root": "    -1", "out_of_place": {"time", "alg_bw", "bus_bw", "nwrong"}
  | null, "in_place": {...}}], "out_of_bounds": {"count"}, "average_bus_bandwidth": {"bandwidth"}}`` (``cpu_time``
  instead of ``time`` with ``-C``). Only the first rank line of each process is in ``devices``, so the rank count
  is ``len(devices) * nthreads * ngpus``.

Units are nccl-tests': time in µs, algbw = bytes / 1e9 / s, busbw = algbw · 2(n−1)/n for all_reduce, GB/s.
Rows carry ``placement`` (``out-of-place`` | ``in-place``); orch's own ``allreduce`` bench times
torch.distributed's in-place all-reduce, so compare it with the ``in-place`` rows.

As a suite parser (``parser: nccl-tests``, the packaged suite ``nccl-allreduce``): one record per result line
(size), the out-of-place figures as ``time_us``, ``algbw_gbps``, ``busbw_gbps``, ``wrong`` (the headline) and the
in-place ones as ``time_us_inplace``, ``algbw_gbps_inplace``, ``busbw_gbps_inplace``, ``wrong_inplace``; a case
(one message size) takes the one record of its ``size_bytes`` (a case without that parameter: the output's only
record), and any other count is a ParseError naming the sizes found.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.parsers.base import ParseError, ParserDef, Record

Placement = Literal["out-of-place", "in-place"]
PLACEMENTS: tuple[Placement, Placement] = ("out-of-place", "in-place")

_NTHREAD_RE = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+\s+\[[^\]]*\]\s+(.*?)\s*$")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_VERSION_RE = re.compile(r"^#\s*nccl-tests version\s+\S+.*\bnccl-library=(\d+)")


@dataclass(frozen=True)
class NcclRow:
    """One size, one placement. ``wrong`` is None when the run did not validate (``-c 0``)."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    placement: Placement
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None

    def metrics(self) -> dict[str, dict[str, Any]]:
        """The row in the shape of orch's ``allreduce`` result metrics (one value each, no samples)."""
        out: dict[str, dict[str, Any]] = {
            "time_us": {"value": self.time_us, "unit": "us"},
            "algbw_gbps": {"value": self.algbw_gbps, "unit": "GB/s"},
            "busbw_gbps": {"value": self.busbw_gbps, "unit": "GB/s"},
        }
        if self.wrong is not None:
            out["wrong"] = {"value": self.wrong, "unit": "elements"}
        return out


@dataclass(frozen=True)
class NcclReport:
    """A parsed run: rows in output order (per size out-of-place first), the rank count, device names, the
    footer figures and the NCCL library version code (``22703`` = 2.27.3), each None when the output does not say."""

    source: Literal["text", "json"]
    rows: tuple[NcclRow, ...]
    ranks: int | None
    devices: tuple[str, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    nccl_version: str | None

    def by_placement(self, placement: Placement) -> list[NcclRow]:
        return [r for r in self.rows if r.placement == placement]


def _num(token: str, what: str, line_no: int) -> float:
    try:
        x = float(token)
    except ValueError:
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is not a number") from None
    if not math.isfinite(x):
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is not finite")
    return x


def _wrong(token: str, line_no: int) -> int | None:
    return None if token == "N/A" else int(_num(token, "#wrong", line_no))


def parse_text(text: str) -> NcclReport:
    """Parse the stdout of an nccl-tests binary. Raises ParseError when no result line is found or a result
    line is malformed."""
    rows: list[NcclRow] = []
    devices: dict[int, str] = {}
    threads_gpus: int | None = None
    avg: float | None = None
    oob: int | None = None
    version: str | None = None
    block = 4
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if line.startswith("#"):
            if m := _NTHREAD_RE.match(line):
                threads_gpus = int(m.group(1)) * int(m.group(2))
            elif m := _RANK_RE.match(line):
                devices[int(m.group(1))] = m.group(2)
            elif m := _AVG_RE.match(line):
                avg = _num(m.group(1), "average bus bandwidth", no)
            elif m := _OOB_RE.match(line):
                oob = int(m.group(1))
            elif m := _VERSION_RE.match(line):
                version = m.group(1)
            elif "i_min" in line:
                block = 8
            continue
        tok = line.split()
        if len(tok) < 5 + 4 or not tok[0].isdigit() or not tok[1].isdigit():
            continue  # NCCL INFO lines, blank lines
        size, count, typ, redop, root = int(tok[0]), int(tok[1]), tok[2], tok[3], int(_num(tok[4], "root", no))
        rest = tok[5:]
        # a trace-replay line has only the in-place block; extra trailing tokens are timestamps
        blocks = [("out-of-place", rest[:block]), ("in-place", rest[block : 2 * block])]
        if len(rest) < 2 * block:
            blocks = [("in-place", rest[:block])]
        for placement, cols in blocks:
            rows.append(
                NcclRow(
                    size_bytes=size,
                    count=count,
                    type=typ,
                    redop=redop,
                    root=root,
                    placement="in-place" if placement == "in-place" else "out-of-place",
                    time_us=_num(cols[0], "time", no),
                    algbw_gbps=_num(cols[1], "algbw", no),
                    busbw_gbps=_num(cols[2], "busbw", no),
                    wrong=_wrong(cols[3], no),
                )
            )
    if not rows:
        raise ParseError("no nccl-tests result line found (expected 'size count type redop root time ...')")
    ranks = len(devices) if devices else threads_gpus
    return NcclReport("text", tuple(rows), ranks, tuple(devices[r] for r in sorted(devices)), avg, oob, version)


def _get(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in doc:
        raise ParseError(f"nccl-tests JSON: {where} has no {key!r}")
    return doc[key]


def _float(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ParseError(f"nccl-tests JSON: {where} must be a finite number, got {v!r}")
    return float(v)


def parse_json(text: str) -> NcclReport:
    """Parse an nccl-tests ``-J`` file. Raises ParseError when it is not that JSON."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"nccl-tests JSON: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError("nccl-tests JSON: expected an object with a 'results' list")
    rows: list[NcclRow] = []
    for i, rec in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(rec, dict):
            raise ParseError(f"nccl-tests JSON: {where} is not an object")
        size, count = int(_float(_get(rec, "size", where), where)), int(_float(_get(rec, "count", where), where))
        root = int(str(rec.get("root", "-1")).strip() or "-1")
        for placement, key in zip(PLACEMENTS, ("out_of_place", "in_place"), strict=True):
            body = rec.get(key)
            if body is None:
                continue
            w = f"{where}.{key}"
            nwrong = body.get("nwrong")
            rows.append(
                NcclRow(
                    size_bytes=size,
                    count=count,
                    type=str(rec.get("type", "")),
                    redop=str(rec.get("redop", "")),
                    root=root,
                    placement=placement,
                    time_us=_float(body.get("time", body.get("cpu_time")), f"{w}.time"),
                    algbw_gbps=_float(_get(body, "alg_bw", w), f"{w}.alg_bw"),
                    busbw_gbps=_float(_get(body, "bus_bw", w), f"{w}.bus_bw"),
                    wrong=None if nwrong is None else int(_float(nwrong, f"{w}.nwrong")),
                )
            )
    if not rows:
        raise ParseError("nccl-tests JSON: 'results' holds no measurement")
    config: dict[str, Any] = doc["config"] if isinstance(doc.get("config"), dict) else {}
    devs = [d for d in config.get("devices", []) if isinstance(d, dict)]
    nthreads, ngpus = config.get("nthreads"), config.get("ngpus")
    ranks = len(devs) * nthreads * ngpus if devs and isinstance(nthreads, int) and isinstance(ngpus, int) else None
    avg_doc = doc.get("average_bus_bandwidth")
    avg = avg_doc.get("bandwidth") if isinstance(avg_doc, dict) else None
    oob_doc = doc.get("out_of_bounds")
    oob = oob_doc.get("count") if isinstance(oob_doc, dict) else None
    return NcclReport(
        "json",
        tuple(rows),
        ranks,
        tuple(str(d.get("device_info", "")) for d in devs),
        _float(avg, "average_bus_bandwidth.bandwidth") if avg is not None else None,
        oob if isinstance(oob, int) else None,
        str(doc["nccl_version"]) if "nccl_version" in doc else None,
    )


def parse(text: str) -> NcclReport:
    """JSON (``-J``) when the text is a JSON object, else the stdout table."""
    return parse_json(text) if text.lstrip().startswith("{") else parse_text(text)


# -- as a suite parser --------------------------------------------------------------------------------------------

_FIELDS = ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
UNITS = {"time_us": "us", "algbw_gbps": "GB/s", "busbw_gbps": "GB/s", "wrong": "elements", "size_bytes": "B"}
UNITS |= {f"{k}_inplace": UNITS[k] for k in _FIELDS}


def _records(text: str, pattern: str | None) -> list[Record]:
    """One record per result line / JSON result (size): out-of-place fields plain, in-place ones ``*_inplace``."""
    try:
        report = parse(text)
    except ParseError as exc:
        raise ParseError(f"no usable nccl-tests output ({exc})") from None
    out: list[dict[str, Any]] = []
    for row in report.rows:
        suffix = "" if row.placement == "out-of-place" else "_inplace"
        cur = out[-1] if out else None
        if cur is None or cur["size_bytes"] != row.size_bytes or f"time_us{suffix}" in cur:
            cur = {"size_bytes": row.size_bytes, "count": row.count, "type": row.type, "redop": row.redop}
            out.append(cur)
        cur[f"time_us{suffix}"] = row.time_us
        cur[f"algbw_gbps{suffix}"] = row.algbw_gbps
        cur[f"busbw_gbps{suffix}"] = row.busbw_gbps
        if row.wrong is not None:
            cur[f"wrong{suffix}"] = row.wrong
    return list(out)


def _sizes(records: list[Record]) -> str:
    sizes = [str(r["size_bytes"]) for r in records]
    return ", ".join(sizes) if len(sizes) <= 8 else f"{', '.join(sizes[:4])}, ..., {', '.join(sizes[-2:])}"


def select_case(records: Sequence[Record], case: Mapping[str, Any]) -> list[Record]:
    """The one record of the case's ``size_bytes`` (no such parameter: the output's only record). Raises
    ParseError naming the count and the sizes found otherwise."""
    size = case.get("size_bytes")
    if isinstance(size, int) and not isinstance(size, bool):
        picked = [r for r in records if r["size_bytes"] == size]
        what = f"for size_bytes={size}"
    else:
        picked, what = list(records), "where one case is one message size"
    if len(picked) != 1:
        raise ParseError(
            f"{len(picked)} result rows {what} (sizes in the output: {_sizes(list(records))}); "
            "run the binary with -b SIZE -e SIZE for one size"
        )
    return picked


PARSER = ParserDef(
    "nccl-tests",
    "nccl-tests result row (the text table of all_reduce_perf & co., or its -J JSON)",
    _records,
    units=UNITS,
    headline=(*_FIELDS, *(f"{k}_inplace" for k in _FIELDS)),
    signature=("size_bytes",),
    select=select_case,
)
