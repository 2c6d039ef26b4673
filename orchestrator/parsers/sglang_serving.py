"""``sglang-serving``: the JSONL that SGLang's ``python -m sglang.bench_serving --output-file F`` appends, one
line per benchmark run — pure. The file is appended to, so a reused file holds earlier runs: every metric comes
from the last line, never a field of an earlier run, and several lines add a note to the result's warnings.

Fields: ``backend``, ``request_rate`` (req/s; ``Infinity`` when unbounded, not a metric then),
``max_concurrency``, ``duration`` (s), ``completed`` (requests), ``request_throughput`` (req/s),
``input_throughput`` / ``output_throughput`` (tok/s), ``{mean,median,std,p90,p95,p99}_{e2e_latency,ttft,tpot,itl}_ms``
(ms), ``concurrency`` (mean requests in flight), and ``accept_length`` (mean tokens accepted per
speculative-decoding verify step) when speculative decoding is on.
"""

from __future__ import annotations

from orchestrator.parsers.base import SERVING_LATENCY_HEADLINE, ParserDef, Record, json_lines, request_counts

UNITS = {
    "request_rate": "req/s",
    "max_concurrency": "req",
    "duration": "s",
    "completed": "req",
    "total_input_tokens": "tok",
    "total_output_tokens": "tok",
    "request_throughput": "req/s",
    "input_throughput": "tok/s",
    "output_throughput": "tok/s",
    "total_throughput": "tok/s",
    "concurrency": "req",
    "accept_length": "tok/step",
}


def _records(text: str, pattern: str | None) -> list[Record]:
    return list(json_lines(text, numbered=True))


PARSER = ParserDef(
    "sglang-serving",
    "SGLang bench_serving result line (a JSON line with backend, completed and output_throughput)",
    _records,
    units=UNITS,
    unit_rules=((r"_ms$", "ms"),),
    headline=(
        "output_throughput",
        *SERVING_LATENCY_HEADLINE,
        "accept_length",
    ),
    requests=request_counts,
    signature=("completed", "output_throughput", "duration"),
    single=True,
)
