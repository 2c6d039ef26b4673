"""Suites declared in YAML: loading, errors naming file:line:key, grids, references, the result transform."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import SuiteError
from orchestrator.protocol import Event
from orchestrator.suites.command import command_result, parse_bound, placeholders
from orchestrator.suites.loader import load_registry, parse_suite
from orchestrator.suites.registry import resolve

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engines"

SUITE = """\
name: fake-decode
description: decode of a fake engine
command: ["{build}/bin/fake-engine", "one-batch", "--batch", "{batch}", "--in", "{input_len}", "--out", "{output_len}"]
params:
  batch: {type: list, default: "1..4", help: "sequences per batch"}
  input_len: {type: list, default: [128, 1024], help: "prompt, tokens"}
  output_len: {type: list, default: {start: 16, stop: 32, step: 16}, help: "generated tokens"}
  mode: {type: str, default: fast, choices: [fast, slow], help: "engine mode"}
grid: {cross: [batch, {zip: [input_len, output_len]}]}
sweep: batch
timeout_s: 30
env: {FAKE_MODE: "{mode}", LITERAL: "{{x}}"}
parser: sglang-one-batch
metrics:
  decode_tput: {path: median_decode_throughput}
  decode_s: {path: median_decode_latency}
references:
  "*": {decode_tput: ">= 100 tok/s"}
  b300: {decode_tput: "1000 tok/s ±10%", decode_s: "<= 0.01 s"}
presets:
  one: {description: "batch 1 only", values: {batch: [1]}}
"""


def test_suite_file_resolves_to_grid_cases_with_argv() -> None:
    sd = parse_suite(SUITE, "my/fake.yaml")
    assert sd.bench == "command" and sd.sweep == "batch"
    spec = resolve(sd, {}, cuda=False, run_id="r")
    assert spec["repeat"] == 1 and spec["warmup"] == 0
    points = [(c["batch"], c["input_len"], c["output_len"]) for c in spec["cases"]]
    assert points == [(1, 128, 16), (1, 1024, 32), (2, 128, 16), (2, 1024, 32), (4, 128, 16), (4, 1024, 32)]
    first = spec["cases"][0]
    assert first == {
        "mode": "fast",
        "batch": 1,
        "input_len": 128,
        "output_len": 16,
        "argv": ["{orch_build}/bin/fake-engine", "one-batch", "--batch", "1", "--in", "128", "--out", "16"],
        "env": {"FAKE_MODE": "fast", "LITERAL": "{x}"},
        "timeout_s": 30.0,
    }
    spec = resolve(sd, {"batch": "8", "mode": "slow"}, preset="one", repeat=3, cuda=False, run_id="r")
    assert [c["batch"] for c in spec["cases"]] == [8, 8] and spec["repeat"] == 3
    assert spec["cases"][0]["env"]["FAKE_MODE"] == "slow"


def test_zip_of_unequal_lengths_is_a_suite_error() -> None:
    sd = parse_suite(SUITE, "my/fake.yaml")
    with pytest.raises(SuiteError, match=r"zipped axes have different lengths \(input_len: 3, output_len: 2\)"):
        resolve(sd, {"input_len": "1,2,3"}, cuda=False, run_id="r")


def test_describe_shows_the_file_parts() -> None:
    doc = parse_suite(SUITE, "my/fake.yaml").describe()
    assert doc["source"] == "my/fake.yaml" and doc["parser"] == "sglang-one-batch"
    assert doc["grid"] == {"cross": ["batch", {"zip": ["input_len", "output_len"]}]}
    assert doc["metrics"] == [
        {"name": "decode_tput", "path": "median_decode_throughput", "unit": "tok/s"},
        {"name": "decode_s", "path": "median_decode_latency", "unit": "s"},
    ]
    assert doc["references"]["b300"] == {"decode_tput": "1000 tok/s ±10%", "decode_s": "<= 0.01 s"}


def _break(old: str, new: str) -> str:
    assert old in SUITE
    return SUITE.replace(old, new, 1)


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        (
            _break("sweep: batch", "sweeep: batch"),
            "f.yaml:10: sweeep: Extra inputs are not permitted",
            "remove or rename",
        ),
        (_break("timeout_s: 30", "timeout_s: soon"), "f.yaml:11: timeout_s: Input should be a valid number", "type"),
        (
            _break("{type: str, default: fast", "{type: string, default: fast"),
            "f.yaml:8: params.mode.type:",
            "int, float",
        ),
        (
            _break("parser: sglang-one-batch", "parser: sglang-one"),
            "f.yaml:13: parser: unknown parser 'sglang-one'",
            "vllm-serve",
        ),
        (
            _break('">= 100 tok/s"', '"at least 100"'),
            "f.yaml:18: references.*.decode_tput: reference 'at least 100'",
            ">= 120",
        ),
        (
            _break('"<= 0.01 s"', '"<= 10 ms"'),
            "f.yaml:19: references.b300.decode_s: bound unit 'ms' but decode_s is in 's'",
            "in s",
        ),
        (
            _break('"--in", "{input_len}"', '"--in", "{inputlen}"'),
            "f.yaml:3: command[5]: unknown placeholder {inputlen}",
            "declare",
        ),
        (
            _break('"--in"', '"--in{"'),
            "f.yaml:3: command[4]: lone '{' in '--in{'; write {{ for a literal brace",
            "placeholders",
        ),
        (
            _break("{type: list, default: [128, 1024]", "{type: list, default: [128, many]"),
            "f.yaml:6: params.input_len.default: input_len must be an integer, got 'many'",
            "",
        ),
        (
            _break("grid: {cross: [batch, {zip: [input_len, output_len]}]}", "grid: {cross: [batch, input_len]}"),
            "f.yaml:9: grid: list parameter(s) output_len not in the grid",
            "",
        ),
        (_break("  mode: {", "  repeat: {"), "f.yaml:8: params.repeat: 'repeat' is reserved", ""),
        (
            _break(
                "decode_tput: {path: median_decode_throughput}",
                "decode_tput: {path: median_decode_throughput, unit: ms}",
            ),
            "f.yaml:15: metrics.decode_tput.unit: sglang-one-batch reports median_decode_throughput in 'tok/s'",
            "",
        ),
        (_break("name: fake-decode", "name: fake-decode\nname: again"), "f.yaml:2: name: duplicate key", ""),
        ("name: x\n  bad: [", "f.yaml:2: not valid YAML", ""),
    ],
)
def test_each_kind_of_mistake_names_file_line_and_key(text: str, message: str, hint: str) -> None:
    with pytest.raises(SuiteError) as exc:
        parse_suite(text, "f.yaml")
    assert exc.value.message.startswith(message), exc.value.message
    assert hint in exc.value.hint
    assert exc.value.exit_code == 2


def test_generic_parsers_need_metrics_with_units() -> None:
    base = 'name: g\ndescription: d\ncommand: ["x"]\n'
    with pytest.raises(SuiteError, match="f.yaml:4: parser: parser json needs its metrics listed"):
        parse_suite(base + "parser: json\n", "f.yaml")
    with pytest.raises(SuiteError, match="f.yaml:5: metrics.t: no unit"):
        parse_suite(base + "parser: json\nmetrics: {t: {path: a.b}}\n", "f.yaml")
    with pytest.raises(SuiteError, match="f.yaml:4: parser.pattern: the pattern has no named group"):
        parse_suite(base + "parser: {name: regex, pattern: 'x'}\nmetrics: {t: {unit: ms}}\n", "f.yaml")
    with pytest.raises(SuiteError, match="f.yaml:5: metrics.t: the pattern has no group 't'"):
        parse_suite(base + "parser: {name: regex, pattern: 'x=(?P<x>.)'}\nmetrics: {t: {unit: ms}}\n", "f.yaml")
    sd = parse_suite(base + "parser: {name: regex, pattern: 'x=(?P<x>[0-9]+)'}\nmetrics: {t: {path: x, unit: ms}}\n")
    assert resolve(sd, {}, cuda=False, run_id="r")["cases"] == [{"argv": ["x"], "env": {}, "timeout_s": 600.0}]


def test_engine_parser_without_metrics_takes_its_headline() -> None:
    sd = parse_suite('name: v\ndescription: d\ncommand: ["x"]\nparser: vllm-latency\n')
    assert sd.command is not None
    assert [(m.name, m.path, m.unit) for m in sd.command.metrics] == [
        ("avg_latency", "avg_latency", "s"),
        ("percentiles_50", "percentiles.50", "s"),
        ("percentiles_90", "percentiles.90", "s"),
        ("percentiles_99", "percentiles.99", "s"),
    ]


@pytest.mark.parametrize(
    ("text", "lower", "upper", "unit"),
    [
        (">= 120 tok/s", 120.0, None, "tok/s"),
        ("<= 2 ms", None, 2.0, "ms"),
        ("1.2 ms ±10%", 1.08, 1.32, "ms"),
        ("1.2 ms +-0.1", 1.1, 1.3, "ms"),
        ("100..140 tok/s", 100.0, 140.0, "tok/s"),
        (">= 3", 3.0, None, None),
    ],
)
def test_parse_bound(text: str, lower: float | None, upper: float | None, unit: str | None) -> None:
    b = parse_bound(text)
    assert b.lower == pytest.approx(lower) if lower is not None else b.lower is None
    assert b.upper == pytest.approx(upper) if upper is not None else b.upper is None
    assert b.unit == unit


def test_placeholders() -> None:
    assert placeholders("{build}/bin/x --n={n} {{literal}}") == ["build", "n"]
    with pytest.raises(ValueError, match="lone '}'"):
        placeholders("a}")


def _result(stdout: str, case: dict[str, object] | None = None) -> Event:
    case = case or {"batch": 1, "argv": ["{orch_build}/bin/x"], "env": {}, "timeout_s": 30.0}
    return Event(
        seq=3,
        type="result",
        data={
            "case_index": 0,
            "case": case,
            "metrics": {"wall_ms": {"value": 12.5, "unit": "ms"}},
            "info": {"argv": ["/h/.orch/builds/current/bin/x"], "exit_status": 0, "stdout": stdout, "stderr": ""},
        },
    )


def test_command_result_parses_metrics_and_checks_references_per_group() -> None:
    sd = parse_suite(SUITE, "f.yaml")
    assert sd.command is not None
    text = (FIX / "sglang_one_batch.jsonl").read_text()
    ev = command_result(sd.command, _result(text), "b300")
    assert ev.type == "result"
    assert ev.case == {"batch": 1}
    assert ev.data["metrics"] == {
        "wall_ms": {"value": 12.5, "unit": "ms"},
        "decode_tput": {"value": 1149.01, "unit": "tok/s"},
        "decode_s": {"value": 0.013925, "unit": "s"},
    }
    info = ev.data["info"]
    assert info["references"] == {
        "decode_tput": {"bound": "1000 tok/s ±10%", "lower": 900.0, "upper": 1100.0, "value": 1149.01, "pass": False},
        "decode_s": {"bound": "<= 0.01 s", "lower": None, "upper": 0.01, "value": 0.013925, "pass": False},
    }
    assert info["command"] == ["{orch_build}/bin/x"] and info["parser"] == "sglang-one-batch"
    assert info["output_tail"] == text and "stdout" not in info
    other = command_result(sd.command, _result(text), "ct200").data["info"]["references"]
    assert other == {
        "decode_tput": {"bound": ">= 100 tok/s", "lower": 100.0, "upper": None, "value": 1149.01, "pass": True}
    }
    json.dumps(ev.data, allow_nan=False)


def test_command_result_with_several_runs_keeps_samples() -> None:
    sd = parse_suite(SUITE, "f.yaml")
    assert sd.command is not None
    lines = (FIX / "sglang_one_batch.jsonl").read_text().splitlines()
    ev = _result(lines[0])
    ev.data["info"]["outputs"] = [lines[0], lines[1], lines[0]]
    m = command_result(sd.command, ev, "ct200").data["metrics"]["decode_tput"]
    assert m["value"] == 143.06 and m["samples"] == [143.06, 1149.01, 143.06] and m["n"] == 3
    assert m["min"] == 143.06 and m["max"] == 1149.01


def test_command_result_without_the_metric_is_an_error_event() -> None:
    sd = parse_suite(SUITE, "f.yaml")
    assert sd.command is not None
    ev = command_result(sd.command, _result("Loading model\nready\n"), "b300")
    assert ev.type == "error" and ev.seq == 3 and ev.data["kind"] == "parse"
    assert ev.data["message"] == (
        "parser sglang-one-batch found no SGLang bench_one_batch result line (a JSON line with batch_size and "
        "median_decode_throughput) in the output; last output lines: Loading model | ready"
    )
    assert ev.case == {"batch": 1} and ev.data["case_index"] == 0
    serving = (FIX / "sglang_one_batch.jsonl").read_text().replace("median_decode_latency", "other")
    ev = command_result(sd.command, _result(serving), "b300")
    assert ev.type == "error"
    assert ev.data["message"].startswith(
        "parser sglang-one-batch found no metric decode_s in the output (looked for median_decode_latency)"
    )


def test_command_result_strips_command_keys_from_error_cases() -> None:
    sd = parse_suite(SUITE, "f.yaml")
    assert sd.command is not None
    ev = Event(
        seq=4, type="error", data={"message": "boom", "case": {"batch": 2, "argv": ["x"], "env": {}, "timeout_s": 1.0}}
    )
    out = command_result(sd.command, ev, "b300")
    assert out.type == "error" and out.case == {"batch": 2} and out.data["command"] == ["x"]


def test_registry_loads_packaged_and_user_dirs_and_rejects_duplicates(tmp_path: Path) -> None:
    reg = load_registry()
    assert "sglang-one-batch" in reg.names() and "moe-sweep" in reg.names()
    d = tmp_path / "suites"
    d.mkdir()
    (d / "fake.yaml").write_text(SUITE)
    assert load_registry([d]).get("fake-decode").bench == "command"
    (d / "again.yml").write_text(SUITE)
    with pytest.raises(
        SuiteError,
        match="suite 'fake-decode' is defined in .*fake.yaml and in .*again.yml|"
        "suite 'fake-decode' is defined in .*again.yml and in .*fake.yaml",
    ):
        load_registry([d])
    (d / "again.yml").write_text(SUITE.replace("fake-decode", "moe-sweep"))
    with pytest.raises(SuiteError, match="suite 'moe-sweep' is defined in built-in and in"):
        load_registry([d])
    with pytest.raises(SuiteError, match="suite directory .*nope does not exist"):
        load_registry([tmp_path / "nope"])


def test_cli_lists_and_shows_user_suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from orchestrator.cli.suites import app

    monkeypatch.chdir(tmp_path)  # no inventory.yaml here
    d = tmp_path / "suites"
    d.mkdir()
    (d / "fake.yaml").write_text(SUITE)
    res = CliRunner().invoke(app, ["list", "--json", "--suite-dir", str(d)])
    assert res.exit_code == 0, res.output
    rows = {s["name"]: s for s in json.loads(res.output)["suites"]}
    assert rows["fake-decode"]["source"] == str(d / "fake.yaml") and rows["fake-decode"]["bench"] == "command"
    assert rows["sglang-one-batch"]["source"].endswith("orchestrator/suites/sglang-one-batch.yaml")
    assert rows["moe-sweep"]["source"] == "built-in"
    monkeypatch.setenv("ORCH_SUITE_DIR", str(d))
    text = CliRunner().invoke(app, ["show", "fake-decode"], env={"COLUMNS": "200"}).output
    assert "fake-decode (bench command): decode of a fake engine" in text
    assert "command: '{build}/bin/fake-engine' one-batch --batch '{batch}'" in text
    assert "│ decode_tput │ median_decode_throughput │ tok/s │" in text
    assert "│ b300  │ decode_tput │ 1000 tok/s ±10% │" in text
    (d / "bad.yaml").write_text(SUITE.replace("sweep: batch", "sweeep: batch").replace("fake-decode", "bad"))
    res = CliRunner().invoke(app, ["list"])
    assert isinstance(res.exception, SuiteError)
    assert res.exception.message == f"{d / 'bad.yaml'}:10: sweeep: Extra inputs are not permitted"


def test_headline_metrics_are_optional_but_not_all_missing() -> None:
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: sglang-serving\n')
    assert sd.command is not None
    lines = (FIX / "sglang_serving.jsonl").read_text().splitlines()
    plain = command_result(sd.command, _result(lines[0]), "g").data["metrics"]
    assert "accept_length" not in plain and plain["output_throughput"] == {"value": 2667.53, "unit": "tok/s"}
    spec = command_result(sd.command, _result(lines[1]), "g").data["metrics"]
    assert spec["accept_length"] == {"value": 2.87, "unit": "tok/step"}
    assert sorted(spec) == sorted(["wall_ms", *(m.name for m in sd.command.metrics)])
    ev = command_result(sd.command, _result('{"completed": 1, "duration": 2, "output_throughput": "n/a"}'), "g")
    assert ev.type == "error" and ev.data["message"].startswith(
        "parser sglang-serving: metric 'output_throughput' in the output is 'n/a', not a number"
    )  # the field is there: its value is named (it said "found no metric output_throughput")
