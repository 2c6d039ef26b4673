"""The per-format parser modules where their mutation runs found them unguarded (docs/testing.md): a JSON format
handed an output without its JSON (vLLM's console summary, what a run without ``--save-result`` /
``--output-json`` leaves) is a ParseError naming the format, and the regex format refuses to run without a
pattern — on the recorded samples of tests/fixtures/engines/."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.parsers import PARSERS, ParseError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
CONSOLE = (FIX / "vllm_serve_stdout.txt").read_text()


@pytest.mark.parametrize(
    ("parser", "message"),
    [
        ("vllm-serve", "no vLLM bench serve result JSON (an object with completed, duration and output_throughput) "
         "in the output"),
        ("vllm-latency", "no vLLM bench latency JSON (an object with avg_latency and percentiles) in the output"),
        ("json", "no JSON object in the output"),
    ],
)  # fmt: skip
def test_a_json_format_on_the_console_summary_is_a_parse_error(parser: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        PARSERS[parser].parse(CONSOLE)
    assert str(exc.value) == message


def test_the_regex_format_needs_a_pattern() -> None:
    """The suite loader refuses a regex parser without one (with the suite file's line); the format itself
    refuses too, rather than matching nothing."""
    for pattern in (None, ""):
        with pytest.raises(ValueError) as exc:
            PARSERS["regex"].parse(CONSOLE, pattern)
        assert str(exc.value) == "the regex parser needs a pattern"
