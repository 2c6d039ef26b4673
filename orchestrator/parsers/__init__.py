"""Parsers of benchmark tools' outputs into metric values — pure (STYLE rule 6: the command runs on the host,
its output is parsed here, and each parser is tested on recorded samples in ``tests/fixtures/engines/``).

One module per format; ``PARSERS`` maps a suite file's ``parser:`` name to its :class:`ParserDef`:

=================== =====================================================================================
``json``            one JSON object (or the last that begins a line); metrics are dotted field paths
``jsonl``           JSON lines; every metric from the last line (one run per output)
``regex``           named groups of a pattern; each metric from the last match
``sglang-one-batch`` SGLang ``bench_one_batch`` result JSONL
``sglang-serving``  SGLang ``bench_serving`` result JSONL (``accept_length`` when speculative)
``vllm-serve``      vLLM ``bench serve --save-result`` JSON (``spec_decode_acceptance_length`` when present)
``vllm-latency``    vLLM ``bench latency --output-json`` JSON
``nccl-tests``      nccl-tests (``all_reduce_perf`` & co.) text table or ``-J`` JSON; one row per case's size
=================== =====================================================================================
"""

from __future__ import annotations

from orchestrator.parsers import (
    json_doc,
    jsonl,
    nccl_tests,
    regex,
    sglang_one_batch,
    sglang_serving,
    vllm_latency,
    vllm_serve,
)
from orchestrator.parsers.base import (
    InvalidMeasurement,
    ParseError,
    ParserDef,
    Record,
    RequestCounts,
    extract,
    lookup,
)

PARSERS: dict[str, ParserDef] = {
    p.name: p
    for p in (
        json_doc.PARSER,
        jsonl.PARSER,
        regex.PARSER,
        sglang_one_batch.PARSER,
        sglang_serving.PARSER,
        vllm_serve.PARSER,
        vllm_latency.PARSER,
        nccl_tests.PARSER,
    )
}

__all__ = ["PARSERS", "InvalidMeasurement", "ParseError", "ParserDef", "Record", "RequestCounts", "extract", "lookup"]
