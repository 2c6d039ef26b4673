"""Suites that run an engine build's own benchmark command (declared in YAML, bench ``command``) — pure.

The pieces a loaded suite file becomes (``loader.py`` builds them, ``registry.resolve`` and the runner use them):

- the **argv template**: items with ``{param}`` placeholders (``{{``/``}}`` for literal braces), ``{build}`` (the
  host's deployed build, ``~/.orch/builds/current``) and ``{output}`` (a fresh file per run whose content is
  parsed instead of stdout, for tools that write results to a file). ``{build}`` and ``{output}`` are sent as the
  tokens ``{orch_build}`` / ``{orch_output}`` and resolved by the agent on the host, so a case's argv is the
  same on every host and for every build. A ``str`` parameter's value may hold ``{build}`` as well
  (``--set binary={build}/all_reduce_perf``), resolved the same way;
- the **grid**: a tree of ``cross`` (cartesian product) and ``zip`` (pairwise, equal lengths) nodes over the
  suite's list parameters; one case per point;
- the **parser** and the **metrics** it extracts (name -> field path and unit);
- **references** per host group (``*`` = every group; a group's own entry wins per metric): bounds that turn
  into pass/fail per case.

A case sent to the agent is ``{param: value, ..., "argv": [...], "env": {...}, "timeout_s": float}``; the runner
moves ``argv``/``env``/``timeout_s`` out of the stored case (:func:`command_result`), so results are keyed and
plotted by the parameters alone.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import SuiteError
from orchestrator.ingest import UNFINISHED_KEY
from orchestrator.parsers import PARSERS, InvalidMeasurement, ParseError, RequestCounts, extract
from orchestrator.parsers.base import holds_null, value_at
from orchestrator.protocol import JUDGED_KEY, Event, Metric, parse_metric
from orchestrator.suites.secrets import redact_env

BUILD_TOKEN = "{orch_build}"
OUTPUT_TOKEN = "{orch_output}"
BUILTIN_PLACEHOLDERS = {"build": BUILD_TOKEN, "output": OUTPUT_TOKEN}
CASE_COMMAND_KEYS = ("argv", "env", "timeout_s")
STORED_OUTPUT_CHARS = 16 * 1024  # what is kept of the parsed output in a stored result: enough to debug a parser
DEFAULT_PARSE_TIMEOUT_S = 30.0
"""Seconds a parser may take on one case's output (suite key ``parse_timeout_s``; orchestrator/parsepool.py stops
it there): a linear parse of a 100 MB JSON output takes ~1 s, a regex that backtracks catastrophically never ends."""
DEFAULT_MAX_FAILED_REQUESTS = 0.01
"""Share of a serving benchmark's requests that may fail before its case is an error (1%; suite key
``max_failed_requests``): a run that lost more measured a different load than the one asked for."""

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_UNIT = r"(?P<unit>[^\d\s±<>=+][^\s]*)?"
_REF_CMP = re.compile(rf"^\s*(?P<op>>=|<=|≥|≤)\s*(?P<num>{_NUM})\s*{_UNIT}\s*$")
_REF_TOL = re.compile(rf"^\s*(?P<num>{_NUM})\s*{_UNIT}\s*(?:±|\+-|\+/-)\s*(?P<tol>{_NUM})\s*(?P<pct>%)?\s*$")
_REF_RANGE = re.compile(rf"^\s*(?P<lo>{_NUM})\s*\.\.\s*(?P<hi>{_NUM})\s*{_UNIT}\s*$")


def placeholders(template: str) -> list[str]:
    """The placeholder names in ``template``. Raises ValueError on a lone brace or an empty/odd name."""
    names = []
    for m in _PLACEHOLDER.finditer(template):
        tok = m.group(0)
        if tok in ("{{", "}}"):
            continue
        if m.group(1) is None:
            raise ValueError(f"lone {tok!r} in {template!r}; write {tok * 2} for a literal brace")
        name = m.group(1)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"placeholder {{{name}}} in {template!r} is not a parameter name")
        names.append(name)
    return names


def render(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with each ``{name}`` replaced by ``values[name]`` (already checked by the loader)."""

    def sub(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok in ("{{", "}}"):
            return tok[0]
        v = values[m.group(1)]
        return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)

    return _PLACEHOLDER.sub(sub, template)


@dataclass(frozen=True)
class Bound:
    """A reference: ``lower <= value <= upper`` (either side may be open), written as ``text``."""

    text: str
    lower: float | None
    upper: float | None
    unit: str | None

    def check(self, value: float) -> bool:
        return (self.lower is None or value >= self.lower) and (self.upper is None or value <= self.upper)

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.text, "lower": self.lower, "upper": self.upper}


def parse_bound(text: str) -> Bound:
    """Parse a reference string: ``>= 120 tok/s``, ``<= 2 ms``, ``1.2 ms ±10%`` (relative), ``1.2 ms ±0.1``
    (absolute, ``+-`` also accepted) or ``100..140 tok/s``; bounds are inclusive and the unit is optional.
    Raises ValueError listing the accepted forms."""
    if m := _REF_CMP.match(text):
        x = float(m["num"])
        lower, upper = (x, None) if m["op"] in (">=", "≥") else (None, x)
        return Bound(text.strip(), lower, upper, m["unit"])
    if m := _REF_TOL.match(text):
        x, tol = float(m["num"]), float(m["tol"])
        delta = abs(x) * tol / 100 if m["pct"] else tol
        return Bound(text.strip(), x - delta, x + delta, m["unit"])
    if m := _REF_RANGE.match(text):
        lo, hi = float(m["lo"]), float(m["hi"])
        if lo > hi:
            raise ValueError(f"reference {text!r}: the range's low end is above its high end")
        return Bound(text.strip(), lo, hi, m["unit"])
    raise ValueError(
        f"reference {text!r} is not a bound; write '>= 120 tok/s', '<= 2 ms', '1.2 ms ±10%', "
        "'1.2 ms ±0.1' or '100..140 tok/s'"
    )


Grid = tuple[str, tuple["str | Grid", ...]]
"""A grid node: ``("cross" | "zip", children)``; a child is a list-parameter name or a node."""


@dataclass(frozen=True)
class MetricDef:
    """``optional``: a parser headline metric the suite did not name (``accept_length`` exists only with
    speculative decoding); a missing optional metric is left out, a missing named one fails the case."""

    name: str
    path: str
    unit: str
    optional: bool = False


@dataclass(frozen=True)
class CommandSuite:
    """Everything of a YAML suite beyond its parameters. ``source`` is the file it came from."""

    source: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    timeout_s: float
    grid: Grid | None
    parser: str
    pattern: str | None
    metrics: tuple[MetricDef, ...]
    references: Mapping[str, Mapping[str, Bound]] = field(default_factory=dict)
    scalars: tuple[str, ...] = ()
    """Case parameters that are not grid axes, in declaration order (copied into every case)."""
    max_failed_requests: float = DEFAULT_MAX_FAILED_REQUESTS
    """Largest share of failed requests (0..1) a case may have and still be a result (with a warning)."""
    public_env: frozenset[str] = frozenset()
    """``env`` names whose values are not secret (suites/secrets.py: every other value is redacted)."""
    spans_nodes: bool = False
    """On a Slurm group, one case runs across the whole allocation (``slurm/multinode.py``); elsewhere ignored."""
    parse_timeout_s: float = DEFAULT_PARSE_TIMEOUT_S
    """Seconds the parser may take on one case's outputs before the case is an error (orchestrator/parsepool.py)."""

    def cases(self, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One case per grid point: the parameters, then ``argv``, ``env``, ``timeout_s``. Raises SuiteError
        when zipped axes have different lengths."""
        points = _expand(self.grid, values) if self.grid is not None else [{}]
        out = []
        for point in points:
            case: dict[str, Any] = {name: values[name] for name in self.scalars}
            case.update(point)
            # a str parameter's value may name the build too (--set binary={build}/all_reduce_perf)
            subst = {**{k: _build_token(v) for k, v in case.items()}, **BUILTIN_PLACEHOLDERS}
            case["argv"] = [render(t, subst) for t in self.argv]
            case["env"] = {k: render(v, subst) for k, v in self.env.items()}
            case["timeout_s"] = self.timeout_s
            out.append(case)
        return out

    def references_for(self, group: str) -> dict[str, Bound]:
        """The bounds that apply to a host of ``group``: ``*``'s, overridden per metric by the group's."""
        return {**self.references.get("*", {}), **self.references.get(group, {})}

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "command": list(self.argv),
            "env": redact_env(self.env, self.public_env),
            "timeout_s": self.timeout_s,
            "grid": _grid_doc(self.grid) if self.grid is not None else None,
            "parser": self.parser,
            "metrics": [{"name": m.name, "path": m.path, "unit": m.unit} for m in self.metrics],
            "references": {g: {k: b.text for k, b in refs.items()} for g, refs in self.references.items()},
            "max_failed_requests": f"{self.max_failed_requests * 100:g}%",
            "parse_timeout_s": self.parse_timeout_s,
        }


def _build_token(value: Any) -> Any:
    return value.replace("{build}", BUILD_TOKEN) if isinstance(value, str) else value


def _grid_doc(node: Grid) -> dict[str, Any]:
    kind, children = node
    return {kind: [c if isinstance(c, str) else _grid_doc(c) for c in children]}


def _expand(node: Grid, values: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind, children = node
    parts: list[list[dict[str, Any]]] = []
    for child in children:
        if isinstance(child, str):
            axis = values[child]
            parts.append([{child: x} for x in (axis if isinstance(axis, list) else [axis])])
        else:
            parts.append(_expand(child, values))
    if kind == "zip":
        lengths = {len(p) for p in parts}
        if len(lengths) > 1:
            sizes = ", ".join(f"{_axes(c)}: {len(p)}" for c, p in zip(children, parts, strict=True))
            raise SuiteError(
                f"zipped axes have different lengths ({sizes})", "give zipped parameters the same number of values"
            )
        return [_merge(combo) for combo in zip(*parts, strict=True)]
    return [_merge(combo) for combo in itertools.product(*parts)]


def _axes(node: str | Grid) -> str:
    return node if isinstance(node, str) else "+".join(_axes(c) for c in node[1])


def _merge(dicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in dicts:
        out.update(d)
    return out


def _summary(values: list[float], unit: str) -> Metric:
    if len(values) == 1:
        return Metric(value=values[0], unit=unit)
    s = sorted(values)
    q = statistics.quantiles(s, n=10, method="inclusive")
    med = statistics.median(s)
    return Metric(value=med, unit=unit, median=med, p10=q[0], p90=q[-1], min=s[0], max=s[-1], n=len(s), samples=values)


def parse_outputs(
    suite: CommandSuite, outputs: Sequence[str], case: Mapping[str, Any] | None = None
) -> dict[str, Metric]:
    """Metrics from each run's output (several runs: median and p10/p90 over the runs, samples kept); a parser
    that selects (nccl-tests) takes the records of ``case``, the case's parameters.

    Raises ParseError naming the parser and the metrics it could not find (every named metric must be found; of
    a parser's headline metrics, taken when the suite names none, at least one). An optional metric missing
    from some runs is left out.
    """
    return parse_runs(suite, outputs, case)[0]


class RequestsError(ValueError):
    """A serving benchmark's requests failed: none completed, or more than the suite allows."""


def judge_requests(counts: Sequence[RequestCounts | None], max_failed: float) -> tuple[Metric | None, str | None]:
    """The ``failed_requests`` metric (summed over the runs) and a warning when any request failed.

    Raises RequestsError when a run completed no request ("0 of 200 requests completed") or the failed share
    is above ``max_failed`` (a fraction)."""
    known = [c for c in counts if c is not None]
    n = len(counts)
    for i, c in enumerate(counts):
        if c is not None and c.completed == 0:
            run = f" (run {i + 1} of {n})" if n > 1 else ""
            total = c.total if c.total is not None else "?"
            raise RequestsError(f"0 of {total} requests completed{run}: the tool measured nothing")
    with_failed = [c for c in known if c.failed is not None]
    failed = sum(c.failed or 0 for c in with_failed)
    if not with_failed or failed == 0:
        return (Metric(value=0.0, unit="req") if with_failed else None), None
    total = sum(c.total if c.total is not None else c.completed + (c.failed or 0) for c in with_failed)
    share = failed / total if total else 1.0
    text = f"{failed} of {total} requests failed ({share * 100:.1f}%)"
    if share > max_failed:
        raise RequestsError(
            f"{text}, above the suite's limit of {max_failed * 100:g}% (max_failed_requests): "
            "the latencies describe another load than the one asked for"
        )
    return Metric(value=float(failed), unit="req"), text


def parse_runs(
    suite: CommandSuite, outputs: Sequence[str], case: Mapping[str, Any] | None = None
) -> tuple[dict[str, Metric], list[RequestCounts | None]]:
    """:func:`parse_outputs` plus each run's request counts (None per run when the parser's tool reports none:
    the counts of the last record that has them)."""
    parsed = parse_case(suite, outputs, case)
    return parsed.metrics, parsed.counts


@dataclass(frozen=True)
class ParsedCase:
    """What a case's outputs gave: the metrics, each run's request counts, and notes for the result's warnings
    (an output that held several runs' records, of which the last was used)."""

    metrics: dict[str, Metric]
    counts: list[RequestCounts | None]
    notes: list[str]


ParseOutcome = ParsedCase | Exception
"""What parsing one case's outputs gave: :func:`parse_case`'s answer, or the exception it ended with (a
ParseError, or a parser's bug)."""


def parse_case(suite: CommandSuite, outputs: Sequence[str], case: Mapping[str, Any] | None = None) -> ParsedCase:
    """Parse each run's output of one case (see :func:`parse_outputs`). Raises ParseError (InvalidMeasurement
    when the tool says its measurement is not valid) naming the parser and the run; a request count that cannot
    be one (``failed: -3``) and, for the engine parsers (not json/jsonl/regex, whose metrics the suite defines),
    a negative metric are ParseErrors too."""
    parser = PARSERS[suite.parser]
    counts: list[RequestCounts | None] = []
    notes: list[str] = []
    paths = {m.name: m.path for m in suite.metrics}
    optional = {m.name for m in suite.metrics if m.optional}
    per_metric: dict[str, list[float]] = {m.name: [] for m in suite.metrics}
    for i, text in enumerate(outputs):
        run = f" (run {i + 1} of {len(outputs)})" if len(outputs) > 1 else ""
        try:
            records, noted = parser.parse_noted(text, suite.pattern, case)
            if parser.requests is not None:
                counts.append(next((c for r in reversed(records) if (c := parser.requests(r)) is not None), None))
        except ParseError as exc:
            raise type(exc)(f"parser {suite.parser} found {exc}{run}") from None
        notes.extend(f"{n}{run}" for n in noted)
        try:
            found, missing = extract(records, paths)
        except ParseError as exc:  # a value no metric may hold (parsers/base.py): named, never a silent miss
            raise type(exc)(f"parser {suite.parser}: {exc}{run}") from None
        if not found:
            missing = list(paths)
        missing = [n for n in missing if n not in optional or not found]
        for name in missing:  # the path is there, but what it holds is no number: say so, not "found no metric"
            held = next((v for r in reversed(records) if (v := value_at(r, paths[name])) is not None), None)
            if held is not None and not (isinstance(held, str) and not held.strip()):
                where = f"metric {name!r}" + (f" (path {paths[name]})" if paths[name] != name else "")
                shown = repr(held) if isinstance(held, str) else json.dumps(held)[:60]
                raise ParseError(
                    f"parser {suite.parser}: {where} in the output is {shown[:80]}, not a number (a metric is "
                    f"written in ASCII decimal digits: 12, -1.5, 2e3){run}"
                )
            if held is None and any(holds_null(r, paths[name]) for r in records):
                where = f"metric {name!r}" + (f" (path {paths[name]})" if paths[name] != name else "")
                raise ParseError(f"parser {suite.parser}: {where} in the output is null: the tool wrote the field "
                                 f"without a value, no measurement{run}")  # fmt: skip
        if missing:
            raise ParseError(
                f"parser {suite.parser} found no metric {', '.join(missing)} in the output{run} "
                f"(looked for {', '.join(paths[n] for n in missing)})"
            )
        negative = [name for name, v in found.items() if v < 0] if not parser.generic else []
        if negative:
            shown = ", ".join(f"{paths[name]} = {found[name]:g}" for name in negative)
            raise ParseError(
                f"parser {suite.parser} found {shown} in the output{run}: a time, throughput or count this tool "
                "reports is never negative, so the output is broken"
            )
        for name, v in found.items():
            per_metric[name].append(v)
    n = len(outputs)
    metrics = {m.name: _summary(per_metric[m.name], m.unit) for m in suite.metrics if len(per_metric[m.name]) == n}
    return ParsedCase(metrics, counts, notes)


def _tail(text: str, n: int = STORED_OUTPUT_CHARS) -> str:
    return text[-n:]


def parse_inputs(ev: Event) -> tuple[list[str], dict[str, Any]] | None:
    """The outputs (one text per timed run) and the case parameters that :func:`command_result` parses for
    ``ev``; None when it parses nothing (not a command suite's result, or its outputs stayed on the host)."""
    case = ev.case
    if ev.type != "result" or case is None or not any(k in case for k in CASE_COMMAND_KEYS):
        return None
    raw_info = ev.data.get("info")
    info: Mapping[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    outputs = info.get("outputs")
    if outputs is None and info.get("outputs_complete") is False:
        return None
    params = {k: v for k, v in case.items() if k not in CASE_COMMAND_KEYS}
    return _texts(outputs, info.get("output"), info.get("stdout")), params


def _texts(outputs: Any, main: Any, stdout: Any) -> list[str]:
    text = main if isinstance(main, str) else stdout if isinstance(stdout, str) else ""
    return [o for o in outputs if isinstance(o, str)] if isinstance(outputs, list) and outputs else [text]


def _done_cases(ev: Event) -> Event:
    """``ev`` (a done) with ``argv``/``env``/``timeout_s`` dropped from the cases it names as unfinished."""
    raw = ev.data.get(UNFINISHED_KEY)
    if not isinstance(raw, list):
        return ev
    cases = [{**u, "case": {k: v for k, v in u["case"].items() if k not in CASE_COMMAND_KEYS}}
             if isinstance(u, dict) and isinstance(u.get("case"), dict) else u for u in raw]  # fmt: skip
    if cases == raw:
        return ev
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data={**ev.data, UNFINISHED_KEY: cases})


def command_result(suite: CommandSuite, ev: Event, group: str, parsed: ParseOutcome | None = None) -> Event:
    """Turn an agent event of a command suite into what is stored (orchestrator side of the ``command`` bench).

    - ``result``: the parsed metrics are added to the agent's ``wall_ms``; the references of ``group`` are
      checked into ``info.references`` (``metric -> {"bound", "lower", "upper", "value", "pass"}``); the raw
      output is cut to its last 16 KiB (``info.output_tail``); ``info.files`` (sizes and sha256 of the outputs
      kept on the host) stays. Parsing needs ``info.outputs``, the whole text of each run: a result whose outputs
      stayed on the host (``outputs_complete: false``) and were not fetched is an error, never parsed from an
      excerpt. A parser that finds nothing turns the event into
      an ``error`` for its case (``kind: "parse"``), never a silent success. A serving benchmark's request
      counts (:func:`judge_requests`): ``failed_requests`` is stored as a metric, any failure adds a warning
      to ``info.warnings``; no request completed, or more failed than ``max_failed_requests``, is an ``error``
      (``kind: "requests"``). A tool that says its own measurement is not valid (nccl-tests counted wrong
      elements) is an ``error`` of ``kind: "invalid"`` naming the line; an output holding several runs' records
      (of which the last is used) adds a note to ``info.warnings``. A parser that fails in an unexpected way (a
      bug) turns this case into a ``parse`` error saying so; the host's other cases go on.
      ``parsed``: the parse of :func:`parse_inputs`' texts made elsewhere (in a worker process bounded in time
      and memory, orchestrator/parsepool.py), or the exception it ended with; None parses here, unbounded.
    - any event with a case: ``argv``/``env``/``timeout_s`` move from the case to ``info.command`` (results) or
      ``command`` (errors), so the stored case is the parameters alone; so too from each case a ``done`` names as
      started without a row (``ingest.UNFINISHED_KEY``: orch stores one error row for them, keyed by parameters
      like the case's other rows, and a secret ``env`` value never reaches it).
    """
    if ev.type == "done":
        return _done_cases(ev)
    case = ev.case
    if case is None or not any(k in case for k in CASE_COMMAND_KEYS):
        return ev
    data = dict(ev.data)
    data["case"] = {k: v for k, v in case.items() if k not in CASE_COMMAND_KEYS}
    argv = case.get("argv")
    if ev.type != "result":
        if ev.type == "error":
            data["command"] = argv
        return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)
    raw_info = data.get("info")
    info: dict[str, Any] = dict(raw_info) if isinstance(raw_info, dict) else {}
    outputs = info.pop("outputs", None)
    unverified = info.pop("outputs_unverified", None)
    if outputs is None and info.get("outputs_complete") is False:
        # The outputs stayed on the host (the runner fetches them before parsing): never parse an excerpt, nor a
        # fetched file that is not the one the result line describes (``agentctl.fetched_outputs_differ``).
        message = str(unverified) if unverified else \
            "the full outputs stayed on the host and were not fetched (an imported spool brings none): not parsed; " \
            "orch runs logs shows them while the host keeps them"
        err = {"message": message, "case": data["case"], "kind": "parse", "info": info}  # fmt: skip
        return _judged_error(ev, err)
    info.pop("outputs_complete", None)
    main = info.pop("output", None)
    stdout = info.pop("stdout", None)
    text = main if isinstance(main, str) else stdout if isinstance(stdout, str) else ""
    texts = _texts(outputs, main, stdout)
    info["command"] = argv
    info["parser"] = suite.parser
    info["output_tail"] = _tail(text)
    if isinstance(stdout, str) and main is not None:
        info["stdout_tail"] = _tail(stdout, 4096)
    try:
        if parsed is None:
            parsed = parse_case(suite, texts, data["case"])
        if isinstance(parsed, BaseException):
            raise parsed
        case_parsed = parsed
        failed, warning = judge_requests(case_parsed.counts, suite.max_failed_requests)
    except (ParseError, RequestsError) as exc:
        last = [ln for ln in text.strip().splitlines() if ln.strip()][-3:]
        shown = " | ".join(ln[:200] for ln in last) if last else "(empty output)"
        kind = "parse" if isinstance(exc, ParseError) else "requests"
        message = f"{exc}; last output lines: {shown}" if kind == "parse" else f"parser {suite.parser}: {exc}"
        if isinstance(exc, InvalidMeasurement):
            kind, message = "invalid", str(exc)
        err = {"message": message, "case": data["case"], "kind": kind, "info": info}
        return _judged_error(ev, err)
    except Exception as exc:  # noqa: BLE001 - a parser bug costs this case only, never the host's other cases
        err = {"message": f"parser {suite.parser} failed on this output ({type(exc).__name__}: {exc}); this is a "
               "bug in orch, please report it with the output kept in info.output_tail",
               "case": data["case"], "kind": "parse", "info": info}  # fmt: skip
        return _judged_error(ev, err)
    metrics = {**_agent_metrics(data), **case_parsed.metrics}
    if failed is not None:
        metrics["failed_requests"] = failed
    for note in [*case_parsed.notes, *([warning] if warning is not None else [])]:
        info["warnings"] = [*info.get("warnings", []), note]
    refs = {}
    for name, bound in suite.references_for(group).items():
        if name in metrics:
            value = metrics[name].value
            refs[name] = {**bound.to_dict(), "value": value, "pass": bound.check(value)}
    if refs:
        info["references"] = refs
    data["metrics"] = {k: m.to_dict() for k, m in metrics.items()}
    data["info"] = info
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)


def _judged_error(ev: Event, err: dict[str, Any]) -> Event:
    err["info"] = {**err["info"], JUDGED_KEY: True, "error_kind": err["kind"]}
    if ev.case_index is not None:
        err["case_index"] = ev.case_index
    return Event(seq=ev.seq, type="error", ts=ev.ts, v=ev.v, data=err)


def _agent_metrics(data: Mapping[str, Any]) -> dict[str, Metric]:
    raw = data.get("metrics")
    if not isinstance(raw, dict):
        return {}
    out = {}
    for name, m in raw.items():
        try:
            out[str(name)] = parse_metric(str(name), m)
        except ValueError:
            continue  # enrich_event reports malformed agent metrics
    return out
