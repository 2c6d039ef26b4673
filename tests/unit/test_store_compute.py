"""The store's pure helpers (``orchestrator/store/compute.py``): run ids, case keys, typed axes, timestamps, the
geometric mean and median of compare, bounded logs and the metric check of the ingest hot path. Expected values
are written out (RFC 9562's UUIDv7 layout, sha256 of the canonical JSON) rather than recomputed by the code under
test; these are the guards of its mutation run (docs/testing.md)."""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import datetime, timezone
from pathlib import PurePosixPath
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.protocol import parse_metric
from orchestrator.store import compute as c

# 2023-11-14T22:13:20.123456789Z: 1_700_000_000_123 ms = 0x018bcfe5687b
NS = 1_700_000_000_123_456_789


@pytest.mark.parametrize(
    ("rand", "want"),
    [
        (b"\x00" * 10, "018bcfe5-687b-7000-8000-000000000000"),
        (b"\xff" * 10, "018bcfe5-687b-7fff-bfff-ffffffffffff"),
        (b"\x00" * 2 + b"\xff" * 8, "018bcfe5-687b-7003-bfff-ffffffffffff"),  # rand_a takes bits 62..73
        (b"\xff" * 2 + b"\x00" * 8, "018bcfe5-687b-7ffc-8000-000000000000"),
        (bytes(range(10)), "018bcfe5-687b-7004-8203-040506070809"),
    ],
)
def test_uuid7_layout_of_rfc_9562(monkeypatch: pytest.MonkeyPatch, rand: bytes, want: str) -> None:
    """48-bit ms, version 7, 12 bits rand_a, variant 0b10, 62 bits rand_b (RFC 9562 §5.7)."""
    asked: list[int] = []

    def urandom(n: int) -> bytes:
        asked.append(n)
        return rand

    monkeypatch.setattr("time.time_ns", lambda: NS)
    monkeypatch.setattr("os.urandom", urandom)
    got = c.uuid7()
    assert got == want and asked == [10]  # 80 random bits: 12 of rand_a, 62 of rand_b, 6 unused
    u = uuid.UUID(got)
    assert (u.version, u.variant) == (7, uuid.RFC_4122)


def test_uuid7_sorts_by_creation_time() -> None:
    ids = [c.uuid7() for _ in range(3)]
    assert len(set(ids)) == 3
    assert all(uuid.UUID(i).version == 7 for i in ids)
    ms = [i[:13] for i in ids]  # the 48-bit millisecond time: ordered; within one ms the order is random
    assert ms == sorted(ms)


def test_short_run_id_is_the_last_8_hex_digits() -> None:
    assert c.SHORT_ID_LEN == 8
    assert c.short_run_id("018bcfe5-687b-7004-8203-040506070809") == "06070809"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def test_case_key_is_sha256_of_sorted_compact_json_without_volatile_keys() -> None:
    assert c.case_key({"N": 7168, "M": 8, "dtype": "fp8"}) == _sha('{"M":8,"N":7168,"dtype":"fp8"}')
    assert len(c.case_key({})) == 32 and c.case_key({}) == _sha("{}")
    assert c.case_key({"path": PurePosixPath("/a b")}) == _sha('{"path":"/a b"}')  # not JSON: its str()


@pytest.mark.parametrize(
    "key", ["seed", "repeat", "repeats", "warmup", "warmups", "iters", "iterations", "case_index", "run_id", "ts"]
)
def test_case_key_drops_each_volatile_parameter(key: str) -> None:
    assert c.case_key({"M": 8, key: 3}) == _sha('{"M":8}')
    assert c.case_key({"M": 8, f"{key}_x": 3}) == _sha(f'{{"M":8,"{key}_x":3}}')  # only the exact name


@pytest.mark.parametrize(
    ("value", "bits", "want"),
    [
        (8, 64, 8),
        (8.0, 64, 8),
        (-3, 64, -3),
        (0, 32, 0),
        (8.5, 64, None),
        (math.inf, 64, None),
        (math.nan, 64, None),
        (True, 64, None),
        (False, 64, None),
        ("8", 64, None),
        (None, 64, None),
        (2**63 - 1, 64, 2**63 - 1),
        (2**63, 64, None),
        (-(2**63 - 1), 64, -(2**63 - 1)),
        (-(2**63), 64, None),
        (2**31 - 1, 32, 2**31 - 1),
        (2**31, 32, None),
        (-(2**31 - 1), 32, -(2**31 - 1)),
        (-(2**31), 32, None),
        (2.0**40, 64, 2**40),
        (2.0**40, 32, None),
    ],
)
def test_typed_axis(value: Any, bits: int, want: int | None) -> None:
    got = c.typed_axis(value, bits=bits)
    assert got == want and type(got) is type(want)


def test_typed_axis_default_is_64_bits() -> None:
    assert c.typed_axis(2**40) == 2**40


@pytest.mark.parametrize("ts", [None, math.nan, math.inf, -math.inf, 1e20, -1e20])
def test_from_unix_without_a_datetime(ts: float | None) -> None:
    assert c.from_unix(ts) is None


def test_from_unix_is_utc() -> None:
    assert c.from_unix(0) == datetime(1970, 1, 1, tzinfo=timezone.utc)
    got = c.from_unix(1_700_000_000.5)
    assert got == datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=timezone.utc) and got.tzinfo is timezone.utc


@pytest.mark.parametrize(
    ("ratios", "want"),
    [
        ([], None),
        ([2.0, 8.0], 4.0),
        ([0.5], 0.5),
        ([1.0, 1.0, 8.0], 2.0),
        ([0.0, -1.0, math.inf, math.nan, 4.0], 4.0),  # only positive finite ratios count
        ([0.0, -2.0], None),
    ],
)
def test_geomean(ratios: list[float], want: float | None) -> None:
    got = c.geomean(ratios)
    assert got == (None if want is None else pytest.approx(want, rel=1e-12))


@pytest.mark.parametrize(
    ("values", "want"),
    [([5.0], 5.0), ([1.0, 2.0], 1.5), ([3.0, 1.0, 2.0], 2.0), ([4.0, 1.0, 3.0, 2.0], 2.5), ([9.0, 1, 5, 3, 7], 5.0)],
)
def test_median(values: list[float], want: float) -> None:
    assert c.median(values) == want


@pytest.mark.parametrize(
    ("text", "line", "limit", "want"),
    [
        (None, "a", 10, "a"),
        ("", "a", 10, "a"),
        ("abc", "def", 100, "abc\ndef"),
        ("abc", "def", 7, "abc\ndef"),  # exactly the limit: all kept
        ("abc", "def", 6, "bc\ndef"),
        ("abc", "def", 5, "c\ndef"),
    ],
)
def test_append_bounded_keeps_the_last_limit_characters(text: str | None, line: str, limit: int, want: str) -> None:
    assert c.append_bounded(text, line, limit) == want


def test_clean_metrics_keeps_value_unit_stats_and_samples_apart() -> None:
    raw = {
        "bw": {"value": 3, "unit": "GB/s", "median": 3, "p10": 2.5, "p90": 3.5, "min": 2, "max": 4, "n": 5,
               "samples": [2, 2.5, 3, 3.5, 4], "extra": "dropped", "mean": None},
        "t": {"value": 1.5, "unit": "ms", "p10": None, "n": 0},
    }
    metrics, samples = c.clean_metrics(raw)
    assert metrics == {
        "bw": {"value": 3.0, "unit": "GB/s", "median": 3.0, "p10": 2.5, "p90": 3.5, "min": 2.0, "max": 4.0, "n": 5},
        "t": {"value": 1.5, "unit": "ms", "n": 0},
    }
    assert type(metrics["bw"]["value"]) is float and type(metrics["bw"]["min"]) is float
    assert samples == {"bw": [2, 2.5, 3, 3.5, 4]}
    assert c.clean_metrics({"t": {"value": 1.0, "unit": "ms"}}) == ({"t": {"value": 1.0, "unit": "ms"}}, None)
    assert c.clean_metrics({}) == ({}, None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "result event has no 'metrics' object"),
        (None, "result event has no 'metrics' object"),
        ({"t": 1.0}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"unit": "ms"}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": True, "unit": "ms"}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": "1", "unit": "ms"}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": math.nan, "unit": "ms"}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": math.inf, "unit": "ms"}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": 1.0}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": 1.0, "unit": 5}}, "metric 't' needs a finite number 'value' and a string 'unit'"),
        ({"t": {"value": 1.0, "unit": "ms", "median": "2"}}, "metric 't': median must be a finite number, got '2'"),
        ({"t": {"value": 1.0, "unit": "ms", "p90": math.inf}}, "metric 't': p90 must be a finite number, got inf"),
        ({"t": {"value": 1.0, "unit": "ms", "max": False}}, "metric 't': max must be a finite number, got False"),
        ({"t": {"value": 1.0, "unit": "ms", "n": -1}}, "metric 't': n must be a non-negative integer"),
        ({"t": {"value": 1.0, "unit": "ms", "n": 2.0}}, "metric 't': n must be a non-negative integer"),
        ({"t": {"value": 1.0, "unit": "ms", "n": True}}, "metric 't': n must be a non-negative integer"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": 1.0}}, "metric 't': samples must be a list of finite numbers"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": (1.0,)}}, "metric 't': samples must be a list of finite"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": [1.0, True]}}, "metric 't': samples must be a list"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": [1.0, "2"]}}, "metric 't': samples must be a list"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": [1.0, math.nan]}}, "metric 't': samples must be a list"),
        ({"t": {"value": 1.0, "unit": "ms", "samples": [1e308, 1e308]}}, "metric 't': samples must be a list"),
    ],
)
def test_clean_metrics_refuses_with_the_metric_and_field(raw: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        c.clean_metrics(raw)
    assert str(exc.value).startswith(message)


_PAST = 2**53 + 1
_INEXACT = "is an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot hold exactly"


@pytest.mark.parametrize(
    ("metric", "said"),
    [
        ({"value": _PAST, "unit": "B"}, f"metric 'b': value {_PAST} {_INEXACT}"),
        ({"value": -_PAST, "unit": "B"}, f"metric 'b': value -{_PAST} {_INEXACT}"),
        ({"value": 1.0, "unit": "B", "median": _PAST}, f"metric 'b': median {_PAST} {_INEXACT}"),
        ({"value": 1.0, "unit": "B", "p10": -_PAST}, f"metric 'b': p10 -{_PAST} {_INEXACT}"),
        ({"value": 1.0, "unit": "B", "samples": [1.5, _PAST]}, f"metric 'b': samples[] {_PAST} {_INEXACT}"),
        ({"value": 1.0, "unit": "B", "samples": [-_PAST, 2]}, f"metric 'b': samples[] -{_PAST} {_INEXACT}"),
    ],
)
def test_an_integer_past_2_53_is_refused_alike_by_clean_metrics_and_parse_metric(metric: Any, said: str) -> None:
    """One rule (protocol.EXACT_INT_MAX) on the ingest hot path and in the protocol's own parser."""
    for check in (lambda: c.clean_metrics({"b": metric}), lambda: parse_metric("b", metric)):
        with pytest.raises(ValueError) as exc:
            check()
        assert str(exc.value) == f"{said}; write it as a float (1.2e19) or in a larger unit"


def test_the_exact_integer_edges_and_large_floats_are_metrics() -> None:
    edge = {"value": 2**53, "unit": "B", "min": -(2**53), "samples": [2**53, -(2**53), 1e300]}
    metrics, samples = c.clean_metrics({"b": edge})
    assert metrics["b"]["value"] == 2**53 and metrics["b"]["min"] == -(2**53)
    assert samples == {"b": [2**53, -(2**53), 1e300]}
    assert parse_metric("b", edge).value == 2**53
    other = {"value": -(2**53), "unit": "B", "max": 2**53}  # the other edge of each
    assert c.clean_metrics({"b": other})[0]["b"] == {"value": -(2**53), "unit": "B", "max": 2**53}
    assert c.clean_metrics({"b": {"value": 9.3e18, "unit": "B"}})[0]["b"]["value"] == 9.3e18  # a float is taken


def test_volatile_keys_and_limits() -> None:
    assert c.VOLATILE_CASE_KEYS == {
        "seed", "repeat", "repeats", "warmup", "warmups", "iters", "iterations", "case_index", "run_id", "ts"
    }


def _stdlib_key(case: dict[Any, Any]) -> str:
    stable = {k: v for k, v in case.items() if k not in c.VOLATILE_CASE_KEYS}
    return _sha(json.dumps(stable, sort_keys=True, separators=(",", ":"), default=str))


@pytest.mark.parametrize(
    "case",
    [
        {"s": "é"}, {"é": 1}, {"s": "\x7f"}, {"s": "\x00\x1f\"\\/\b\f\n\r\t"}, {"s": "\u2028 ☃ \U0001f600"},
        {"big": 2**64}, {"big": -(2**63) - 1}, {"m": 2**63}, {"x": 1.5e-7}, {"x": 1e16}, {"x": 0.1},
        {"b": True, "n": None, "i": -3}, {"l": [1, "é"]}, {"d": {"z": 1, "a": 2}}, {1: "int key"},
        {"B": 1, "a": 2, "_": 3, "A": 4}, {"seed": 1, "M": 2},
    ],
)  # fmt: skip
def test_case_key_fast_path_writes_the_stdlib_bytes(case: dict[Any, Any]) -> None:
    # case_key encodes plain cases with orjson; whatever it takes, the key is the stdlib encoder's (stored keys
    # of older runs must keep matching for compare)
    assert c.case_key(case) == _stdlib_key(case)


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.one_of(st.text(max_size=12), st.integers(min_value=-(2**70), max_value=2**70), st.booleans(), st.none(),
                  st.floats(allow_nan=False)),  # fmt: skip
        max_size=6,
    )
)
def test_case_key_equals_the_stdlib_encoding_for_any_flat_case(case: dict[str, Any]) -> None:
    assert c.case_key(case) == _stdlib_key(case)


def test_distinct_short_ids_lengthen_only_the_tails_two_runs_share() -> None:
    from orchestrator.store.compute import distinct_short_ids

    a, b, c = ("01a23ac1-0000-7000-8000-aaaa1234abcd", "01a23ac1-0000-7000-8000-bbbb1234abcd",
               "01a23ac1-0000-7000-8000-ccca1234abcd")  # fmt: skip
    assert distinct_short_ids([a, b]) == {a: "a1234abcd", b: "b1234abcd"}
    assert distinct_short_ids([a, b, c]) == {a: "aa1234abcd", b: "b1234abcd", c: "ca1234abcd"}
    assert distinct_short_ids([a]) == {a: "1234abcd"}
