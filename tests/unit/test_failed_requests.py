"""Serving benchmarks with failed requests (issue 11 item 2): completed == 0 is an error for the case, failed > 0
is stored as ``failed_requests`` with a warning, and above the suite's ``max_failed_requests`` (default 1%) the
case is an error — for vLLM ``bench serve`` and SGLang ``bench_serving``, through the real parsers and the
command-suite transform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import SuiteError
from orchestrator.parsers import PARSERS
from orchestrator.parsers.base import RequestCounts, request_counts
from orchestrator.protocol import Event
from orchestrator.suites.command import command_result
from orchestrator.suites.loader import parse_suite

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
VLLM = json.loads((FIX / "vllm_serve.json").read_text())
SGLANG = json.loads((FIX / "sglang_serving.jsonl").read_text().splitlines()[0].replace("Infinity", "1e999"))
LATENCIES = [k for k in VLLM if k.endswith("_ms")]


def _suite(parser: str, extra: str = "") -> Any:
    text = f"""\
name: serve
description: a serving benchmark
command: ["bench", "--out", "{{output}}"]
parser: {parser}
{extra}"""
    sd = parse_suite(text, "serve.yaml")
    assert sd.command is not None
    return sd.command


def _run(parser: str, doc: dict[str, Any], extra: str = "") -> Event:
    case = {"argv": ["bench"], "env": {}, "timeout_s": 60.0}
    data = {"case_index": 0, "case": case, "metrics": {"wall_ms": {"value": 9.0, "unit": "ms"}},
            "info": {"stdout": "", "output": json.dumps(doc)}}  # fmt: skip
    return command_result(_suite(parser, extra), Event(seq=3, type="result", data=data), "g")


def _vllm(num_prompts: int, completed: int, failed: int, latency: float | None = None) -> dict[str, Any]:
    doc = {**VLLM, "num_prompts": num_prompts, "completed": completed, "failed": failed}
    if latency is not None:
        doc |= dict.fromkeys(LATENCIES, latency)
    return doc


def test_vllm_every_request_failed_is_an_error_not_the_fastest_run() -> None:
    ev = _run("vllm-serve", _vllm(200, 0, 200, latency=0.0) | {"output_throughput": 0.0})
    assert ev.type == "error" and ev.data["kind"] == "requests"
    assert ev.data["message"] == "parser vllm-serve: 0 of 200 requests completed: the tool measured nothing"
    assert "metrics" not in ev.data


def test_vllm_99_of_100_failed_is_an_error_above_the_default_1_percent() -> None:
    ev = _run("vllm-serve", _vllm(100, 1, 99))
    assert ev.type == "error" and ev.data["kind"] == "requests"
    assert ev.data["message"].startswith(
        "parser vllm-serve: 99 of 100 requests failed (99.0%), above the suite's limit of 1% (max_failed_requests)"
    )


def test_vllm_a_few_failed_is_stored_with_failed_requests_and_a_warning() -> None:
    ev = _run("vllm-serve", _vllm(1000, 995, 5))
    assert ev.type == "result"
    assert ev.data["metrics"]["failed_requests"] == {"value": 5.0, "unit": "req"}
    assert ev.data["info"]["warnings"] == ["5 of 1000 requests failed (0.5%)"]
    assert ev.data["metrics"]["mean_ttft_ms"]["value"] == VLLM["mean_ttft_ms"]


def test_vllm_recorded_sample_has_no_failure_and_no_warning() -> None:
    ev = _run("vllm-serve", VLLM)
    assert ev.type == "result" and ev.data["metrics"]["failed_requests"] == {"value": 0.0, "unit": "req"}
    assert "warnings" not in ev.data["info"]


def test_the_suite_sets_the_threshold() -> None:
    ev = _run("vllm-serve", _vllm(100, 90, 10), "max_failed_requests: 10%\n")
    assert ev.type == "result" and ev.data["info"]["warnings"] == ["10 of 100 requests failed (10.0%)"]
    ev = _run("vllm-serve", _vllm(100, 99, 1), "max_failed_requests: 0%\n")
    assert ev.type == "error" and "above the suite's limit of 0%" in ev.data["message"]
    with pytest.raises(SuiteError) as exc:
        _suite("vllm-serve", "max_failed_requests: ten\n")
    assert "max_failed_requests" in exc.value.message and "'ten' is not a percentage" in exc.value.message
    assert exc.value.hint == "write the share of requests that may fail, e.g. '1%' or '0%'"
    assert _suite("vllm-serve").describe()["max_failed_requests"] == "1%"


def test_sglang_completed_zero_is_an_error_even_without_a_total() -> None:
    ev = _run("sglang-serving", SGLANG | {"completed": 0})
    assert ev.type == "error" and ev.data["message"] == (
        "parser sglang-serving: 0 of ? requests completed: the tool measured nothing"
    )


def test_sglang_output_details_errors_list() -> None:
    """``--output-details`` adds one ``errors`` entry per request ("" when it succeeded)."""
    errors = [""] * 198 + ["HTTP 500: out of memory", "timeout"]
    ev = _run("sglang-serving", SGLANG | {"completed": 198, "errors": errors})
    assert ev.type == "result" and ev.data["metrics"]["failed_requests"]["value"] == 2.0
    assert ev.data["info"]["warnings"] == ["2 of 200 requests failed (1.0%)"]  # at the limit: still a result
    ev = _run("sglang-serving", SGLANG | {"completed": 197, "errors": [""] * 197 + ["timeout"] * 3})
    assert ev.type == "error" and ev.data["message"].startswith("parser sglang-serving: 3 of 200 requests failed")


def test_sglang_input_lens_count_the_requests_sent() -> None:
    ev = _run("sglang-serving", SGLANG | {"completed": 150, "input_lens": [1024] * 160})
    assert ev.type == "error" and ev.data["message"].startswith(
        "parser sglang-serving: 10 of 160 requests failed (6.2%), above the suite's limit of 1%"
    )
    ev = _run("sglang-serving", SGLANG)  # the recorded sample says nothing of failures: nothing invented
    assert ev.type == "result" and "failed_requests" not in ev.data["metrics"]


@pytest.mark.parametrize(
    ("record", "counts"),
    [
        ({"completed": 64, "failed": 0, "num_prompts": 64}, RequestCounts(64, 0, 64)),
        ({"completed": 10, "failures": 2}, RequestCounts(10, 2, 12)),
        ({"completed": 3, "errors": ["", "boom", "", ""]}, RequestCounts(3, 1, 4)),
        ({"completed": 3, "input_lens": [1, 2, 3, 4, 5]}, RequestCounts(3, 2, 5)),
        ({"completed": 7}, RequestCounts(7, None, None)),
        ({"output_throughput": 1.0}, None),
    ],
)
def test_request_counts(record: dict[str, Any], counts: RequestCounts | None) -> None:
    assert request_counts(record) == counts


def test_only_tools_that_report_requests_have_counts() -> None:
    assert {n for n, p in PARSERS.items() if p.requests is not None} == {"vllm-serve", "sglang-serving"}
