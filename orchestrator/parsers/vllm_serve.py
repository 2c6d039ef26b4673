"""``vllm-serve``: the result JSON of ``vllm bench serve --save-result [--result-filename F]`` — pure.

Fields: ``duration`` (s), ``completed``, ``failed`` (requests), ``request_throughput`` (req/s),
``output_throughput`` / ``total_token_throughput`` (tok/s), ``{mean,median,std,p99}_{ttft,tpot,itl,e2el}_ms``
(ms; other percentiles with ``--metric-percentiles``), ``max_concurrency``, and with speculative decoding
``spec_decode_acceptance_length`` (mean tokens per verify step, the accepted drafts plus the bonus token) and
``spec_decode_acceptance_rate`` (%). Per-request lists (``ttfts``, ``itls``, ...) are kept out of metrics.
"""

from __future__ import annotations

from orchestrator.parsers.base import SERVING_LATENCY_HEADLINE, ParserDef, Record, json_document, request_counts

UNITS = {
    "duration": "s",
    "completed": "req",
    "failed": "req",
    "num_prompts": "req",
    "max_concurrency": "req",
    "total_input_tokens": "tok",
    "total_output_tokens": "tok",
    "request_throughput": "req/s",
    "request_goodput": "req/s",
    "output_throughput": "tok/s",
    "total_token_throughput": "tok/s",
    "max_output_tokens_per_s": "tok/s",
    "max_concurrent_requests": "req",
    "spec_decode_acceptance_length": "tok/step",
    "spec_decode_acceptance_rate": "%",
}


def _records(text: str, pattern: str | None) -> list[Record]:
    doc = json_document(text)
    return [doc] if doc is not None else []


PARSER = ParserDef(
    "vllm-serve",
    "vLLM bench serve result JSON (an object with completed, duration and output_throughput)",
    _records,
    units=UNITS,
    unit_rules=((r"_ms$", "ms"),),
    headline=(
        "output_throughput",
        *SERVING_LATENCY_HEADLINE,
        "spec_decode_acceptance_length",
    ),
    requests=request_counts,
    signature=("completed", "duration", "output_throughput"),
)
