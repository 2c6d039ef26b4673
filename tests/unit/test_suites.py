"""Suite registry: built-in suites, resolving --set/--preset/--repeat into the agent's spec, CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli import render
from orchestrator.cli.suites import app
from orchestrator.errors import SuiteError
from orchestrator.suites.registry import (
    Param,
    Preset,
    Registry,
    SuiteDef,
    get_suite,
    list_suites,
    resolve,
    run_params,
)

POW2 = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
TINY_CASE = {"E": 16, "H": 256, "I": 128, "k": 4, "shared": 1, "dtype": "fp32", "impl": "auto"}


def test_builtin_suites() -> None:
    assert [(s.name, s.bench) for s in list_suites()] == [
        ("allreduce", "allreduce"),
        ("decode", "decode"),
        ("hbm-bandwidth", "hbm"),
        ("moe-sweep", "moe_gemm"),
        ("moe-sweep-ep", "moe_gemm"),
        ("noop", "sleep"),
        ("overheads", "overheads"),
    ]
    moe = get_suite("moe-sweep")
    assert moe.sweep == "M"
    assert [p.name for p in moe.params] == [
        "M", "E", "H", "I", "k", "shared", "dtype", "impl", "repeat", "warmup", "device", "seed",
    ]  # fmt: skip
    assert moe.preset_names() == ["kimi-k2", "tiny"]


def test_unknown_suite_names_the_known_ones() -> None:
    with pytest.raises(SuiteError, match="unknown suite 'moe'") as exc:
        get_suite("moe")
    assert exc.value.hint == (
        "known suites: allreduce, decode, hbm-bandwidth, moe-sweep, moe-sweep-ep, noop, overheads; "
        "`orch suites list` describes them; a suite of your own file needs its directory: --suite-dir DIR "
        "(or ORCH_SUITE_DIR)"
    )
    assert exc.value.exit_code == 2


def test_resolve_tiny_preset_exact_spec() -> None:
    spec = resolve("moe-sweep", {}, preset="tiny", cuda=False, run_id="r1")
    assert spec == {
        "run_id": "r1",
        "suite": "moe-sweep",
        "bench": "moe_gemm",
        "cases": [{"M": m, **TINY_CASE} for m in (1, 2, 4, 8, 16, 32, 64)],
        "repeat": 20,
        "warmup": 5,
        "device": "cpu",
        "seed": 0,
        "params": {
            "M": [1, 2, 4, 8, 16, 32, 64],
            **TINY_CASE,
            "repeat": 20,
            "warmup": 5,
            "device": "cpu",
            "seed": 0,
        },
        "preset": "tiny",
    }
    assert list(spec["cases"][0]) == ["M", "E", "H", "I", "k", "shared", "dtype", "impl"]
    json.dumps(spec)  # JSON-ready


def test_default_preset_follows_cuda() -> None:
    gpu = resolve("moe-sweep", {}, cuda=True, run_id="r")
    assert gpu["preset"] == "kimi-k2" and gpu["device"] == "cuda"
    assert [c["M"] for c in gpu["cases"]] == POW2
    assert gpu["cases"][0] == {
        "M": 1, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16", "impl": "auto",
    }  # fmt: skip
    cpu = resolve("moe-sweep", {}, cuda=False, run_id="r")
    assert cpu["preset"] == "tiny" and cpu["device"] == "cpu"
    # an explicit preset wins over the host's default; device=cpu on a CUDA host is allowed
    forced = resolve("moe-sweep", {"device": "cpu"}, preset="kimi-k2", cuda=True, run_id="r")
    assert forced["device"] == "cpu" and forced["cases"][0]["E"] == 384


@pytest.mark.parametrize(
    ("raw", "ms"),
    [
        ("1,2,4", [1, 2, 4]),
        ("1..4096", POW2),
        ("3..20", [3, 6, 12]),
        ("8, 1..4, 2", [1, 2, 4, 8]),  # sorted, de-duplicated
        ("5", [5]),
        ("1_024", [1024]),
    ],
)
def test_set_m_lists_and_ranges(raw: str, ms: list[int]) -> None:
    spec = resolve("moe-sweep", {"M": raw}, cuda=False, run_id="r")
    assert [c["M"] for c in spec["cases"]] == ms
    assert spec["params"]["M"] == ms


def test_set_overrides_preset() -> None:
    spec = resolve(
        "moe-sweep",
        {"E": "32", "k": "2", "dtype": "bf16", "impl": "loop", "seed": "7", "warmup": "0"},
        preset="tiny",
        repeat=3,
        cuda=False,
        run_id="r",
        seed=42,
    )
    assert spec["cases"][0] == {**TINY_CASE, "M": 1, "E": 32, "k": 2, "dtype": "bf16", "impl": "loop"}
    assert (spec["repeat"], spec["warmup"], spec["seed"]) == (3, 0, 7)
    assert resolve("moe-sweep", {}, cuda=False, run_id="r", seed=42)["seed"] == 42  # default seed given


ASCII = "written in ASCII digits 0-9"  # digits of other scripts, which int() reads


@pytest.mark.parametrize(
    ("sets", "message", "hint"),
    [
        (
            {"X": "1"},
            "moe-sweep: unknown parameter 'X'",
            "accepted keys: M, E, H, I, k, shared, dtype, impl, repeat, warmup, device, seed; "
            "for example --set M=1,2,4",
        ),
        (
            {"E": "abc"},
            "moe-sweep: E must be an integer, got 'abc'",
            "E (number of routed experts) takes an integer >= 1; for example --set E=384",
        ),
        (
            {"E": "0"},
            "moe-sweep: E must be >= 1, got 0",
            "E (number of routed experts) takes an integer >= 1; for example --set E=384",
        ),
        ({"M": "0"}, "moe-sweep: M must be >= 1, got 0", None),
        ({"M": "-4"}, "moe-sweep: M must be >= 1, got -4", None),
        ({"M": "1,,2"}, "moe-sweep: M has an empty item in '1,,2'", None),
        ({"M": "8..2"}, "moe-sweep: M range '8..2' must be A..B with 1 <= A <= B", None),
        ({"M": "1.5"}, "moe-sweep: M must be an integer, got '1.5'", None),
        (
            {"E": "99999999999999999999999"},
            "moe-sweep: E is outside the 64-bit signed range -9223372036854775808..9223372036854775807, "
            "got 99999999999999999999999",
            "E (number of routed experts) takes an integer >= 1; for example --set E=384",
        ),
        (
            {"M": "1,99999999999999999999"},
            "moe-sweep: M is outside the 64-bit signed range -9223372036854775808..9223372036854775807, "
            "got 99999999999999999999",
            None,
        ),
        ({"E": "\u0661\u0662"}, f"moe-sweep: E must be an integer {ASCII}, got '\u0661\u0662'", None),
        ({"M": "1,\u0968"}, f"moe-sweep: M must be an integer {ASCII}, got '\u0968'", None),
        ({"E": "\uff11\uff12"}, f"moe-sweep: E must be an integer {ASCII}, got '\uff11\uff12'", None),
        (
            {"dtype": "int8"},
            "moe-sweep: dtype must be one of bf16, fp16, fp32, fp8, int4, int4-g128, got 'int8'",
            "dtype (weight format: bf16/fp16/fp32, fp8 (e4m3, row-wise scales), int4 (W4A16, group 32), int4-g128) "
            "takes one of bf16, fp16, fp32, fp8, int4, int4-g128; for example --set dtype=bf16",
        ),
        ({"impl": "triton"}, "moe-sweep: impl must be one of auto, grouped_mm, loop, got 'triton'", None),
        ({"repeat": "0"}, "moe-sweep: repeat must be >= 1, got 0", None),
        (
            {"k": "20"},
            "moe-sweep: k=20 is larger than E=16: each token picks k of the E routed experts "
            "(--set k=8 or --set E=384)",
            None,
        ),
        (
            {"device": "cuda"},
            "moe-sweep: device=cuda but the host has no CUDA",
            "use --set device=cpu or auto",
        ),
    ],
)
def test_bad_sets_rejected(sets: dict[str, str], message: str, hint: str | None) -> None:
    with pytest.raises(SuiteError) as exc:
        resolve("moe-sweep", sets, cuda=False, run_id="r")
    assert exc.value.message == message
    if hint is not None:
        assert exc.value.hint == hint


@pytest.mark.parametrize("repeat", [0, -1])
def test_repeat_must_be_positive(repeat: int) -> None:
    with pytest.raises(SuiteError, match=f"moe-sweep: repeat must be >= 1, got {repeat}"):
        resolve("moe-sweep", {}, repeat=repeat, cuda=False, run_id="r")


def test_repeat_given_twice() -> None:
    with pytest.raises(SuiteError, match="repeat given twice"):
        resolve("moe-sweep", {"repeat": "5"}, repeat=5, cuda=False, run_id="r")


def test_unknown_preset() -> None:
    with pytest.raises(SuiteError, match="moe-sweep: unknown preset 'kimi'") as exc:
        resolve("moe-sweep", {}, preset="kimi", cuda=True, run_id="r")
    assert exc.value.hint == "presets of moe-sweep: kimi-k2, tiny; for example --preset kimi-k2"
    with pytest.raises(SuiteError, match="noop: unknown preset 'tiny'") as exc:
        resolve("noop", {}, preset="tiny", cuda=False, run_id="r")
    assert exc.value.hint == "presets of noop: none"


def test_hbm_bandwidth_sizes() -> None:
    gpu = resolve("hbm-bandwidth", {}, cuda=True, run_id="r")
    assert (gpu["bench"], gpu["cases"], gpu["device"], gpu["preset"]) == (
        "hbm", [{"size_bytes": 4 * 2**30}], "cuda", "cuda",
    )  # fmt: skip
    cpu = resolve("hbm-bandwidth", {}, cuda=False, run_id="r")
    assert cpu["cases"] == [{"size_bytes": 64 * 2**20}]
    assert resolve("hbm-bandwidth", {"size_bytes": "1GiB"}, cuda=True, run_id="r")["cases"] == [
        {"size_bytes": 2**30}
    ]
    spec = resolve("hbm-bandwidth", {"size_bytes": "8589934592", "repeat": "50"}, cuda=True, run_id="r")
    assert (spec["cases"], spec["repeat"]) == ([{"size_bytes": 8 * 2**30}], 50)
    with pytest.raises(SuiteError, match="size_bytes must be >= 1048576, got 1024"):
        resolve("hbm-bandwidth", {"size_bytes": "1KiB"}, cuda=True, run_id="r")


def test_noop_one_case() -> None:
    spec = resolve("noop", {}, cuda=False, run_id="overhead-1")
    assert spec == {
        "run_id": "overhead-1",
        "suite": "noop",
        "bench": "sleep",
        "cases": [{"ms": 1.0}],
        "repeat": 20,
        "warmup": 0,
        "device": "cpu",
        "seed": 0,
        "params": {"ms": 1.0, "repeat": 20, "warmup": 0, "device": "cpu", "seed": 0},
        "preset": None,
    }
    assert resolve("noop", {"ms": "0"}, cuda=False, run_id="r")["cases"] == [{"ms": 0.0}]
    for bad in ("nan", "-1", "x"):
        with pytest.raises(SuiteError, match="noop: ms must be"):
            resolve("noop", {"ms": bad}, cuda=False, run_id="r")


def test_registry_is_extendable() -> None:
    user = SuiteDef(
        name="decode-user",
        description="a user suite",
        bench="command",
        params=(Param("C", "int-list", [1, 4], "concurrency, requests", min=1), *run_params(repeat=3)),
        presets=(Preset("big", "more", {"C": [64]}),),
        sweep="C",
    )
    reg = Registry(list_suites())
    reg.register(user)
    assert reg.names() == [
        "allreduce", "decode", "decode-user", "hbm-bandwidth", "moe-sweep", "moe-sweep-ep", "noop", "overheads"
    ]  # fmt: skip
    spec = resolve("decode-user", {}, cuda=True, run_id="r", registry=reg)
    assert (spec["cases"], spec["repeat"], spec["preset"]) == ([{"C": 1}, {"C": 4}], 3, None)
    assert resolve(user, {}, preset="big", cuda=True, run_id="r")["cases"] == [{"C": 64}]
    with pytest.raises(SuiteError, match="suite 'decode-user' is defined twice"):
        reg.register(user)


def test_inconsistent_definitions_rejected() -> None:
    with pytest.raises(SuiteError, match="needs run parameter 'repeat'"):
        SuiteDef("x", "", "sleep", (Param("ms", "float", 1.0, "ms"),))
    with pytest.raises(SuiteError, match="preset p sets unknown parameter 'nope'"):
        SuiteDef("x", "", "sleep", run_params(), presets=(Preset("p", "", {"nope": 1}),))
    with pytest.raises(SuiteError, match="sweep axis 'ms' must be an int-list"):
        SuiteDef("x", "", "sleep", (Param("ms", "float", 1.0, "ms"), *run_params()), sweep="ms")
    with pytest.raises(SuiteError, match="default preset 'gone' is not defined"):
        SuiteDef("x", "", "sleep", run_params(), default_preset_cpu="gone")
    with pytest.raises(SuiteError, match="x: n must be >= 1, got 0"):
        SuiteDef("x", "", "sleep", (Param("n", "int", 0, "count", min=1), *run_params()))


# --- orch suites list|show ---------------------------------------------------------------------------------


def test_cli_list_json() -> None:
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    builtin = [s for s in doc["suites"] if s["source"] == "built-in"]  # suite files: test_suite_files.py
    assert [(s["name"], s["bench"]) for s in builtin] == [
        ("allreduce", "allreduce"),
        ("decode", "decode"),
        ("hbm-bandwidth", "hbm"),
        ("moe-sweep", "moe_gemm"),
        ("moe-sweep-ep", "moe_gemm"),
        ("noop", "sleep"),
        ("overheads", "overheads"),
    ]
    assert builtin[-1]["description"] == get_suite("overheads").description


def test_cli_show_json_and_table() -> None:
    result = CliRunner().invoke(app, ["show", "moe-sweep", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["name"] == "moe-sweep" and doc["sweep"] == "M"
    assert doc["params"][1] == {
        "name": "E",
        "type": "int",
        "default": 384,
        "choices": [],
        "min": 1,
        "max": None,
        "scope": "case",
        "help": "number of routed experts",
    }
    assert doc["presets"][1]["values"]["M"] == [1, 2, 4, 8, 16, 32, 64]
    assert doc["default_preset"] == {"cuda": "kimi-k2", "cpu": "tiny"}
    render.console.cache_clear()  # the console's width is fixed when it is made: make it again under COLUMNS=200
    try:
        text = CliRunner().invoke(app, ["show", "moe-sweep"], env={"COLUMNS": "200"}).output
    finally:
        render.console.cache_clear()
    assert "moe-sweep (bench moe_gemm)" in text
    assert "1..4096" in text and "dtype=fp32 M=1..64" in text
    assert "default preset: kimi-k2 on a CUDA host, tiny without CUDA" in text


def test_cli_show_unknown_suite() -> None:
    result = CliRunner().invoke(app, ["show", "nope"])
    assert isinstance(result.exception, SuiteError)
    assert result.exception.message == "unknown suite 'nope'"


def test_overheads_suite_is_one_case_with_the_decode_token_counts() -> None:
    spec = resolve("overheads", {"tokens": "1..16", "world_size": "2"}, cuda=True, run_id="r")
    assert spec["bench"] == "overheads" and spec["repeat"] == 50
    assert spec["cases"] == [
        {
            "H": 7168,
            "tokens": [1, 2, 4, 8, 16],
            "world_size": 2,
            "launches": 200,
            "graph_nodes": 100,
            "timeout_s": 300.0,
        }
    ]


def test_moe_sweep_accepts_the_quantized_formats() -> None:
    for dtype in ("fp8", "int4", "int4-g128"):
        spec = resolve("moe-sweep", {"dtype": dtype, "M": "1"}, cuda=True, run_id="r")
        assert spec["cases"][0]["dtype"] == dtype
    with pytest.raises(SuiteError, match="int4-g128"):
        resolve("moe-sweep", {"dtype": "int3"}, cuda=True, run_id="r")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("\u0661\u066b\u0665", "s: x must be a number written in ASCII digits 0-9, got '\u0661\u066b\u0665'"),
        ("1e400", "s: x must be finite, got inf"),
        ("1e-400", "s: x is '1e-400', not zero but below the smallest double (4.9e-324), which holds it only as 0; "
                   "write 0 if 0 is meant"),  # float() read it as 0.0: the case ran with x = 0
        ("-0." + "0" * 330 + "1", "s: x is '-0." + "0" * 330 + "1', not zero but below the smallest double"),
        ("nan", "s: x must be a number, got 'nan'"),
        ("abc", "s: x must be a number, got 'abc'"),
    ],
)
def test_float_sets_take_ascii_finite_numbers(raw: str, message: str) -> None:
    from orchestrator.suites.registry import Param

    p = Param("x", "float", 1.5, "a float")
    with pytest.raises(SuiteError) as exc:
        p.parse(raw, "s")
    assert exc.value.message.startswith(message)
    assert p.parse("0e-400", "s") == 0.0 and p.parse("-0.0", "s") == 0.0 and p.parse("5e-324", "s") == 5e-324
    assert p.parse(" 2.5e3 ", "s") == 2500.0 and p.parse("1_000.5", "s") == 1000.5 and p.parse("-.5", "s") == -0.5


def test_a_string_param_past_what_one_argument_holds_is_refused_where_it_is_written() -> None:
    """A 65 MiB string default was accepted and sent to the host; every line then came back refused as "a tool's
    large output". A parameter is one argv or environment string: Linux caps it at MAX_ARG_STRLEN."""
    from orchestrator.suites.loader import parse_suite
    from orchestrator.suites.registry import MAX_ARG_STRLEN, Param

    p = Param("tag", "str", "x", "a tag")
    assert p.parse("a" * (MAX_ARG_STRLEN - 1), "s") == "a" * (MAX_ARG_STRLEN - 1)  # with its NUL: exactly the cap
    with pytest.raises(SuiteError) as exc:
        p.parse("a" * MAX_ARG_STRLEN, "s")
    assert exc.value.message.startswith("s: tag is 131,072 bytes ('aaaaaaaaaaaaaaaaaaaa'...): a parameter reaches")
    assert "MAX_ARG_STRLEN" in exc.value.message and len(exc.value.message) < 400
    big = "é" * (MAX_ARG_STRLEN // 2)  # 2 bytes each in UTF-8: bytes count, not characters
    text = f'name: t\ndescription: d\ncommand: [echo, "{{tag}}"]\nparams:\n  tag: {{type: str, default: "{big}", ' \
           'help: "a tag"}\nparser: {name: regex, pattern: "(?P<v>\\\\d+)"}\nmetrics:\n  v: {unit: ms}\n'  # fmt: skip
    with pytest.raises(SuiteError, match="tag is 131,072 bytes"):
        parse_suite(text)


def test_int_range_edges() -> None:
    from orchestrator.suites.registry import INT64_MAX, INT64_MIN, Param

    p = Param("n", "int", 1, "a count")
    assert p.parse(str(INT64_MAX), "s") == INT64_MAX and p.parse(str(INT64_MIN), "s") == INT64_MIN
    for raw in (str(INT64_MAX + 1), str(INT64_MIN - 1), "8388608TiB"):
        with pytest.raises(SuiteError, match="outside the 64-bit signed range"):
            p.parse(raw, "s")
