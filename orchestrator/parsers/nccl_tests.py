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
in-place ones as ``time_us_inplace``, ``algbw_gbps_inplace``, ``busbw_gbps_inplace``, ``wrong_inplace`` (older
tables: ``max_error`` / ``max_error_inplace`` instead of ``wrong``); a case
(one message size) takes the one record of its ``size_bytes`` (a case without that parameter: the output's only
record), and any other count is a ParseError naming the sizes found.

Values are checked where they can be wrong: a negative time or bandwidth, a size or count that is not a whole
number from 0 to 2^63 (``MAX_SIZE``), a ``-J`` field of another shape — each a ParseError naming the line or
the field. A case whose row counted wrong elements (``#wrong`` / ``nwrong`` > 0) or whose output's footer says
``# Out of bounds values : N FAILED`` is an InvalidMeasurement (``select_case``): nccl-tests itself says the
collective returned wrong data, so none of its figures is a measurement.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.parsers.base import InvalidMeasurement, ParseError, ParserDef, Record
from orchestrator.protocol import Unholdable, checked_float
from orchestrator.textlines import output_lines

Placement = Literal["out-of-place", "in-place"]
PLACEMENTS: tuple[Placement, Placement] = ("out-of-place", "in-place")

_NTHREAD_RE = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+\s+\[[^\]]*\]\s+(.*?)\s*$")
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s*(\S*)")
MAX_SIZE = 2**63  # sizes and counts are size_t in nccl-tests; anything larger is not an output of it
_VERSION_RE = re.compile(r"^#\s*nccl-tests version\s+\S+.*\bnccl-library=(\d+)")


@dataclass(frozen=True)
class NcclRow:
    """One size, one placement. ``wrong`` (#wrong: elements that differ from the expected result) is None when
    the run did not validate (``-c 0``) or the table predates that column; ``max_error`` is the older tables'
    ``error`` column (largest absolute deviation from the expected result). ``table`` counts the column-title
    lines seen so far (1 for the first table) and ``line`` is the 1-based line in the output (text only);
    ``result_index`` is the row's index in the JSON ``results`` list (JSON only)."""

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
    max_error: float | None = field(default=None, compare=False)
    table: int = field(default=1, compare=False)
    line: int | None = field(default=None, compare=False)
    result_index: int | None = field(default=None, compare=False)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """The row in the shape of orch's ``allreduce`` result metrics (one value each, no samples)."""
        out: dict[str, dict[str, Any]] = {
            "time_us": {"value": self.time_us, "unit": "us"},
            "algbw_gbps": {"value": self.algbw_gbps, "unit": "GB/s"},
            "busbw_gbps": {"value": self.busbw_gbps, "unit": "GB/s"},
        }
        if self.wrong is not None:
            out["wrong"] = {"value": self.wrong, "unit": "elements"}
        if self.max_error is not None:
            out["max_error"] = {"value": self.max_error, "unit": ""}
        return out


@dataclass(frozen=True)
class NcclReport:
    """A parsed run: rows in output order (per size out-of-place first), the rank count, device names, the
    footer figures and the NCCL library version code (``22703`` = 2.27.3), each None when the output does not say.
    ``out_of_bounds_failed``: the footer said ``FAILED`` (or the count is above 0); ``out_of_bounds_line``: its
    1-based line (text only)."""

    source: Literal["text", "json"]
    rows: tuple[NcclRow, ...]
    ranks: int | None
    devices: tuple[str, ...]
    avg_busbw_gbps: float | None
    out_of_bounds: int | None
    nccl_version: str | None
    out_of_bounds_failed: bool = False
    out_of_bounds_line: int | None = None

    def by_placement(self, placement: Placement) -> list[NcclRow]:
        return [r for r in self.rows if r.placement == placement]


def _num(token: str, what: str, line_no: int, nonneg: bool = False) -> float:
    try:
        x = checked_float(token)
    except ValueError:
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is not a number") from None
    if isinstance(x, Unholdable) and x.tiny:
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is below the smallest double (it would be 0)")
    if not math.isfinite(x):
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is not finite")
    if nonneg and x < 0:
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is negative; a time or bandwidth is >= 0")
    return x


def _int(token: str, what: str, line_no: int, nonneg: bool = False) -> int:
    x = _num(token, what, line_no, nonneg)
    if x != int(x):
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is not a whole number")
    n = int(token) if token.isdecimal() else int(x)
    if abs(n) > MAX_SIZE:
        raise ParseError(f"nccl-tests line {line_no}: {what} {token!r} is above 2^63, not a size or count")
    return n


#: Column titles of the text table, by version, and the field each one is (NVIDIA/nccl-tests ``src/common.cu``
#: and ``util.cu``; ROCm/rccl-tests prints the same titles): 2017-2018 ``bytes N type op time algbw busbw res``;
#: 2018-2019 ``size count type redop time algbw busbw error`` (``error``: the largest absolute deviation from the
#: expected result, a float); since 2.x with ``root`` the last column is ``#wrong`` (the count of wrong elements,
#: ``N/A`` without validation). Per-iteration timing adds ``i_min i_max i_p99 i_cv%`` to each block (kept out).
_LEAD_TITLES = {
    "size": "size", "bytes": "size", "count": "count", "n": "count", "elements": "count", "type": "type",
    "redop": "redop", "op": "redop", "root": "root",
}  # fmt: skip
_BLOCK_TITLES = {
    "time": "time", "algbw": "algbw", "busbw": "busbw",
    "#wrong": "wrong", "wrong": "wrong", "error": "error", "res": "error",
}  # fmt: skip


@dataclass(frozen=True)
class _Header:
    """The column layout one title line declares: the leading columns (size, count, ...), then one block of
    per-placement columns per placement, in the order the title line's banner names them."""

    line_no: int
    titles: tuple[str, ...]
    lead: tuple[str, ...]
    block: tuple[str, ...]
    placements: tuple[Placement, ...]

    def describe(self) -> str:
        return f"the column titles on line {self.line_no} ({' '.join(self.titles)})"


def _header(tokens: list[str], banner: str | None, line_no: int) -> _Header | None:
    """The layout of a ``#`` line that titles the columns (it names time, algbw and busbw), else None.

    Raises ParseError when the line is a title line orch cannot map (unknown leading column, blocks that differ).
    """
    low = [t.lower() for t in tokens]
    if not {"time", "algbw", "busbw"} <= set(low) or "size" not in low and "bytes" not in low:
        return None
    first = low.index("time")
    lead_titles, rest = low[:first], low[first:]
    unknown = [t for t in lead_titles if t not in _LEAD_TITLES]
    if unknown or "size" not in [_LEAD_TITLES[t] for t in lead_titles]:
        raise ParseError(
            f"nccl-tests line {line_no}: column titles {' '.join(tokens)!r} are not a layout orch knows "
            f"(leading columns must be among {', '.join(sorted(_LEAD_TITLES))})"
        )
    starts = [i for i, t in enumerate(rest) if t == "time"]
    blocks = [tuple(rest[a:b]) for a, b in zip(starts, [*starts[1:], len(rest)], strict=True)]
    if len(blocks) > 2 or len(set(blocks)) != 1:
        raise ParseError(
            f"nccl-tests line {line_no}: column titles {' '.join(tokens)!r} do not hold one or two equal "
            "blocks of time algbw busbw ..."
        )
    order: tuple[Placement, ...] = PLACEMENTS
    if banner is not None and 0 <= banner.find("in-place") < banner.find("out-of-place"):
        order = ("in-place", "out-of-place")
    return _Header(
        line_no,
        tuple(tokens),
        tuple(_LEAD_TITLES[t] for t in lead_titles),
        tuple(_BLOCK_TITLES.get(t, "") for t in blocks[0]),
        order[: len(blocks)],
    )


def _row_values(
    cols: Sequence[str], hdr: _Header, line_no: int
) -> tuple[float, float, float, int | None, float | None]:
    """(time, algbw, busbw, wrong, error) of one placement's block."""
    v = dict(zip(hdr.block, cols, strict=True))
    wrong = None if v.get("wrong", "N/A") == "N/A" else _int(v["wrong"], "#wrong", line_no, nonneg=True)
    error = None if v.get("error", "N/A") == "N/A" else _num(v["error"], "error", line_no, nonneg=True)
    return (
        _num(v["time"], "time", line_no, nonneg=True),
        _num(v["algbw"], "algbw", line_no, nonneg=True),
        _num(v["busbw"], "busbw", line_no, nonneg=True),
        wrong,
        error,
    )


def parse_text(text: str) -> NcclReport:
    """Parse the stdout of an nccl-tests (or rccl-tests) binary.

    Each result line is read by the column titles printed above it (older tables without ``root`` and with a
    float ``error`` column, newer ones with ``root`` and ``#wrong``, per-iteration columns): a line whose first
    two tokens are integers is a result line and must have exactly the columns its titles name (or only the
    last block: a trace-replay line leaves the out-of-place block blank). Raises ParseError naming the line when
    a result line comes before any column titles or does not fit them, a value is not a number, or no result
    line is found. Each title line starts a new table (``NcclRow.table``): output holding several tables comes
    from several separate jobs.
    """
    rows: list[NcclRow] = []
    devices: dict[int, str] = {}
    threads_gpus: int | None = None
    avg: float | None = None
    oob: int | None = None
    oob_failed, oob_line = False, None
    version: str | None = None
    hdr: _Header | None = None
    banner: str | None = None
    tables = 0
    for no, raw in enumerate(output_lines(text), 1):
        line = raw.rstrip()
        if line.startswith("#"):
            if m := _NTHREAD_RE.match(line):
                threads_gpus = int(m.group(1)) * int(m.group(2))
            elif m := _RANK_RE.match(line):
                devices[int(m.group(1))] = m.group(2)
            elif m := _AVG_RE.match(line):
                avg = _num(m.group(1), "average bus bandwidth", no, nonneg=True)
            elif m := _OOB_RE.match(line):
                oob = _int(m.group(1), "out-of-bounds count", no, nonneg=True)
                oob_failed, oob_line = oob > 0 or m.group(2).upper() == "FAILED", no
            elif m := _VERSION_RE.match(line):
                version = m.group(1)
            elif "out-of-place" in line or "in-place" in line:
                banner = line
            elif (h := _header(line[1:].split(), banner, no)) is not None:
                hdr, banner, tables = h, None, tables + 1
            continue
        tok = line.split()
        if len(tok) < 2 or not tok[0].isdigit() or not tok[1].isdigit():
            continue  # NCCL INFO lines, blank lines
        if hdr is None:
            raise ParseError(
                f"nccl-tests line {no}: a result line before any column titles "
                "('#  size  count  type  redop  root  time  algbw  busbw  #wrong ...'); print the whole table"
            )
        n_lead, n_block = len(hdr.lead), len(hdr.block)
        full = n_lead + n_block * len(hdr.placements)
        if len(tok) == full:
            blocks = [(p, tok[n_lead + i * n_block : n_lead + (i + 1) * n_block]) for i, p in enumerate(hdr.placements)]
        elif len(hdr.placements) == 2 and len(tok) == n_lead + n_block:
            blocks = [(hdr.placements[1], tok[n_lead:])]  # trace replay: the first block is blank
        else:
            raise ParseError(
                f"nccl-tests line {no}: {len(tok)} columns where {hdr.describe()} name {full}: "
                f"{' '.join(tok)!r}"
            )
        lead = dict(zip(hdr.lead, tok[:n_lead], strict=True))
        size = _int(lead["size"], "size", no, nonneg=True)
        count = _int(lead.get("count", "0"), "count", no, nonneg=True)
        root = _int(lead["root"], "root", no) if "root" in lead else -1
        for placement, cols in blocks:
            time_us, algbw, busbw, wrong, error = _row_values(cols, hdr, no)
            rows.append(
                NcclRow(
                    size_bytes=size,
                    count=count,
                    type=lead.get("type", ""),
                    redop=lead.get("redop", ""),
                    root=root,
                    placement=placement,
                    time_us=time_us,
                    algbw_gbps=algbw,
                    busbw_gbps=busbw,
                    wrong=wrong,
                    max_error=error,
                    table=tables,
                    line=no,
                )
            )
    if not rows:
        raise ParseError("no nccl-tests result line found (expected 'size count type redop root time ...')")
    ranks = len(devices) if devices else threads_gpus
    devs = tuple(devices[r] for r in sorted(devices))
    return NcclReport("text", tuple(rows), ranks, devs, avg, oob, version, oob_failed, oob_line)


def _get(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in doc:
        raise ParseError(f"nccl-tests JSON: {where} has no {key!r}")
    return doc[key]


def _float(v: Any, where: str, nonneg: bool = True) -> float:
    if isinstance(v, Unholdable) and v.tiny:
        raise ParseError(f"nccl-tests JSON: {where} is {v.text}, below the smallest double (it would be 0)")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ParseError(f"nccl-tests JSON: {where} must be a finite number, got {_shown(v)}")
    if nonneg and v < 0:
        raise ParseError(f"nccl-tests JSON: {where} is {v!r}, negative; a time, bandwidth or count is >= 0")
    return float(v)


def _whole(v: Any, where: str) -> int:
    """A size, count or wrong-element count: a non-negative integer up to 2^63 (nccl-tests writes ``size_t``;
    ``nwrong`` as a float with zero decimals, so a whole float is accepted)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v > MAX_SIZE or v != int(v):
        raise ParseError(f"nccl-tests JSON: {where} must be a whole number from 0 to 2^63, got {_shown(v)}")
    return int(v)


def _shown(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (dict, list, str, int, float, bool)) or v is None else repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(v: Any, where: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ParseError(f"nccl-tests JSON: {where} must be a string, got {_shown(v)}")
    return v


def _root(v: Any, where: str) -> int:
    """``root`` is written as a padded string (``"    -1"``); an integer is taken as well."""
    if v is None:
        return -1
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*-?\d{1,10}\s*", v):
        return int(v)
    if isinstance(v, str) and not v.strip():
        return -1
    raise ParseError(f"nccl-tests JSON: {where} must be a rank number such as \"    -1\", got {_shown(v)}")


def _block(body: Any, where: str) -> tuple[float, float, float, int | None]:
    """(time µs, algbw, busbw, nwrong) of one ``out_of_place`` / ``in_place`` object."""
    if not isinstance(body, dict):
        raise ParseError(
            f"nccl-tests JSON: {where} must be an object with time, alg_bw, bus_bw and nwrong, got {_shown(body)}"
        )
    time_key = "time" if "time" in body else "cpu_time"
    nwrong = body.get("nwrong")
    return (
        _float(_get(body, time_key, where), f"{where}.{time_key}"),
        _float(_get(body, "alg_bw", where), f"{where}.alg_bw"),
        _float(_get(body, "bus_bw", where), f"{where}.bus_bw"),
        None if nwrong is None else _whole(nwrong, f"{where}.nwrong"),
    )


def _ranks(config: Any) -> tuple[int | None, tuple[str, ...]]:
    """(rank count, device names) of the ``config`` object; raises ParseError on a shape nccl-tests never writes."""
    if config is None:
        return None, ()
    if not isinstance(config, dict):
        raise ParseError(f"nccl-tests JSON: config must be an object, got {_shown(config)}")
    devices = config.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise ParseError(
            f"nccl-tests JSON: config.devices must be a list of objects (one per process), got {_shown(devices)}"
        )
    nthreads, ngpus = config.get("nthreads"), config.get("ngpus")
    for key, v in (("nthreads", nthreads), ("ngpus", ngpus)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ParseError(f"nccl-tests JSON: config.{key} must be a whole number >= 0, got {_shown(v)}")
    names = tuple(str(d.get("device_info", "")) for d in devices)
    if devices and isinstance(nthreads, int) and isinstance(ngpus, int):
        return len(devices) * nthreads * ngpus, names
    return None, names


def parse_json(text: str) -> NcclReport:
    """Parse an nccl-tests ``-J`` file. Raises ParseError (naming the field and the shape expected) when it is
    not that JSON: a result that is not an object, a size that is not a whole number from 0 to 2^63, a negative
    or non-numeric time or bandwidth, an ``out_of_place`` that is not an object, a ``config`` of another shape."""
    try:
        doc = json.loads(text, parse_float=checked_float)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"nccl-tests JSON: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError("nccl-tests JSON: expected an object with a 'results' list")
    rows: list[NcclRow] = []
    for i, rec in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(rec, dict):
            raise ParseError(f"nccl-tests JSON: {where} must be an object, got {_shown(rec)}")
        size = _whole(_get(rec, "size", where), f"{where}.size")
        count = _whole(_get(rec, "count", where), f"{where}.count")
        root = _root(rec.get("root"), f"{where}.root")
        type_, redop = _text(rec.get("type"), f"{where}.type"), _text(rec.get("redop"), f"{where}.redop")
        for placement, key in zip(PLACEMENTS, ("out_of_place", "in_place"), strict=True):
            if rec.get(key) is None:
                continue
            time_us, algbw, busbw, wrong = _block(rec[key], f"{where}.{key}")
            rows.append(
                NcclRow(size, count, type_, redop, root, placement, time_us, algbw, busbw, wrong, result_index=i)
            )
    if not rows:
        raise ParseError("nccl-tests JSON: 'results' holds no measurement")
    ranks, devices = _ranks(doc.get("config"))
    avg_doc = doc.get("average_bus_bandwidth")
    if avg_doc is not None and not isinstance(avg_doc, dict):
        raise ParseError(f"nccl-tests JSON: average_bus_bandwidth must be an object, got {_shown(avg_doc)}")
    avg = avg_doc.get("bandwidth") if avg_doc is not None else None
    oob_doc = doc.get("out_of_bounds")
    if oob_doc is not None and not isinstance(oob_doc, dict):
        raise ParseError(f"nccl-tests JSON: out_of_bounds must be an object with a count, got {_shown(oob_doc)}")
    oob_count = oob_doc.get("count") if oob_doc is not None else None
    oob = _whole(oob_count, "out_of_bounds.count") if oob_count is not None else None
    version = doc.get("nccl_version")
    return NcclReport(
        "json",
        tuple(rows),
        ranks,
        devices,
        _float(avg, "average_bus_bandwidth.bandwidth") if avg is not None else None,
        oob,
        str(version) if isinstance(version, (int, str)) and not isinstance(version, bool) else None,
        bool(oob),
    )


def parse(text: str) -> NcclReport:
    """JSON (``-J``) when the text is a JSON object, else the stdout table."""
    return parse_json(text) if text.lstrip().startswith("{") else parse_text(text)


# -- as a suite parser --------------------------------------------------------------------------------------------

_FIELDS = ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
UNITS = {"time_us": "us", "algbw_gbps": "GB/s", "busbw_gbps": "GB/s", "wrong": "elements", "size_bytes": "B"}
UNITS |= {"max_error": ""}
UNITS |= {f"{k}_inplace": UNITS[k] for k in (*_FIELDS, "max_error")}
_TABLE, _LINE, _AT, _OOB = "_table", "_line", "_at", "_oob"  # where a record came from, the footer; not metrics
_PRIVATE = (_TABLE, _LINE, _AT, _OOB)


def _records(text: str, pattern: str | None) -> list[Record]:
    """One record per result line / JSON result (size): out-of-place fields plain, in-place ones ``*_inplace``."""
    try:
        report = parse(text)
    except ParseError as exc:
        raise ParseError(f"no usable nccl-tests output ({exc})") from None
    out: list[dict[str, Any]] = []
    oob = None
    if report.out_of_bounds_failed:
        at = f"line {report.out_of_bounds_line}" if report.out_of_bounds_line else "out_of_bounds.count"
        oob = f"{at}: '# Out of bounds values : {report.out_of_bounds} FAILED'"
    for row in report.rows:
        suffix = "" if row.placement == "out-of-place" else "_inplace"
        cur = out[-1] if out else None
        if (
            cur is None
            or cur["size_bytes"] != row.size_bytes
            or cur[_TABLE] != row.table
            or f"time_us{suffix}" in cur
        ):
            cur = {"size_bytes": row.size_bytes, "count": row.count, "type": row.type, "redop": row.redop}
            cur[_TABLE], cur[_LINE] = row.table, row.line
            cur[_AT] = f"line {row.line}" if row.line is not None else f"results[{row.result_index}]"
            cur[_OOB] = oob
            out.append(cur)
        cur[f"time_us{suffix}"] = row.time_us
        cur[f"algbw_gbps{suffix}"] = row.algbw_gbps
        cur[f"busbw_gbps{suffix}"] = row.busbw_gbps
        if row.wrong is not None:
            cur[f"wrong{suffix}"] = row.wrong
        if row.max_error is not None:
            cur[f"max_error{suffix}"] = row.max_error
    return list(out)


def _sizes(records: Sequence[Record]) -> str:
    sizes = [str(r["size_bytes"]) for r in records]
    return ", ".join(sizes) if len(sizes) <= 8 else f"{', '.join(sizes[:4])}, ..., {', '.join(sizes[-2:])}"


def _judge(record: Record) -> None:
    """Raise InvalidMeasurement when nccl-tests itself says the case's figures are not a measurement: its row
    counted wrong elements (``#wrong`` / ``nwrong`` > 0, either placement), or the run's footer says out-of-bounds
    values were found (``# Out of bounds values : N FAILED``; N is the sum of ``#wrong`` over every row). A
    collective that returns wrong data may skip work, so its time and bandwidth describe nothing."""
    wrong = {p: record.get(f"wrong{s}") for p, s in (("out-of-place", ""), ("in-place", "_inplace"))}
    bad = {p: n for p, n in wrong.items() if isinstance(n, int) and n > 0}
    at, size = record.get(_AT), record.get("size_bytes")
    if bad:
        counts = " and ".join(f"{n} {p}" for p, n in bad.items())
        raise InvalidMeasurement(
            f"nccl-tests {at} (size {size} B): #wrong is {counts} — the collective returned wrong elements, so "
            "its time and bandwidth are not a valid measurement; check the GPUs, the NCCL build and the network"
        )
    if record.get(_OOB):
        raise InvalidMeasurement(
            f"nccl-tests {record[_OOB]} — the run returned wrong elements (for a size other than {size} B "
            "or in a placement not printed), so none of its figures is a valid measurement; check the GPUs, "
            "the NCCL build and the network"
        )


def select_case(records: Sequence[Record], case: Mapping[str, Any]) -> list[Record]:
    """The one record of the case's ``size_bytes`` (no such parameter: the output's only record). Raises
    ParseError naming the count, the sizes found and a hint that fits (InvalidMeasurement when nccl-tests counted
    wrong elements, see :func:`_judge`): rows of one size from several tables
    (several separate jobs each printed theirs) are not fixed by ``-b``/``-e``; rows of several sizes are."""
    size = case.get("size_bytes")
    if isinstance(size, int) and not isinstance(size, bool):
        picked = [r for r in records if r["size_bytes"] == size]
        what = f"for size_bytes={size}"
    else:
        picked, what = list(records), "where one case is one message size"
    if len(picked) == 1:
        _judge(picked[0])
        return [{k: v for k, v in picked[0].items() if k not in _PRIVATE}]
    tables = sorted({r.get(_TABLE, 1) for r in picked})
    if len(picked) > 1 and len({r["size_bytes"] for r in picked}) == 1 and len(tables) > 1:
        lines = ", ".join(str(r[_LINE]) for r in picked if r.get(_LINE) is not None)
        hint = (
            f"the output holds {len(tables)} separate tables (rows on lines {lines}): several processes each ran "
            "their own test; run one job per case (nccl-tests built with MPI=1 under mpirun, or one process "
            "with -g/-t for several GPUs)"
        )
    elif picked:
        hint = "run the binary with -b SIZE -e SIZE for one size"
    else:
        hint = "the command did not measure that size: pass the case's size to the binary "
        hint += "(-b {size_bytes} -e {size_bytes})"
    raise ParseError(f"{len(picked)} result rows {what} (sizes in the output: {_sizes(list(records))}); {hint}")


PARSER = ParserDef(
    "nccl-tests",
    "nccl-tests result row (the text table of all_reduce_perf & co., or its -J JSON)",
    _records,
    units=UNITS,
    headline=(*_FIELDS, *(f"{k}_inplace" for k in _FIELDS), "max_error", "max_error_inplace"),
    signature=("size_bytes",),
    select=select_case,
)
