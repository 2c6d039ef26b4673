"""``vllm-latency``: the JSON of ``vllm bench latency --output-json F`` — pure.

Fields: ``avg_latency`` (s per batch: prefill plus every decode step), ``latencies`` (s, one per iteration; a
list, not a metric — ``latencies.0`` is one), ``percentiles.{10,25,50,75,90,99}`` (s).
"""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_document


def _records(text: str, pattern: str | None) -> list[Record]:
    doc = json_document(text)
    return [doc] if doc is not None else []


PARSER = ParserDef(
    "vllm-latency",
    "vLLM bench latency JSON (an object with avg_latency and percentiles)",
    _records,
    units={"avg_latency": "s"},
    unit_rules=((r"^percentiles\.\d+$", "s"), (r"^latencies\.\d+$", "s")),
    headline=("avg_latency", "percentiles.50", "percentiles.90", "percentiles.99"),
    signature=("avg_latency", "percentiles"),
)
