"""nccl_tests.py's mutation-testing survivors of issue 19 (session 5): the bounds of every checked value at their
edges (a size of exactly 2^63 and one past it, a size past 2^53 read exactly, zero bandwidths, a #wrong of 1),
the negative values refused in the columns only a validating or older table has (``#wrong``, ``error``, the
out-of-bounds footer), the footer's verdict and message, and the ``-J`` JSON's messages with the value shown
(``null``, a value cut at 60 characters).

Texts follow nccl-tests ``src/util.cu``'s table (column titles, then one line per size) as in
tests/unit/test_nccl_tests_edges.py; the JSON is tests/fixtures/nccl-tests' ``-J`` sample cut to one size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.parsers import PARSERS
from orchestrator.parsers.base import InvalidMeasurement, ParseError
from orchestrator.parsers.nccl_tests import parse_json, parse_text

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
JSON_DOC: dict[str, Any] = json.loads((FIX / "all_reduce_perf_8xh200.json").read_text())
P = PARSERS["nccl-tests"]

TITLES = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
OLD_TITLES = "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\n"
ROW = "8 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 0\n"
NEGATIVE = "is negative; a time or bandwidth is >= 0"


def _text_error(text: str) -> str:
    with pytest.raises(ParseError) as exc:
        parse_text(text)
    return str(exc.value)


def _json(result: Any = None, **changes: Any) -> str:
    """The -J sample with its first result only (or ``result`` in its place) and top-level keys replaced."""
    doc = json.loads(json.dumps(JSON_DOC))
    doc["results"] = [doc["results"][0] if result is None else result]
    doc.update(changes)
    return json.dumps(doc)


def _json_error(text: str) -> str:
    with pytest.raises(ParseError) as exc:
        parse_json(text)
    return str(exc.value)


# -- text: values at their bounds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "count"),
    [
        (2**53 + 1, 2**53 + 1),  # 9007199254740993: a float reads it as 2^53; the integer text is read exactly
        (2**63, 2**62),  # MAX_SIZE itself is a size (size_t holds it)
    ],
)
def test_sizes_and_counts_are_read_exactly_up_to_2_to_the_63(size: int, count: int) -> None:
    (out_of_place, in_place) = parse_text(TITLES + f"{size} {count} float sum -1 1.0 2.0 3.0 0 1.0 2.0 3.0 0\n").rows
    assert (out_of_place.size_bytes, out_of_place.count) == (size, count)
    assert (in_place.size_bytes, in_place.count) == (size, count)


def test_a_size_past_2_to_the_63_is_refused_naming_it() -> None:
    size = 2**63 + 1  # 9223372036854775809
    assert _text_error(TITLES + f"{size} 2 float sum -1 1.0 2.0 3.0 0 1.0 2.0 3.0 0\n") == (
        "nccl-tests line 2: size '9223372036854775809' is above 2^63, not a size or count"
    )


@pytest.mark.parametrize(
    ("titles", "row", "message"),
    [
        (TITLES, "8 2 float sum -1 14.18 0.00 0.00 -1 13.82 0.00 0.00 0", f"#wrong '-1' {NEGATIVE}"),
        (TITLES, "8 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 -3", f"#wrong '-3' {NEGATIVE}"),
        (OLD_TITLES, "8 2 float sum 14.18 0.00 0.00 -1e-06 13.82 0.00 0.00 0", f"error '-1e-06' {NEGATIVE}"),
        (OLD_TITLES, "8 2 float sum 14.18 0.00 0.00 0 13.82 0.00 0.00 -2", f"error '-2' {NEGATIVE}"),
    ],
)
def test_a_negative_wrong_count_or_error_is_refused_naming_its_column(titles: str, row: str, message: str) -> None:
    assert _text_error(titles + row + "\n") == f"nccl-tests line 2: {message}"


def test_the_old_tables_error_column_is_read_as_a_float() -> None:
    rows = parse_text(OLD_TITLES + "8 2 float sum 14.18 0.00 0.00 2e-07 13.82 0.00 0.00 0\n").rows
    assert [(r.placement, r.max_error, r.wrong) for r in rows] == [
        ("out-of-place", 2e-07, None),
        ("in-place", 0.0, None),
    ]


# -- text: the out-of-bounds footer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("footer", "message"),
    [
        ("# Out of bounds values : -1 OK", f"nccl-tests line 3: out-of-bounds count '-1' {NEGATIVE}"),
        ("# Out of bounds values : x OK", "nccl-tests line 3: out-of-bounds count 'x' is not a number"),
    ],
)
def test_a_footer_count_that_is_not_a_count_is_refused_naming_its_line(footer: str, message: str) -> None:
    assert _text_error(TITLES + ROW + footer + "\n") == message


@pytest.mark.parametrize(
    ("footer", "failed"),
    [
        ("# Out of bounds values : 0 OK", False),
        ("# Out of bounds values : 1 OK", True),  # a count above 0 is a failure whatever the word after it
        ("# Out of bounds values : 0 FAILED", True),
    ],
)
def test_the_footer_fails_the_run_on_a_count_above_0_or_the_word_failed(footer: str, failed: bool) -> None:
    report = parse_text(TITLES + ROW + footer + "\n")
    assert (report.out_of_bounds_failed, report.out_of_bounds_line) == (failed, 3)


def test_a_failed_footer_makes_every_case_invalid_with_the_whole_sentence() -> None:
    text = TITLES + ROW + "# Out of bounds values : 2 FAILED\n"
    with pytest.raises(InvalidMeasurement) as exc:
        P.parse(text, None, {"size_bytes": 8})
    assert str(exc.value) == (
        "nccl-tests line 3: '# Out of bounds values : 2 FAILED' — the run returned wrong elements (for a size "
        "other than 8 B or in a placement not printed), so none of its figures is a valid measurement; check the "
        "GPUs, the NCCL build and the network"
    )


@pytest.mark.parametrize(("wrong", "invalid"), [(0, False), (1, True)])
def test_one_wrong_element_makes_the_case_invalid(wrong: int, invalid: bool) -> None:
    text = TITLES + f"8 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 {wrong}\n"
    if not invalid:
        (rec,) = P.parse(text, None, {"size_bytes": 8})
        assert rec["wrong_inplace"] == 0
        return
    with pytest.raises(InvalidMeasurement) as exc:
        P.parse(text, None, {"size_bytes": 8})
    assert str(exc.value).startswith("nccl-tests line 2 (size 8 B): #wrong is 1 in-place — ")


# -- -J JSON ----------------------------------------------------------------------------------------------------


def test_zero_bandwidths_and_times_are_measurements() -> None:
    """nccl-tests prints 0.00 GB/s for the smallest sizes (8 B in 14 µs is 0.000564 GB/s): 0 is >= 0, kept."""
    zero = {"time": 0, "alg_bw": 0, "bus_bw": 0, "nwrong": 0}
    result = {**JSON_DOC["results"][0], "out_of_place": zero, "in_place": zero}
    report = parse_json(_json(result, average_bus_bandwidth={"bandwidth": 0}))
    assert [(r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong) for r in report.rows] == [(0.0, 0.0, 0.0, 0)] * 2
    assert report.avg_busbw_gbps == 0.0


@pytest.mark.parametrize(
    ("config", "ranks"),
    [
        ({"nthreads": 0, "ngpus": 8}, 0),  # 1 device line x 0 threads x 8 GPUs
        ({"nthreads": 1, "ngpus": 0}, 0),
        ({"nthreads": 2, "ngpus": 4}, 8),  # 1 x 2 x 4
    ],
)
def test_config_thread_and_gpu_counts_of_0_are_whole_numbers(config: dict[str, int], ranks: int) -> None:
    doc_config = {**JSON_DOC["config"], **config}
    assert parse_json(_json(config=doc_config)).ranks == ranks


def test_config_ngpus_that_is_not_a_number_is_named() -> None:
    doc_config = {**JSON_DOC["config"], "ngpus": "8"}
    assert _json_error(_json(config=doc_config)) == 'nccl-tests JSON: config.ngpus must be a whole number >= 0, got "8"'


def test_a_redop_that_is_not_a_string_is_named() -> None:
    result = {**JSON_DOC["results"][0], "redop": 5}
    assert _json_error(_json(result)) == "nccl-tests JSON: results[0].redop must be a string, got 5"


def test_a_null_result_is_shown_as_json_null() -> None:
    assert _json_error(json.dumps({"results": [None]})) == "nccl-tests JSON: results[0] must be an object, got null"


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (58, '"' + "x" * 58 + '"'),  # 60 characters as JSON: shown whole
        (59, '"' + "x" * 56 + "..."),  # 61: the first 57 characters and "..."
    ],
)
def test_a_shown_value_is_cut_after_60_characters(n: int, shown: str) -> None:
    assert (
        _json_error(json.dumps({"results": ["x" * n]})) == f"nccl-tests JSON: results[0] must be an object, got {shown}"
    )
