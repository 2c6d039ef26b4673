"""Suite definitions, the registry of known suites, and resolving ``--set``/``--preset``/``--repeat`` into the
spec the agent runs — pure.

A suite (``SuiteDef``) names the agent bench that runs it, its typed parameters, its presets and, optionally,
a sweep axis: an ``int-list`` parameter whose values become one case each. Parameters are either *case*
parameters (sent in every case dict to the bench) or *run* parameters (``repeat``, ``warmup``, ``device``,
``seed``: fields of the spec itself). Built-in suites live in ``suites/builtin.py``; user suites (YAML) build
the same ``SuiteDef`` values and ``Registry.register`` them.

Values given with ``--set KEY=VALUE`` are parsed by type:

- ``int``: decimal, ``_`` separators allowed, optional binary suffix ``KiB``/``MiB``/``GiB``/``TiB``
  (``--set size_bytes=4GiB``);
- ``float``: any finite decimal;
- ``str``: one of the parameter's choices when it has them;
- ``int-list``: comma-separated items, each an int or a doubling range ``A..B`` = A, 2A, 4A, ... up to B
  (``1..4096`` is the powers of two 1, 2, 4, ..., 4096); the result is sorted and de-duplicated.

Precedence: parameter default < preset (given, else the suite's default preset for a host with / without CUDA)
< ``--set``. Every bad input raises ``SuiteError`` naming the suite, the key, what is accepted and an example.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from orchestrator.errors import SuiteError
from orchestrator.protocol import Unholdable, checked_float

if TYPE_CHECKING:
    from orchestrator.suites.command import CommandSuite

ParamType = Literal["int", "float", "str", "int-list"]
ParamValue = int | float | str | list[int]
RUN_PARAMS = ("repeat", "warmup", "device", "seed")
DEVICES = ("auto", "cuda", "cpu")

# ASCII digits only (re.ASCII): Python's \d and int()/float() also take other scripts' digits ('١٢' is 12)
_INT_RE = re.compile(r"^\s*(\d[\d_]*)\s*(KiB|MiB|GiB|TiB)?\s*$", re.ASCII)
_FLOAT_RE = re.compile(r"^\s*[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?\s*$", re.ASCII)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of an int parameter: a signed 64-bit integer, what SQLite's INTEGER, PostgreSQL's bigint and the
agent's JSON readers (C int64) hold (SQLite docs, "Datatypes In SQLite", 2. Storage Classes)."""
_SUFFIX = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "int-list": "a list of integers"}


class RunSpec(TypedDict):
    """What the agent's ``start SPEC`` reads, plus ``params`` (every resolved parameter, for the store) and
    the ``preset`` applied (None when the suite has none)."""

    run_id: str
    suite: str
    bench: str
    cases: list[dict[str, Any]]
    repeat: int
    warmup: int
    device: str
    seed: int
    params: dict[str, ParamValue]
    preset: str | None


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _digits_note(raw: str) -> str:
    """`` written in ASCII digits 0-9`` when ``raw`` holds another script's digits (which Python's int() would
    read: '١٢' is 12), else ``""``."""
    return " written in ASCII digits 0-9" if any(ch.isdigit() and not ch.isascii() for ch in raw) else ""


def _fmt(value: ParamValue) -> str:
    return ",".join(str(x) for x in value) if isinstance(value, list) else str(value)


MAX_ARG_STRLEN = 32 * 4096  # linux/binfmts.h: one argv or environment string, NUL included (execve(2))


@dataclass(frozen=True)
class Param:
    """One typed parameter. ``help`` says what it is and its unit; ``min``/``max`` bound every (list) item."""

    name: str
    type: ParamType
    default: ParamValue
    help: str
    choices: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    scope: Literal["case", "run"] = "case"
    example: str | None = None

    def example_text(self) -> str:
        return self.example if self.example is not None else _fmt(self.default)

    def _bad(self, suite: str, what: str) -> SuiteError:
        accepted = f"one of {', '.join(self.choices)}" if self.choices else _TYPE_WORDS[self.type]
        bounds = []
        if self.min is not None:
            bounds.append(f">= {_bound(self.min)}")
        if self.max is not None:
            bounds.append(f"<= {_bound(self.max)}")
        if bounds:
            accepted += " " + " and ".join(bounds)
        return SuiteError(
            f"{suite}: {self.name} {what}",
            f"{self.name} ({self.help}) takes {accepted}; for example --set {self.name}={self.example_text()}",
        )

    def _parse_int(self, suite: str, raw: str) -> int:
        text = raw.strip()
        if text.startswith("-") and _INT_RE.match(text[1:]):
            return -self._parse_int(suite, text[1:])  # parsed, so that the bounds check names the problem
        m = _INT_RE.match(text)
        if not m:
            raise self._bad(suite, f"must be {_TYPE_WORDS['int']}{_digits_note(raw)}, got {raw!r}")
        return int(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)

    def parse(self, raw: str, suite: str) -> ParamValue:
        """Parse the text of ``--set NAME=RAW`` (or a suite file's text value) and check it: digits are ASCII
        0-9 only, an int lies within the signed 64-bit range (``INT64_MIN``..``INT64_MAX``) and the declared
        bounds. Raises SuiteError."""
        value: ParamValue
        if self.type == "int":
            value = self._parse_int(suite, raw)
        elif self.type == "float":
            try:
                if not _FLOAT_RE.match(raw):
                    raise ValueError(raw)
                value = checked_float(raw)
            except ValueError:
                raise self._bad(suite, f"must be {_TYPE_WORDS['float']}{_digits_note(raw)}, got {raw!r}") from None
            if isinstance(value, Unholdable) and value.tiny:  # float() reads it as 0.0: the case would run with 0
                raise self._bad(suite, f"is {raw.strip()!r}, not zero but below the smallest double (4.9e-324), "
                                       "which holds it only as 0; write 0 if 0 is meant")  # fmt: skip
        elif self.type == "str":
            value = raw.strip()
        else:
            value = self._parse_list(suite, raw)
        return self.check(value, suite)

    def _parse_list(self, suite: str, raw: str) -> list[int]:
        items: list[int] = []
        for part in raw.split(","):
            part = part.strip()
            if not part:
                raise self._bad(suite, f"has an empty item in {raw!r}")
            if ".." in part:
                lo_s, _, hi_s = part.partition("..")
                lo, hi = self._parse_int(suite, lo_s), self._parse_int(suite, hi_s)
                if lo < 1 or hi < lo:
                    raise self._bad(suite, f"range {part!r} must be A..B with 1 <= A <= B")
                x = lo
                while x <= hi:
                    items.append(x)
                    x *= 2
            else:
                items.append(self._parse_int(suite, part))
        return sorted(set(items))

    def check(self, value: Any, suite: str) -> ParamValue:
        """Check a typed value (a default, a preset's, a parsed one) against type, choices and bounds."""
        if self.type == "int-list":
            if not isinstance(value, list) or not value:
                raise self._bad(suite, f"must be a non-empty list of integers, got {value!r}")
            for x in value:
                self._check_scalar(x, suite, "int")
            return [int(x) for x in value]
        return self._check_scalar(value, suite, self.type)

    def _check_scalar(self, value: Any, suite: str, typ: str) -> ParamValue:
        if typ == "str":
            if not isinstance(value, str):
                raise self._bad(suite, f"must be a string, got {value!r:.80}")
            size = len(value.encode("utf-8", "surrogatepass"))
            if size >= MAX_ARG_STRLEN:
                raise self._bad(suite, f"is {size:,} bytes ({value[:20]!r}...): a parameter reaches the command as "
                                       f"one argument or environment value, which Linux caps at {MAX_ARG_STRLEN:,} "
                                       "bytes with its NUL (MAX_ARG_STRLEN); put large input in a file on the host "
                                       "and pass its path")  # fmt: skip
            if self.choices and value not in self.choices:
                raise self._bad(suite, f"must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(suite, f"must be {_TYPE_WORDS[typ]}, got {value!r}")
        if typ == "int" and not isinstance(value, int):
            raise self._bad(suite, f"must be {_TYPE_WORDS['int']}, got {value!r}")
        if not math.isfinite(value):
            raise self._bad(suite, f"must be finite, got {value!r}")
        if typ == "int" and not INT64_MIN <= value <= INT64_MAX:
            raise self._bad(
                suite, f"is outside the 64-bit signed range {INT64_MIN}..{INT64_MAX}, got {value!r}"
            )
        if self.min is not None and value < self.min:
            raise self._bad(suite, f"must be >= {_bound(self.min)}, got {value!r}")
        if self.max is not None and value > self.max:
            raise self._bad(suite, f"must be <= {_bound(self.max)}, got {value!r}")
        return value if typ == "int" else float(value)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "choices": list(self.choices),
            "min": self.min,
            "max": self.max,
            "scope": self.scope,
            "help": self.help,
        }


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    values: Mapping[str, ParamValue]


@dataclass(frozen=True)
class Plot:
    """A headline metric of a suite, plotted against the suite's sweep axis (``SuiteDef.plot_x``).

    ``roof``: the reference lines its view draws — ``memory`` (the GPU's datasheet bandwidth and the host's
    measured copy roof, GB/s), ``compute`` (the GPU's dense tensor peak for the case's dtype, TFLOP/s) — or
    None. Parameters are never plotted: only metric names go here."""

    metric: str
    roof: Literal["memory", "compute"] | None = None


Check = Callable[[Mapping[str, ParamValue]], "str | None"]
"""A cross-parameter check: returns an error message (naming the keys) or None."""


#: Most timed samples (and untimed warm-up calls) per case: 500x the default of 20. Every sample is stored with
#: the result, and past a few thousand the median's confidence interval no longer narrows usefully; a typo such
#: as repeat: 100000000000 would otherwise run for ever.
MAX_REPEAT = 10_000


def run_params(*, repeat: int = 20, warmup: int = 5) -> tuple[Param, ...]:
    """The run-scope parameters every suite has: repeat (1..MAX_REPEAT), warmup (0..MAX_REPEAT), device, seed."""
    return (
        Param("repeat", "int", repeat, "timed samples per case (also --repeat)", min=1, max=MAX_REPEAT, scope="run"),
        Param("warmup", "int", warmup, "untimed calls before timing each case", min=0, max=MAX_REPEAT, scope="run"),
        Param("device", "str", "auto", "auto = cuda when the host has it, else cpu", DEVICES, scope="run"),
        Param("seed", "int", 0, "random seed for weights, inputs and routing", min=0, scope="run"),
    )


@dataclass(frozen=True)
class SuiteDef:
    """A benchmark suite. Raises SuiteError when the definition itself is inconsistent."""

    name: str
    description: str
    bench: str
    params: tuple[Param, ...]
    presets: tuple[Preset, ...] = ()
    sweep: str | None = None
    default_preset_cuda: str | None = None
    default_preset_cpu: str | None = None
    checks: tuple[Check, ...] = field(default=(), repr=False)
    command: CommandSuite | None = field(default=None, repr=False)
    """Set for suites declared in YAML (bench ``command``): the argv template, grid, parser, references."""
    plots: tuple[Plot, ...] = ()
    """Headline metrics for the dashboard and ``orch runs plot``; empty: a YAML suite's declared metrics."""
    plot_x: str | None = None
    """The case parameter plots put on x; None: the sweep axis."""

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SuiteError(f"suite {self.name}: parameter(s) {', '.join(dup)} defined twice")
        for rp in RUN_PARAMS:
            if rp not in names or self.param(rp).scope != "run":
                raise SuiteError(f"suite {self.name}: needs run parameter {rp!r}", "add registry.run_params()")
        for p in self.params:
            p.check(p.default, self.name)
        if self.sweep is not None and (self.sweep not in names or self.param(self.sweep).type != "int-list"):
            raise SuiteError(f"suite {self.name}: sweep axis {self.sweep!r} must be an int-list parameter")
        for pr in self.presets:
            for k, v in pr.values.items():
                if k not in names:
                    raise SuiteError(f"suite {self.name}: preset {pr.name} sets unknown parameter {k!r}")
                self.param(k).check(v, self.name)
        for d in (self.default_preset_cuda, self.default_preset_cpu):
            if d is not None and d not in self.preset_names():
                raise SuiteError(f"suite {self.name}: default preset {d!r} is not defined")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise SuiteError(
            f"{self.name}: unknown parameter {name!r}",
            f"accepted keys: {', '.join(p.name for p in self.params)}; "
            f"for example --set {self.params[0].name}={self.params[0].example_text()}",
        )

    def preset_names(self) -> list[str]:
        return [p.name for p in self.presets]

    def preset(self, name: str) -> Preset:
        for p in self.presets:
            if p.name == name:
                return p
        known = ", ".join(self.preset_names()) or "none"
        raise SuiteError(
            f"{self.name}: unknown preset {name!r}",
            f"presets of {self.name}: {known}"
            + (f"; for example --preset {self.presets[0].name}" if self.presets else ""),
        )

    def default_preset(self, cuda: bool) -> str | None:
        return self.default_preset_cuda if cuda else self.default_preset_cpu

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (``orch suites show --json``)."""
        return {
            "name": self.name,
            "description": self.description,
            "bench": self.bench,
            "sweep": self.sweep,
            "params": [p.describe() for p in self.params],
            "presets": [{"name": p.name, "description": p.description, "values": dict(p.values)} for p in self.presets],
            "default_preset": {"cuda": self.default_preset_cuda, "cpu": self.default_preset_cpu},
            "plots": [{"metric": p.metric, "roof": p.roof} for p in self.plots],
            **(self.command.describe() if self.command is not None else {"source": "built-in"}),
        }


class Registry:
    """Known suites by name: the built-ins (``builtin.BUILTIN_SUITES``), user suites registered on top."""

    def __init__(self, suites: Iterable[SuiteDef] = ()) -> None:
        self._suites: dict[str, SuiteDef] = {}
        for s in suites:
            self.register(s)

    def register(self, suite: SuiteDef, *, replace: bool = False) -> None:
        """Add a suite. Raises SuiteError if the name is taken and ``replace`` is False."""
        if suite.name in self._suites and not replace:
            raise SuiteError(f"suite {suite.name!r} is defined twice", "rename one of them")
        self._suites[suite.name] = suite

    def names(self) -> list[str]:
        return sorted(self._suites)

    def all(self) -> list[SuiteDef]:
        return [self._suites[n] for n in self.names()]

    def get(self, name: str) -> SuiteDef:
        """The suite called ``name``. Raises SuiteError naming the known suites."""
        try:
            return self._suites[name]
        except KeyError:
            raise SuiteError(
                f"unknown suite {name!r}",
                f"known suites: {', '.join(self.names())}; `orch suites list` describes them; a suite of your "
                "own file needs its directory: --suite-dir DIR (or ORCH_SUITE_DIR)",
            ) from None


@cache
def builtin_registry() -> Registry:
    """A registry holding the built-in suites (built once; no I/O)."""
    from orchestrator.suites.builtin import BUILTIN_SUITES

    return Registry(BUILTIN_SUITES)


def get_suite(name: str, registry: Registry | None = None) -> SuiteDef:
    """The suite called ``name`` (built-ins unless ``registry`` is given).

    Raises:
        SuiteError: unknown name; the hint lists the known suites.
    """
    return (registry or builtin_registry()).get(name)


def list_suites(registry: Registry | None = None) -> list[SuiteDef]:
    return (registry or builtin_registry()).all()


def resolve(
    suite: str | SuiteDef,
    sets: Mapping[str, str],
    *,
    preset: str | None = None,
    repeat: int | None = None,
    cuda: bool,
    run_id: str,
    seed: int | None = None,
    registry: Registry | None = None,
) -> RunSpec:
    """Resolve a suite's parameters into the agent's run spec.

    Args:
        suite: a suite name (looked up in ``registry``, default the built-ins) or a ``SuiteDef``.
        sets: ``--set KEY=VALUE`` pairs as raw strings.
        preset: ``--preset NAME``; None = the suite's default for a host with (``cuda``) or without CUDA.
        repeat: ``--repeat N`` (>= 1); the same as ``--set repeat=N``, which may not be given as well.
        cuda: whether the host has CUDA: picks the default preset and resolves ``device=auto``.
        run_id: the run's id, copied into the spec.
        seed: the seed when ``--set seed`` is not given (default: the suite's, 0).

    Returns:
        ``RunSpec``; with a sweep axis one case per axis value (ascending), each with every case parameter.

    Raises:
        SuiteError: unknown suite, key, preset or choice; a value of the wrong type or out of bounds; a failed
            cross-parameter check (``k > E``); ``device=cuda`` on a host without CUDA.
    """
    sd = suite if isinstance(suite, SuiteDef) else get_suite(suite, registry)
    values: dict[str, ParamValue] = {p.name: p.default for p in sd.params}
    if seed is not None:
        values["seed"] = sd.param("seed").check(seed, sd.name)
    preset_name = preset if preset is not None else sd.default_preset(cuda)
    if preset_name is not None:
        values.update(sd.preset(preset_name).values)
    for key, raw in sets.items():
        values[key] = sd.param(key).parse(raw, sd.name)
    if repeat is not None:
        if "repeat" in sets:
            raise SuiteError(f"{sd.name}: repeat given twice (--repeat and --set repeat)", "give only one of them")
        values["repeat"] = sd.param("repeat").check(repeat, sd.name)
    for check in sd.checks:
        problem = check(values)
        if problem:
            raise SuiteError(f"{sd.name}: {problem}", f"accepted keys: {', '.join(p.name for p in sd.params)}")
    device = str(values["device"])
    if device == "auto":
        device = "cuda" if cuda else "cpu"
    elif device == "cuda" and not cuda:
        raise SuiteError(f"{sd.name}: device=cuda but the host has no CUDA", "use --set device=cpu or auto")
    values["device"] = device
    return RunSpec(
        run_id=run_id,
        suite=sd.name,
        bench=sd.bench,
        cases=_cases(sd, values),
        repeat=_as_int(values["repeat"]),
        warmup=_as_int(values["warmup"]),
        device=device,
        seed=_as_int(values["seed"]),
        params=dict(values),
        preset=preset_name,
    )


def _as_int(v: ParamValue) -> int:
    assert isinstance(v, int)
    return v


def _cases(sd: SuiteDef, values: Mapping[str, ParamValue]) -> list[dict[str, Any]]:
    if sd.command is not None:
        return sd.command.cases(values)
    case_params: Sequence[Param] = [p for p in sd.params if p.scope == "case"]
    if sd.sweep is None:
        return [{p.name: values[p.name] for p in case_params}]
    axis = values[sd.sweep]
    assert isinstance(axis, list)
    return [{p.name: (x if p.name == sd.sweep else values[p.name]) for p in case_params} for x in axis]
