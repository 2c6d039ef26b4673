"""Suites declared in YAML: the file schema, loading with file:line:key errors, and the registry of built-in plus
user suites — pure except for reading the files.

Where suite files come from (``*.yaml``/``*.yml``, not recursive), all into one registry with the built-ins:
the ones shipped in this package (``orchestrator/suites/*.yaml``), ``--suite-dir DIR`` (repeatable),
``ORCH_SUITE_DIR``, and the inventory's ``suite_dir:`` (relative to the inventory file). A name defined twice is
an error naming both files.

A suite file::

    name: fake-decode                      # letters, digits, '.', '_', '-'
    description: decode throughput of my engine build
    command: ["{build}/bin/bench", "--batch", "{batch}", "--out", "{output}"]   # argv, no shell
    params:
      batch: {type: list, default: [1, 4, 16, 64], help: "concurrent sequences"}
      input_len: {type: int, default: 1024, min: 1, help: "prompt length, tokens"}
      mode: {type: str, default: fast, choices: [fast, slow], help: "engine mode"}
    grid: {cross: [batch]}                 # or {zip: [a, b]}, nested: {cross: [a, {zip: [b, c]}]}
    sweep: batch                           # the x axis of plots (default: the only list parameter)
    timeout_s: 600                         # per run of the command
    repeat: 1                              # runs per case (--repeat); metrics become median and p10/p90
    warmup: 0                              # untimed runs before them
    env: {HF_TOKEN: "hf_...", CUDA_VISIBLE_DEVICES: {value: "0", public: true}}   # placeholders allowed;
                                           # values are secrets (redacted outside the host) unless public
    max_failed_requests: 1%                # serving parsers: more failed requests make the case an error
    parse_timeout_s: 30                    # the parser's time on one case's output; past it the case is an error
    spans_nodes: false                     # true: on a Slurm group one case runs across the whole allocation
                                           # (srun --nodes=N, e.g. nccl-tests between nodes), stored once
    parser: sglang-one-batch               # or {name: regex, pattern: 'tput: (?P<tput>[\\d.]+)'}
    metrics:                               # name -> {path, unit}; engine parsers know their units
      decode_tput: {path: median_decode_throughput}
    references:                            # host group (or "*") -> metric -> bound
      b300: {decode_tput: ">= 1000 tok/s"}
    plot: [decode_tput]                    # headline metrics for the dashboard and `orch runs plot`
                                           # (default: every metric above; parameters are never plotted)
    presets:
      quick: {description: "one batch size", values: {batch: [1]}}

Types: ``int``, ``float``, ``str``, ``list`` (a list of integers: a YAML list, ``"1..64"`` doubling like
``--set``, or ``{start, stop, step}`` / ``{start, stop, factor}``, both ends included). Placeholders: any
parameter, ``{build}`` (the host's ``~/.orch/builds/current``), ``{output}`` (a fresh file per run, parsed
instead of stdout); ``{{``/``}}`` for literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator import yamllines
from orchestrator.errors import SuiteError
from orchestrator.parsers import PARSERS
from orchestrator.suites.command import (
    BUILTIN_PLACEHOLDERS,
    CASE_COMMAND_KEYS,
    DEFAULT_PARSE_TIMEOUT_S,
    Bound,
    CommandSuite,
    Grid,
    MetricDef,
    parse_bound,
    placeholders,
)
from orchestrator.suites.regexcheck import nested_quantifier
from orchestrator.suites.registry import (
    MAX_REPEAT,
    RUN_PARAMS,
    Param,
    ParamType,
    ParamValue,
    Plot,
    Preset,
    Registry,
    SuiteDef,
)
from orchestrator.suites.registry import builtin_registry as _builtin_registry
from orchestrator.suites.registry import run_params as _run_params

#: Longest a suite's command may run per case: one week. Longer is a typo (.inf, a value in ms), and a
#: deadline that never comes would leave a hung command holding its GPUs for ever.
MAX_TIMEOUT_S = 7 * 24 * 3600.0
#: Longest a parser may take on one case's output: an hour. Past that no parse is linear, and the run waits on it.
MAX_PARSE_TIMEOUT_S = 3600.0
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # the store's rule for metric and parameter names
SUITE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
RESERVED = frozenset({*RUN_PARAMS, *CASE_COMMAND_KEYS, *BUILTIN_PLACEHOLDERS})
AGENT_METRICS = {"wall_ms": "ms"}  # what the agent's command bench itself measures
TOP_KEYS = (
    "name, description, command, params, grid, sweep, timeout_s, repeat, warmup, env, parser, metrics, "
    "references, presets, max_failed_requests, parse_timeout_s, plot, spans_nodes"
)
_TYPES: dict[str, ParamType] = {"int": "int", "float": "float", "str": "str", "list": "int-list"}


class ParamSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["int", "float", "str", "list"]
    default: Any
    help: str = Field(min_length=1)
    choices: list[str] | None = None
    min: float | None = None
    max: float | None = None


class RangeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: int = Field(ge=1)
    stop: int = Field(ge=1)
    step: int | None = Field(default=None, ge=1)
    factor: int | None = Field(default=None, ge=2)


class ParserSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    pattern: str | None = None


class EnvSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: str
    public: bool = False


class MetricSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    unit: str | None = None


class PresetSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    values: dict[str, Any]


class SuiteFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    command: list[str] = Field(min_length=1)
    params: dict[str, ParamSpec] = Field(default_factory=dict)
    grid: dict[str, Any] | None = None
    sweep: str | None = None
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_TIMEOUT_S)
    repeat: int = Field(default=1, ge=1, le=MAX_REPEAT)
    warmup: int = Field(default=0, ge=0, le=MAX_REPEAT)
    env: dict[str, str | EnvSpec] = Field(default_factory=dict)
    parser: ParserSpec
    metrics: dict[str, MetricSpec | None] = Field(default_factory=dict)
    references: dict[str, dict[str, str]] = Field(default_factory=dict)
    presets: dict[str, PresetSpec] = Field(default_factory=dict)
    max_failed_requests: str = "1%"
    parse_timeout_s: float = Field(default=DEFAULT_PARSE_TIMEOUT_S, gt=0, le=MAX_PARSE_TIMEOUT_S)
    plot: list[str] | None = None
    spans_nodes: bool = False

    @field_validator("parser", mode="before")
    @classmethod
    def _parser_name(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v


# -- YAML with line numbers ---------------------------------------------------------------------------------------


class _Where:
    """Builds SuiteErrors that name ``file:line: key``."""

    def __init__(self, path: str, doc: Any) -> None:
        self.path, self.doc = path, doc

    def error(self, loc: Sequence[int | str], problem: str, fix: str) -> SuiteError:
        key = _key_text(loc)
        line = yamllines.line_of(self.doc, loc)
        where = f"{self.path}:{line}" if line else self.path
        return SuiteError(f"{where}: {key + ': ' if key else ''}{problem}", fix)


def _key_text(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_SECTION_KEYS = {
    "params": "type, default, help, choices, min, max",
    "parser": "name, pattern",
    "metrics": "path, unit",
    "presets": "description, values",
}


def _pydantic_fix(err: Any) -> str:
    kind, loc = err.get("type", ""), tuple(err.get("loc") or ())
    if kind == "extra_forbidden":
        known = _SECTION_KEYS.get(str(loc[0]), TOP_KEYS) if len(loc) > 1 else TOP_KEYS
        return f"remove or rename {loc[-1]!r}; the keys accepted here are: {known}"
    if kind == "missing":
        return f"add {loc[-1]!r} (see `orch suites show sglang-one-batch` for a complete suite)"
    if kind == "literal_error" and loc[-1] == "type":
        return "a parameter's type is int, float, str or list"
    if loc and loc[0] == "command":
        return 'command is a list of strings (argv, no shell), e.g. ["{build}/bin/bench", "--batch", "{batch}"]'
    return "fix the value's type; see the suite file format in docs/suites.md"


# -- loading ------------------------------------------------------------------------------------------------------


def parse_suite(text: str, path: str = "suite.yaml") -> SuiteDef:
    """A suite file's text as a SuiteDef (bench ``command``).

    Raises:
        SuiteError: ``path:line: key: problem`` with the fix as hint — bad YAML, unknown key, wrong type,
            unknown parser or placeholder, bad reference string, inconsistent grid/sweep/metrics.
    """
    try:
        doc = yamllines.load(text)
    except yamllines.DuplicateKeyError as exc:
        raise SuiteError(f"{path}:{exc.line}: {exc.key}: duplicate key", "remove one of the two entries") from None
    except yamllines.YamlNumberError as exc:
        raise SuiteError(f"{path}:{exc.line}: {exc.problem}", exc.HINT) from None
    except yamllines.YamlSyntaxError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise SuiteError(f"{path}{line}: not valid YAML: {exc.problem}", "check indentation and quoting") from None
    w = _Where(path, doc)
    if not isinstance(doc, dict):
        raise w.error((), "a suite file is a mapping with name, description, command, parser ...", TOP_KEYS)
    try:
        spec = SuiteFile.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        raise w.error(loc, err["msg"], _pydantic_fix(err)) from None
    return _build(spec, w)


def _build(spec: SuiteFile, w: _Where) -> SuiteDef:
    if not SUITE_NAME_RE.match(spec.name):
        raise w.error(("name",), f"{spec.name!r} is not a suite name", "use lower-case letters, digits, '.', '_', '-'")
    params = [_param(spec, name, ps, w) for name, ps in spec.params.items()]
    lists = [p.name for p in params if p.type == "int-list"]
    known = {p.name for p in params} | set(BUILTIN_PLACEHOLDERS)
    for i, item in enumerate(spec.command):
        _check_template(item, known, ("command", i), w)
    env = {k: v if isinstance(v, str) else v.value for k, v in spec.env.items()}
    public_env = frozenset(k for k, v in spec.env.items() if isinstance(v, EnvSpec) and v.public)
    for k, v in env.items():
        _check_template(v, known, ("env", k), w)
    grid = _grid(spec.grid, lists, w) if spec.grid is not None else (("cross", tuple(lists)) if lists else None)
    sweep = spec.sweep
    if sweep is None and len(lists) == 1:
        sweep = lists[0]
    if sweep is not None and sweep not in lists:
        raise w.error(("sweep",), f"{sweep!r} is not a list parameter", f"list parameters: {', '.join(lists) or '-'}")
    parser = PARSERS.get(spec.parser.name)
    if parser is None:
        raise w.error(("parser",), f"unknown parser {spec.parser.name!r}", f"parsers: {', '.join(PARSERS)}")
    pattern = spec.parser.pattern
    groups: set[str] = set()
    if parser.takes_pattern:
        if not pattern:
            raise w.error(("parser",), "the regex parser needs a pattern", "parser: {name: regex, pattern: '...'}")
        try:
            groups = set(re.compile(pattern, re.MULTILINE).groupindex)
        except re.error as exc:
            raise w.error(("parser", "pattern"), f"not a valid regex: {exc}", "check escaping") from None
        if not groups:
            raise w.error(("parser", "pattern"), "the pattern has no named group", "capture with (?P<name>...)")
        if nested_quantifier(pattern, re.MULTILINE):
            raise w.error(
                ("parser", "pattern"),
                "the pattern repeats a group that is only a repeat, like (a+)+: on an output that almost matches it "
                "backtracks for ever (catastrophic backtracking)",
                "repeat once: (a+)+ matches what a+ matches",
            )
    elif pattern is not None:
        raise w.error(("parser", "pattern"), f"parser {parser.name} takes no pattern", "remove pattern")
    metrics = _metrics(spec, parser.name, groups, w)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", spec.max_failed_requests)
    if m is None or float(m.group(1)) > 100:
        raise w.error(
            ("max_failed_requests",),
            f"{spec.max_failed_requests!r} is not a percentage",
            "write the share of requests that may fail, e.g. '1%' or '0%'",
        )
    units = {m.name: m.unit for m in metrics} | AGENT_METRICS | ({"failed_requests": "req"} if parser.requests else {})
    references: dict[str, dict[str, Bound]] = {}
    for group, refs in spec.references.items():
        references[group] = {}
        for metric, text in refs.items():
            loc = ("references", group, metric)
            if metric not in units:
                raise w.error(loc, f"no metric {metric!r} in this suite", f"metrics: {', '.join(units)}")
            try:
                bound = parse_bound(text)
            except ValueError as exc:
                raise w.error(loc, str(exc), "for example: '>= 120 tok/s' or '1.2 ms ±10%'") from None
            if bound.unit is not None and bound.unit != units[metric]:
                raise w.error(
                    loc,
                    f"bound unit {bound.unit!r} but {metric} is in {units[metric]!r}",
                    f"write the bound in {units[metric]}",
                )
            references[group][metric] = bound
    plots: list[Plot] = []
    for i, name in enumerate(spec.plot or []):
        if name not in units:
            raise w.error(("plot", i), f"no metric {name!r} in this suite", f"metrics: {', '.join(units)}")
        plots.append(Plot(name))
    command = CommandSuite(
        source=w.path,
        argv=tuple(spec.command),
        env=env,
        public_env=public_env,
        timeout_s=spec.timeout_s,
        grid=grid,
        parser=parser.name,
        pattern=pattern,
        metrics=tuple(metrics),
        references=references,
        scalars=tuple(p.name for p in params if p.type != "int-list"),
        max_failed_requests=float(m.group(1)) / 100,
        spans_nodes=spec.spans_nodes,
        parse_timeout_s=spec.parse_timeout_s,
    )
    all_params = (*params, *_run_params(repeat=spec.repeat, warmup=spec.warmup))
    presets = tuple(Preset(n, p.description, _preset_values(spec, n, p, params, w)) for n, p in spec.presets.items())
    try:
        sd = SuiteDef(
            name=spec.name,
            description=spec.description,
            bench="command",
            params=all_params,
            presets=presets,
            sweep=sweep,
            command=command,
            plots=tuple(plots),
        )
        if grid is not None:
            command.cases({p.name: p.default for p in params})
    except SuiteError as exc:
        raise SuiteError(f"{w.path}: {exc.message}", exc.hint) from None
    return sd


def _param(spec: SuiteFile, name: str, ps: ParamSpec, w: _Where) -> Param:
    loc: tuple[str, ...] = ("params", name)
    if not NAME_RE.match(name):
        raise w.error(loc, f"{name!r} is not a parameter name", "letters, digits and '_', not starting with a digit")
    if name in RESERVED:
        raise w.error(loc, f"{name!r} is reserved", f"reserved names: {', '.join(sorted(RESERVED))}")
    if ps.min is not None and ps.max is not None and ps.min > ps.max:
        raise w.error((*loc, "max"), f"min {ps.min:g} is greater than max {ps.max:g}", "swap them, or drop one")
    if ps.choices is not None and ps.type != "str":
        raise w.error((*loc, "choices"), "choices are for str parameters", "use min/max for numbers")
    typ = _TYPES[ps.type]
    p = Param(name, typ, 0 if typ == "int-list" else ps.default, ps.help, tuple(ps.choices or ()), ps.min, ps.max)
    try:
        default = _value(p, ps.default, spec.name)
    except SuiteError as exc:
        raise w.error((*loc, "default"), exc.message.split(": ", 1)[-1], exc.hint.split("; for example")[0]) from None
    return Param(name, typ, default, ps.help, p.choices, p.min, p.max, example=None)


def _value(p: Param, raw: Any, suite: str) -> ParamValue:
    """A YAML value for ``p``: typed as YAML gives it; a list parameter also takes ``"1..64"`` or a range."""
    if p.type == "int-list":
        if isinstance(raw, str):
            return p.parse(raw, suite)
        if isinstance(raw, dict):
            try:
                r = RangeSpec.model_validate(raw)
            except ValidationError as exc:
                raise SuiteError(f"{suite}: {p.name} range: {exc.errors()[0]['msg']}", "{start, stop, step}") from None
            if r.stop < r.start or (r.step is None) == (r.factor is None):
                raise SuiteError(f"{suite}: {p.name} range needs start <= stop and one of step, factor", "")
            out, x = [], r.start
            while x <= r.stop:
                out.append(x)
                x = x + r.step if r.step is not None else x * (r.factor or 2)
            return p.check(out, suite)
        return p.check(list(raw) if isinstance(raw, list) else raw, suite)
    if p.type == "float" and isinstance(raw, int) and not isinstance(raw, bool):
        raw = float(raw)
    return p.check(raw, suite)


def _check_template(template: str, known: set[str], loc: tuple[int | str, ...], w: _Where) -> None:
    try:
        names = placeholders(template)
    except ValueError as exc:
        raise w.error(loc, str(exc), "placeholders are {param}, {build} or {output}") from None
    for n in names:
        if n not in known:
            raise w.error(
                loc,
                f"unknown placeholder {{{n}}}",
                f"declare {n!r} under params, or use one of: {', '.join(sorted(known))}",
            )


def _grid(node: Any, lists: list[str], w: _Where) -> Grid:
    seen: list[str] = []

    def walk(n: Any, loc: tuple[int | str, ...]) -> Grid:
        if not isinstance(n, dict) or len(n) != 1 or next(iter(n)) not in ("cross", "zip"):
            raise w.error(
                loc, "a grid node is {cross: [...]} or {zip: [...]}", "e.g. grid: {cross: [batch, {zip: [a, b]}]}"
            )
        kind = next(iter(n))
        children = n[kind]
        if not isinstance(children, list) or not children:
            raise w.error((*loc, kind), f"{kind} takes a non-empty list", f"{kind}: [param, ...]")
        out: list[str | Grid] = []
        for i, child in enumerate(children):
            if isinstance(child, str):
                if child not in lists:
                    raise w.error(
                        (*loc, kind, i),
                        f"{child!r} is not a list parameter",
                        f"list parameters: {', '.join(lists) or '-'}",
                    )
                if child in seen:
                    raise w.error((*loc, kind, i), f"{child!r} appears twice in the grid", "name each axis once")
                seen.append(child)
                out.append(child)
            else:
                out.append(walk(child, (*loc, kind, i)))
        return (kind, tuple(out))

    grid = walk(node, ("grid",))
    left = [n for n in lists if n not in seen]
    if left:
        raise w.error(("grid",), f"list parameter(s) {', '.join(left)} not in the grid", "add them under cross or zip")
    return grid


def _metrics(spec: SuiteFile, parser: str, groups: set[str], w: _Where) -> list[MetricDef]:
    pdef = PARSERS[parser]
    if not spec.metrics:
        if pdef.generic:
            raise w.error(
                ("parser",), f"parser {parser} needs its metrics listed", "metrics: {name: {path: field, unit: ms}}"
            )
        return [MetricDef(_metric_name(p), p, pdef.unit_of(p) or "", optional=True) for p in pdef.headline]
    out = []
    for name, ms in spec.metrics.items():
        loc = ("metrics", name)
        if not NAME_RE.match(name) or name in AGENT_METRICS:
            raise w.error(loc, f"{name!r} is not a metric name", "letters, digits and '_' (wall_ms is the agent's own)")
        path = (ms.path if ms else None) or name
        if groups and path not in groups:
            raise w.error(loc, f"the pattern has no group {path!r}", f"groups: {', '.join(sorted(groups))}")
        unit = (ms.unit if ms else None) or pdef.unit_of(path)
        if unit is None:
            raise w.error(loc, "no unit", f"add unit: (e.g. unit: ms); parser {parser} does not know {path!r}")
        known = pdef.unit_of(path)
        if known is not None and unit != known:
            raise w.error((*loc, "unit"), f"{parser} reports {path} in {known!r}, not {unit!r}", f"unit: {known}")
        out.append(MetricDef(name, path, unit))
    return out


def _metric_name(path: str) -> str:
    """A metric name for a parser's headline field path: dots become underscores (``percentiles_99``)."""
    return path.replace(".", "_")


def _preset_values(spec: SuiteFile, name: str, ps: PresetSpec, params: list[Param], w: _Where) -> dict[str, ParamValue]:
    by_name = {p.name: p for p in params}
    out: dict[str, ParamValue] = {}
    for k, raw in ps.values.items():
        loc = ("presets", name, "values", k)
        if k not in by_name:
            raise w.error(loc, f"unknown parameter {k!r}", f"parameters: {', '.join(by_name) or '-'}")
        try:
            out[k] = _value(by_name[k], raw, spec.name)
        except SuiteError as exc:
            raise w.error(loc, exc.message.split(": ", 1)[-1], exc.hint) from None
    return out


def load_suite_file(path: Path) -> SuiteDef:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read the suite file: {exc.strerror}", "check the path") from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        raise SuiteError(
            f"{path}:{line}: not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}",
            "save the suite file as UTF-8",
        ) from None
    return parse_suite(text, str(path))


def packaged_suite_files() -> list[Path]:
    """The suite files shipped in this package (``orchestrator/suites/*.yaml``)."""
    root = resources.files("orchestrator.suites")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith((".yaml", ".yml")))


def suite_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        what = "is a file, not a directory" if directory.exists() else "does not exist"
        raise SuiteError(
            f"suite directory {directory} {what}",
            "pass an existing directory to --suite-dir / ORCH_SUITE_DIR / the inventory's suite_dir",
        )
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def suite_dirs(
    cli_dirs: Iterable[Path], env_dir: Path | None, inventory_dir: str | None, inventory_path: str
) -> list[Path]:
    """The user suite directories in order: ``--suite-dir``, ``ORCH_SUITE_DIR``, the inventory's (relative to
    the inventory file). Duplicates dropped."""
    dirs = [*cli_dirs, *([env_dir] if env_dir else [])]
    if inventory_dir:
        d = Path(inventory_dir).expanduser()
        dirs.append(d if d.is_absolute() else Path(inventory_path).parent / d)
    out: list[Path] = []
    for d in dirs:
        if d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def load_registry(dirs: Sequence[Path] = ()) -> Registry:
    """The built-in suites, the packaged suite files and every suite file in ``dirs``.

    Raises:
        SuiteError: a missing directory, a malformed file (file:line:key), or a suite name defined twice
            (naming both places).
    """
    base = _builtin_registry()
    reg = Registry(base.all())
    sources = dict.fromkeys(base.names(), "built-in")
    files = [*packaged_suite_files(), *(f for d in dirs for f in suite_files(d))]
    for f in files:
        sd = load_suite_file(f)
        if sd.name in sources:
            raise SuiteError(
                f"suite {sd.name!r} is defined in {sources[sd.name]} and in {f}", "rename one of them (name:)"
            )
        sources[sd.name] = str(f)
        reg.register(sd)
    return reg
