"""nccl-tests parsing at its edges, found by mutation testing (``scripts/mutation.sh
orchestrator/parsers/nccl_tests.py``): each bad value's message names its column and line, the ``-J`` JSON's
optional parts (``-C`` cpu_time, no validation, no config or footer, several processes and threads), tables
without some leading columns, one-block and three-block titles, rank lines against ``nThread``/``nGpus``, and the
one-record-per-case selection.

Texts are the recorded samples of tests/fixtures/nccl-tests/ cut or edited the way the named nccl-tests option
changes its output (``src/util.cu``'s printf formats and JSON writer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.parsers import PARSERS
from orchestrator.parsers.base import ParseError
from orchestrator.parsers.nccl_tests import parse, parse_json, parse_text

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
TEXT = (FIX / "all_reduce_perf_8xh200.txt").read_text()
JSON_DOC: dict[str, Any] = json.loads((FIX / "all_reduce_perf_8xh200.json").read_text())
P = PARSERS["nccl-tests"]

TITLES = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
BANNER = "#                                    out-of-place                       in-place\n"
ROW = "8 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 0\n"


def _doc(**changes: Any) -> dict[str, Any]:
    """The -J sample cut to its first two sizes, with top-level keys replaced (``None`` removes one)."""
    doc = json.loads(json.dumps(JSON_DOC))
    doc["results"] = doc["results"][:2]
    for k, v in changes.items():
        if v is None:
            doc.pop(k, None)
        else:
            doc[k] = v
    return doc


def _message(text: str) -> str:
    with pytest.raises(ParseError) as exc:
        parse(text)
    return str(exc.value)


# -- text: every value's message names its column and line ------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("8x 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 0", None),  # not a result line: skipped
        ("8 2x float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 0", None),
        ("8 2 float sum r 14.18 0.00 0.00 0 13.82 0.00 0.00 0", "nccl-tests line 3: root 'r' is not a number"),
        ("8 2 float sum 0.5 14.18 0.00 0.00 0 13.82 0.00 0.00 0",
         "nccl-tests line 3: root '0.5' is not a whole number"),
        ("8 2 float sum -1 inf 0.00 0.00 0 13.82 0.00 0.00 0", "nccl-tests line 3: time 'inf' is not finite"),
        ("8 2 float sum -1 14.18 x 0.00 0 13.82 0.00 0.00 0", "nccl-tests line 3: algbw 'x' is not a number"),
        ("8 2 float sum -1 14.18 0.00 nan 0 13.82 0.00 0.00 0", "nccl-tests line 3: busbw 'nan' is not finite"),
        ("8 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 y 0", "nccl-tests line 3: busbw 'y' is not a number"),
        ("8 2 float sum -1 1e-400 0.00 0.00 0 13.82 0.00 0.00 0",
         "nccl-tests line 3: time '1e-400' is below the smallest double (it would be 0)"),  # float() read it as 0
    ],
)  # fmt: skip
def test_a_bad_value_is_named_by_its_column_and_line(row: str, message: str | None) -> None:
    text = BANNER + TITLES + row + "\n"
    if message is None:
        assert _message(text).startswith("no nccl-tests result line found")
    else:
        assert _message(text) == message


def test_the_error_column_and_the_leading_integers_are_named() -> None:
    titles = "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\n"
    assert _message(titles + "8 2 float sum 1.0 0.0 0.0 e 1.0 0.0 0.0 0\n") == (
        "nccl-tests line 2: error 'e' is not a number"
    )
    # str.isdigit() holds for digits float() does not read (a garbled line): a message, never a ValueError
    assert _message(TITLES + "\u00b2 2 float sum -1 1.0 0.0 0.0 0 1.0 0.0 0.0 0\n") == (
        "nccl-tests line 2: size '\u00b2' is not a number"
    )
    assert _message(TITLES + "8 \u0663\u00b2 float sum -1 1.0 0.0 0.0 0 1.0 0.0 0.0 0\n") == (
        "nccl-tests line 2: count '\u0663\u00b2' is not a number"
    )


def test_the_footer_average_that_is_not_a_number_is_named() -> None:
    assert _message(TITLES + ROW + "# Avg bus bandwidth    : n/a\n") == (
        "nccl-tests line 3: average bus bandwidth 'n/a' is not a number"
    )


def test_a_table_without_header_lines_or_footer_says_none() -> None:
    rep = parse_text(TITLES + ROW)
    assert (rep.ranks, rep.devices, rep.avg_busbw_gbps, rep.out_of_bounds, rep.nccl_version) == (
        None, (), None, None, None,
    )  # fmt: skip
    assert [(r.placement, r.time_us) for r in rep.rows] == [("out-of-place", 14.18), ("in-place", 13.82)]


def test_rank_lines_count_ranks_over_nthread_times_ngpus() -> None:
    """``mpirun -np 2 all_reduce_perf -g 1``: each process prints ``nThread 1 nGpus 1`` and one rank line each."""
    head = TEXT.split("#  Rank  0")[0]
    ranks = "".join(
        f"#  Rank {r:2d} Group  0 Pid {4121 + r:6d} on  h200-node device {r:2d} [0000:{18 + r:02x}:00] NVIDIA H200\n"
        for r in range(2)
    )
    text = head.replace("nGpus 8", "nGpus 1") + ranks + BANNER + TITLES + ROW
    rep = parse_text(text)
    assert rep.ranks == 2 and rep.devices == ("NVIDIA H200", "NVIDIA H200")


def test_by_placement_returns_only_that_placement() -> None:
    rep = parse_text(TEXT)
    assert {r.placement for r in rep.by_placement("in-place")} == {"in-place"}
    assert {r.placement for r in rep.by_placement("out-of-place")} == {"out-of-place"}
    assert len(rep.by_placement("in-place")) == 31


def test_a_broadcast_root_and_tables_without_count_type_or_redop() -> None:
    bcast = TITLES + "8 2 float none 0 14.18 0.00 0.00 0 13.82 0.00 0.00 0\n"
    assert {r.root for r in parse_text(bcast).rows} == {0}
    no_type = (
        "#  size  count  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n8 2 14.18 0.0 0.0 0 13.8 0.0 0.0 0\n"
    )
    row = parse_text(no_type).rows[0]
    assert (row.size_bytes, row.count, row.type, row.redop, row.root) == (8, 2, "", "", -1)


def test_a_table_without_a_count_column_counts_zero() -> None:
    text = "#  size  root  time  algbw  busbw  #wrong\n8 0 14.18 0.00 0.00 0\n"
    row = parse_text(text).rows[0]
    assert (row.size_bytes, row.count, row.root, row.placement) == (8, 0, 0, "out-of-place")


def test_one_block_titles_are_out_of_place_and_three_blocks_are_refused() -> None:
    one = "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n8 2 float sum -1 14.18 0.00 0.00 0\n"
    assert [(r.placement, r.time_us, r.wrong) for r in parse_text(one).rows] == [("out-of-place", 14.18, 0)]
    three = TITLES.rstrip("\n") + "  time  algbw  busbw  #wrong\n"
    assert _message(three + ROW) == (
        "nccl-tests line 1: column titles 'size count type redop root time algbw busbw #wrong time algbw busbw "
        "#wrong time algbw busbw #wrong' do not hold one or two equal blocks of time algbw busbw ..."
    )
    unequal = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw\n"
    assert _message(unequal + ROW).endswith("do not hold one or two equal blocks of time algbw busbw ...")


def test_an_unknown_leading_column_lists_the_known_ones() -> None:
    assert _message("#  size  flavour  time  algbw  busbw\n8 2 1.0 0.0 0.0\n") == (
        "nccl-tests line 1: column titles 'size flavour time algbw busbw' are not a layout orch knows (leading "
        "columns must be among bytes, count, elements, n, op, redop, root, size, type)"
    )


def test_comment_lines_that_name_some_titles_are_not_column_titles() -> None:
    """A ``#`` line naming time/algbw/busbw but no size (or size but not the three) is a comment, skipped."""
    for comment in ("# time algbw busbw are per rank\n", "# size sweep: time only\n"):
        rep = parse_text(BANNER + TITLES + comment + ROW)
        assert len(rep.rows) == 2


def test_a_banner_with_out_of_place_alone_keeps_the_default_order() -> None:
    banner = "#                                    out-of-place\n"
    rep = parse_text(banner + TITLES + ROW)
    assert [r.placement for r in rep.rows] == ["out-of-place", "in-place"]
    rep = parse_text("#     in-place         out-of-place\n" + TITLES + ROW)
    assert [r.placement for r in rep.rows] == ["in-place", "out-of-place"]


def test_json_with_leading_blank_lines_is_still_json() -> None:
    assert parse("\n\n  " + json.dumps(_doc())).source == "json"


# -- -J JSON --------------------------------------------------------------------------------------------------------


def test_json_cpu_time_no_validation_no_config_no_footer() -> None:
    """``-C 1`` writes ``cpu_time`` instead of ``time``; ``-c 0`` no ``nwrong``; an older writer no config,
    average, out-of-bounds or version."""
    doc = _doc(config=None, average_bus_bandwidth=None, out_of_bounds=None, nccl_version=None)
    for rec in doc["results"]:
        for key in ("out_of_place", "in_place"):
            rec[key]["cpu_time"] = rec[key].pop("time")
            del rec[key]["nwrong"]
        del rec["type"], rec["redop"], rec["root"]
    rep = parse_json(json.dumps(doc))
    assert [(r.size_bytes, r.placement, r.time_us, r.wrong, r.type, r.redop, r.root) for r in rep.rows] == [
        (8, "out-of-place", 14.18, None, "", "", -1),
        (8, "in-place", 13.82, None, "", "", -1),
        (16, "out-of-place", 13.64, None, "", "", -1),
        (16, "in-place", 14.18, None, "", "", -1),
    ]
    assert (rep.ranks, rep.devices, rep.avg_busbw_gbps, rep.out_of_bounds, rep.nccl_version) == (
        None, (), None, None, None,
    )  # fmt: skip


def test_json_ranks_are_processes_times_threads_times_gpus() -> None:
    """``mpirun -np 2 all_reduce_perf -t 2 -g 1``: two device entries (one per process), 2 threads, 1 GPU each."""
    dev = JSON_DOC["config"]["devices"][0]
    config = {**JSON_DOC["config"], "nthreads": 2, "ngpus": 1, "devices": [dev, {**dev, "rank": 2, "device_info": 7}]}
    rep = parse_json(json.dumps(_doc(config=config)))
    assert rep.ranks == 4 and type(rep.ranks) is int
    assert rep.devices == ("NVIDIA H200", "7")
    for broken in ({"nthreads": None}, {"ngpus": None}, {"devices": []}):
        cfg = {**config, **broken}
        assert parse_json(json.dumps(_doc(config=cfg))).ranks is None, broken
    no_devices = {k: v for k, v in config.items() if k != "devices"}
    assert parse_json(json.dumps(_doc(config=no_devices))).devices == ()
    no_name = {**config, "devices": [{k: v for k, v in dev.items() if k != "device_info"}]}
    assert parse_json(json.dumps(_doc(config=no_name))).devices == ("",)
    assert _message(json.dumps(_doc(config="8 GPUs"))) == 'nccl-tests JSON: config must be an object, got "8 GPUs"'
    assert _message(json.dumps(_doc(config={**config, "devices": ["x"]}))) == (
        'nccl-tests JSON: config.devices must be a list of objects (one per process), got ["x"]'
    )


def test_json_root_of_a_broadcast_and_a_blank_root() -> None:
    for root, expected in (("     0", 0), ("     3", 3), ("    ", -1), (2, 2)):
        doc = _doc()
        doc["results"][0]["root"] = root
        assert parse_json(json.dumps(doc)).rows[0].root == expected, root


def test_json_footer_values_that_are_not_numbers() -> None:
    assert _message(json.dumps(_doc(out_of_bounds={"count": "0"}))) == (
        'nccl-tests JSON: out_of_bounds.count must be a whole number from 0 to 2^63, got "0"'
    )
    doc = _doc(average_bus_bandwidth={"bandwidth": "fast"})
    assert _message(json.dumps(doc)) == (
        'nccl-tests JSON: average_bus_bandwidth.bandwidth must be a finite number, got "fast"'
    )
    assert _message(json.dumps(_doc(average_bus_bandwidth=3.5))) == (
        "nccl-tests JSON: average_bus_bandwidth must be an object, got 3.5"
    )
    assert _message(json.dumps(_doc(out_of_bounds=2))) == (
        "nccl-tests JSON: out_of_bounds must be an object with a count, got 2"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(results=[1]), "nccl-tests JSON: results[0] must be an object, got 1"),
        (lambda d: d["results"][1].pop("size"), "nccl-tests JSON: results[1] has no 'size'"),
        (lambda d: d["results"][1].pop("count"), "nccl-tests JSON: results[1] has no 'count'"),
        (lambda d: d["results"][1].update(size="8"),
         'nccl-tests JSON: results[1].size must be a whole number from 0 to 2^63, got "8"'),
        (lambda d: d["results"][1].update(count=True),
         "nccl-tests JSON: results[1].count must be a whole number from 0 to 2^63, got true"),
        (lambda d: d["results"][1]["in_place"].pop("time"),
         "nccl-tests JSON: results[1].in_place has no 'cpu_time'"),
        (lambda d: d["results"][1]["in_place"].pop("alg_bw"), "nccl-tests JSON: results[1].in_place has no 'alg_bw'"),
        (lambda d: d["results"][0]["out_of_place"].pop("bus_bw"),
         "nccl-tests JSON: results[0].out_of_place has no 'bus_bw'"),
        (lambda d: d["results"][0]["out_of_place"].update(alg_bw=float("inf")),
         "nccl-tests JSON: results[0].out_of_place.alg_bw must be a finite number, got Infinity"),
        (lambda d: d["results"][0]["out_of_place"].update(bus_bw="1"),
         'nccl-tests JSON: results[0].out_of_place.bus_bw must be a finite number, got "1"'),
        (lambda d: d["results"][0]["in_place"].update(nwrong="0"),
         'nccl-tests JSON: results[0].in_place.nwrong must be a whole number from 0 to 2^63, got "0"'),
        (lambda d: d.update(results=[{"size": 8, "count": 2, "out_of_place": None, "in_place": None}]),
         "nccl-tests JSON: 'results' holds no measurement"),
        (lambda d: d.update(results={}), "nccl-tests JSON: expected an object with a 'results' list"),
    ],
)  # fmt: skip
def test_json_bad_values_name_their_place(edit: Any, message: str) -> None:
    doc = _doc()
    edit(doc)
    assert _message(json.dumps(doc)) == message


def test_json_a_non_zero_time_a_double_holds_only_as_zero_is_named() -> None:
    text = json.dumps(_doc()).replace('"alg_bw": ', '"alg_bw": 1e-400, "x": ', 1)  # json read 1e-400 as 0.0
    assert _message(text).endswith(".alg_bw is 1e-400, below the smallest double (it would be 0)")


def test_json_that_is_not_an_object() -> None:
    assert _message('{"a": 1}') == "nccl-tests JSON: expected an object with a 'results' list"
    with pytest.raises(ParseError) as exc:
        parse_json("[1, 2]")
    assert str(exc.value) == "nccl-tests JSON: expected an object with a 'results' list"


# -- as a suite parser: one record per size and table ---------------------------------------------------------------


def test_a_size_repeated_in_one_table_is_two_records_and_asks_for_one_size() -> None:
    text = BANNER + TITLES + ROW + ROW
    with pytest.raises(ParseError) as exc:
        P.parse(text, None, {"size_bytes": 8})
    assert str(exc.value) == (
        "2 result rows for size_bytes=8 (sizes in the output: 8, 8); run the binary with -b SIZE -e SIZE for one size"
    )


def test_an_in_place_only_line_then_a_full_line_are_two_records() -> None:
    """A trace-replay line (out-of-place block blank) followed by a full line of another size."""
    text = (
        BANNER + TITLES + "8 2 float sum -1 13.82 0.00 0.00 0\n16 4 float sum -1 13.64 0.00 0.00 0 14.18 0.00 0.00 0\n"
    )
    (rec8,) = P.parse(text, None, {"size_bytes": 8})
    (rec16,) = P.parse(text, None, {"size_bytes": 16})
    assert "time_us" not in rec8 and rec8["time_us_inplace"] == 13.82
    assert (rec16["time_us"], rec16["time_us_inplace"]) == (13.64, 14.18)


def test_several_sizes_over_several_tables_ask_for_one_size_not_one_job() -> None:
    two = BANNER + TITLES + ROW + "16 4 float sum -1 13.64 0.00 0.00 0 14.18 0.00 0.00 0\n"
    with pytest.raises(ParseError) as exc:
        P.parse(two + two, None, {})
    assert str(exc.value) == (
        "4 result rows where one case is one message size (sizes in the output: 8, 16, 8, 16); run the binary "
        "with -b SIZE -e SIZE for one size"
    )


@pytest.mark.parametrize(
    ("n", "listed"), [(8, "8, 16, 32, 64, 128, 256, 512, 1024"), (9, "8, 16, 32, 64, ..., 1024, 2048")]
)
def test_up_to_eight_sizes_are_listed_in_full(n: int, listed: str) -> None:
    rows = "".join(f"{8 << i} 2 float sum -1 14.18 0.00 0.00 0 13.82 0.00 0.00 0\n" for i in range(n))
    with pytest.raises(ParseError) as exc:
        P.parse(BANNER + TITLES + rows, None, {})
    assert f"(sizes in the output: {listed});" in str(exc.value)


def test_a_result_line_cut_short_is_an_error_naming_it() -> None:
    """A binary killed mid-print leaves ``size count`` alone on the last line: an error, not a skipped line."""
    assert _message(BANNER + TITLES + ROW + "16 4\n") == (
        "nccl-tests line 4: 2 columns where the column titles on line 2 (size count type redop root time algbw "
        "busbw #wrong time algbw busbw #wrong) name 13: '16 4'"
    )


def test_a_result_line_before_the_titles_says_what_to_print() -> None:
    assert _message(ROW + TITLES) == (
        "nccl-tests line 1: a result line before any column titles "
        "('#  size  count  type  redop  root  time  algbw  busbw  #wrong ...'); print the whole table"
    )
