"""The parse worker (orchestrator/parsepool.py) with real processes: a catastrophic regex is stopped at the suite's
deadline and the next parse gets a fresh worker; a 100 MB JSON output parses; one past the memory cap is a clear
error; a cancelled await stops the parse."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from orchestrator.parsepool import INLINE_PARSE_CHARS, ParsePool, inline
from orchestrator.parsers import ParseError
from orchestrator.suites.command import CommandSuite, MetricDef


def _suite(parser: str, pattern: str | None = None, timeout_s: float = 5.0) -> CommandSuite:
    return CommandSuite(source="s.yaml", argv=("tool",), env={}, timeout_s=60, grid=None, parser=parser,
                        pattern=pattern, metrics=(MetricDef("v", "v", "ms"),), parse_timeout_s=timeout_s)  # fmt: skip


@pytest.fixture
def pool() -> Iterator[ParsePool]:
    p = ParsePool()
    yield p
    p.close()


def test_catastrophic_regex_stops_at_the_deadline_and_the_next_parse_works(pool: ParsePool) -> None:
    out = pool.parse(_suite("regex", r"(?P<v>(a+)+)b"), ["a" * 40 + "!\n"], {})  # the tester's pattern and output
    assert isinstance(out, ParseError)
    assert str(out) == ("parser regex took longer than 5 s on 42 bytes of output (catastrophic backtracking?); "
                        "it was stopped (suite key parse_timeout_s)")  # fmt: skip
    good = pool.parse(_suite("regex", r"(?P<v>\d+) ms"), ["took 12 ms\n", "took 14 ms\n"], {"case": 1})
    assert not isinstance(good, ParseError)
    assert good.metrics["v"].value == 13.0 and good.metrics["v"].samples == [12.0, 14.0] and good.counts == []
    nothing = pool.parse(_suite("regex", r"(?P<v>\d+) ms"), ["no figure here"], {})
    assert isinstance(nothing, ParseError)
    assert str(nothing) == "parser regex found no match of the suite's pattern in the output"


def _big_json() -> str:
    doc = json.dumps({"v": 1.5, "pad": [{"k": i, "s": "x" * 10} for i in range(3_000_000)]})
    assert len(doc) > 100_000_000
    return doc


def test_a_100_mb_json_output_parses_and_past_the_memory_cap_is_a_clear_error() -> None:
    big = _big_json()
    roomy = ParsePool()
    try:
        out = roomy.parse(_suite("json", timeout_s=600), [big], {})
        assert not isinstance(out, ParseError), out
        assert out.metrics["v"].value == 1.5
    finally:
        roomy.close()
    tight = ParsePool(memory_bytes=256 << 20)
    try:
        out = tight.parse(_suite("json", timeout_s=600), [big], {})
        assert isinstance(out, ParseError)
        assert str(out) == f"parser json ran out of memory (limit 256 MiB) on {len(big)} bytes of output"
    finally:
        tight.close()


def test_cancelling_the_await_stops_the_parse(pool: ParsePool) -> None:
    async def go() -> None:
        task = asyncio.ensure_future(pool.parse_async(_suite("regex", r"(?P<v>(a+)+)b", 600), ["a" * 40 + "!"], {}))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the worker that was stuck is gone: the next parse is answered long before the 600 s deadline
        good = await pool.parse_async(_suite("regex", r"(?P<v>\d+) ms"), ["7 ms"], {})
        assert not isinstance(good, ParseError) and good.metrics["v"].value == 7.0

    asyncio.run(asyncio.wait_for(go(), timeout=120))


def test_a_small_output_without_a_user_pattern_is_parsed_here_without_the_worker(pool: ParsePool) -> None:
    """json and the engine formats on a small output: parsed in this process (no worker start, ~0.1-0.3 s of a
    one-case run); a regex, or an output over INLINE_PARSE_CHARS, goes to the worker."""
    small = ['{"v": 2.5}']
    assert inline(_suite("json"), small) and not inline(_suite("regex", r"(?P<v>\d+)"), ["7"])
    assert not inline(_suite("json"), ['{"v": 1, "pad": "' + "x" * INLINE_PARSE_CHARS + '"}'])
    out = pool.parse(_suite("json"), small, {})
    assert not isinstance(out, ParseError) and out.metrics["v"].value == 2.5
    bad = asyncio.run(pool.parse_async(_suite("json"), ["not json"], {}))
    assert isinstance(bad, ParseError) and "json" in str(bad)
    assert not pool.started_worker()  # neither parse started a worker process
    rx = pool.parse(_suite("regex", r"(?P<v>\d+) ms"), ["7 ms"], {})
    assert not isinstance(rx, ParseError) and rx.metrics["v"].value == 7.0
    assert pool.started_worker()
