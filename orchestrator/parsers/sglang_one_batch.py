"""``sglang-one-batch``: the result JSONL of SGLang's ``python -m sglang.bench_one_batch --result-filename F``
— one line per (batch size, input length, output length) run; a case is one run, so every metric comes from the
last line (several lines: a note in the result's warnings) — pure.

Fields (sglang/bench_one_batch.py): ``run_name``, ``batch_size``, ``input_len``, ``output_len`` (tokens),
``prefill_latency`` (s), ``prefill_throughput`` (tok/s), ``median_decode_latency`` (s, one decode step of the
whole batch), ``median_decode_throughput`` (tok/s), ``total_latency`` (s), ``overall_throughput`` (tok/s).
"""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_lines

UNITS = {
    "batch_size": "req",
    "input_len": "tok",
    "output_len": "tok",
    "prefill_latency": "s",
    "prefill_throughput": "tok/s",
    "median_decode_latency": "s",
    "median_decode_throughput": "tok/s",
    "total_latency": "s",
    "overall_throughput": "tok/s",
}


def _records(text: str, pattern: str | None) -> list[Record]:
    return list(json_lines(text, numbered=True))


PARSER = ParserDef(
    "sglang-one-batch",
    "SGLang bench_one_batch result line (a JSON line with batch_size and median_decode_throughput)",
    _records,
    units=UNITS,
    headline=(
        "prefill_latency",
        "prefill_throughput",
        "median_decode_latency",
        "median_decode_throughput",
        "total_latency",
        "overall_throughput",
    ),
    signature=("batch_size", "median_decode_throughput"),
    single=True,
)
