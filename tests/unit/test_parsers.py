"""Engine output parsers on recorded samples (tests/fixtures/engines/, the tools' documented formats)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.parsers import PARSERS, ParseError, extract, lookup

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engines"


def _read(name: str) -> str:
    return (FIX / name).read_text()


def _values(parser: str, text: str, paths: list[str], pattern: str | None = None) -> dict[str, float]:
    found, missing = extract(PARSERS[parser].parse(text, pattern), {p: p for p in paths})
    assert missing == []
    return found


def test_sglang_one_batch_takes_the_last_result_line() -> None:
    text = _read("sglang_one_batch.jsonl")
    records, notes = PARSERS["sglang-one-batch"].parse_noted(text)
    assert [r["batch_size"] for r in records] == [16]  # one run per output: the last line, never a mix
    assert notes == [
        "the output holds 2 sglang-one-batch result records (lines 1, 2): used the last one (line 2) for every "
        "metric; the others are earlier runs appended to the same file"
    ]
    assert _values("sglang-one-batch", text, list(PARSERS["sglang-one-batch"].headline)) == {
        "prefill_latency": 0.6112,
        "prefill_throughput": 26806.28,
        "median_decode_latency": 0.013925,
        "median_decode_throughput": 1149.01,
        "total_latency": 0.8201,
        "overall_throughput": 20290.21,
    }
    assert PARSERS["sglang-one-batch"].unit_of("median_decode_latency") == "s"
    assert PARSERS["sglang-one-batch"].unit_of("median_decode_throughput") == "tok/s"


def test_sglang_one_batch_skips_the_console_log() -> None:
    got = _values("sglang-one-batch", _read("sglang_one_batch_stdout.txt"), ["batch_size", "median_decode_latency"])
    assert got == {"batch_size": 1.0, "median_decode_latency": 0.00699}


def test_sglang_one_batch_rejects_other_json_lines() -> None:
    with pytest.raises(ParseError, match="no SGLang bench_one_batch result line"):
        PARSERS["sglang-one-batch"].parse(_read("sglang_serving.jsonl"))


def test_sglang_serving_with_and_without_accept_length() -> None:
    records = PARSERS["sglang-serving"].records(_read("sglang_serving.jsonl"), None)
    assert len(records) == 2
    first, second = records
    assert lookup(first, "output_throughput") == 2667.53
    assert lookup(first, "accept_length") is None
    assert lookup(first, "request_rate") is None  # Infinity is not a metric
    assert lookup(first, "p99_itl_ms") == 9.87
    assert lookup(second, "accept_length") == 2.87
    got = _values(
        "sglang-serving", _read("sglang_serving.jsonl"), ["median_ttft_ms", "p99_tpot_ms", "p90_e2e_latency_ms"]
    )
    assert got == {"median_ttft_ms": 171.9, "p99_tpot_ms": 3.42, "p90_e2e_latency_ms": 3560.1}
    p = PARSERS["sglang-serving"]
    assert (p.unit_of("mean_itl_ms"), p.unit_of("accept_length"), p.unit_of("output_throughput")) == (
        "ms",
        "tok/step",
        "tok/s",
    )


def test_sglang_serving_metric_missing_without_speculation() -> None:
    line = _read("sglang_serving.jsonl").splitlines()[0]
    found, missing = extract(
        PARSERS["sglang-serving"].parse(line), {"acc": "accept_length", "tput": "output_throughput"}
    )
    assert found == {"tput": 2667.53} and missing == ["acc"]


def test_vllm_serve_result_json() -> None:
    got = _values(
        "vllm-serve",
        _read("vllm_serve.json"),
        [
            "output_throughput",
            "total_token_throughput",
            "mean_ttft_ms",
            "median_tpot_ms",
            "p99_itl_ms",
            "spec_decode_acceptance_length",
            "completed",
            "failed",
            "ttfts.1",
        ],
    )
    assert got == {
        "output_throughput": 2282.45,
        "total_token_throughput": 4564.90,
        "mean_ttft_ms": 201.37,
        "median_tpot_ms": 6.77,
        "p99_itl_ms": 29.6,
        "spec_decode_acceptance_length": 2.87,
        "completed": 64.0,
        "failed": 0.0,
        "ttfts.1": 0.1874,
    }
    doc = PARSERS["vllm-serve"].parse(_read("vllm_serve.json"))[0]
    assert lookup(doc, "request_rate") is None  # the string "inf"
    assert PARSERS["vllm-serve"].unit_of("spec_decode_acceptance_length") == "tok/step"


def test_vllm_latency_json() -> None:
    got = _values(
        "vllm-latency", _read("vllm_latency.json"), ["avg_latency", "percentiles.50", "percentiles.99", "latencies.3"]
    )
    assert got == {
        "avg_latency": 1.2834519,
        "percentiles.50": 1.2833818,
        "percentiles.99": 1.2878696,
        "latencies.3": 1.2879396,
    }
    p = PARSERS["vllm-latency"]
    assert (p.unit_of("percentiles.90"), p.unit_of("avg_latency")) == ("s", "s")


def test_json_and_jsonl_generic_paths() -> None:
    assert _values("json", '{"a": {"b": [1, {"c": "2.5"}]}}', ["a.b.0", "a.b.1.c"]) == {"a.b.0": 1.0, "a.b.1.c": 2.5}
    text = 'log line\n{"x": 1}\nnot json {\n{"x": 2, "y": true}\n'
    found, missing = extract(PARSERS["jsonl"].parse(text), {"x": "x", "y": "y"})
    assert found == {"x": 2.0} and missing == ["y"]  # booleans are not metrics
    with pytest.raises(ParseError, match="no JSON object"):
        PARSERS["json"].parse("nothing here")


def test_regex_named_groups_last_match_on_vllm_console() -> None:
    pattern = r"^Output token throughput \(tok/s\):\s+(?P<tput>[\d.]+)|^Median TTFT \(ms\):\s+(?P<ttft>[\d.]+)"
    got = _values("regex", _read("vllm_serve_stdout.txt"), ["tput", "ttft"], pattern)
    assert got == {"tput": 2282.45, "ttft": 187.42}
    with pytest.raises(ParseError, match="no match of the suite's pattern"):
        PARSERS["regex"].parse("nothing", r"x=(?P<x>\d+)")
