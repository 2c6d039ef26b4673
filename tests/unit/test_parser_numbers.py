"""Numbers misread from engine output: every parser either gives figures that mean what they say or a ParseError
naming the place — never a measurement the tool itself called wrong, a field of another run, a negative count,
or an internal error that costs the host's other cases.

Fixtures (tests/fixtures/, see its README): ``nccl-tests/all_reduce_perf_wrong.{txt,json}`` (the recorded-format
sample cut to 512 KiB..2 MiB, the 1 MiB row with ``#wrong`` 12 in both placements and the footer ``24 FAILED``),
``engines/sglang_serving_appended.jsonl`` (two runs appended to one ``--output-file``, the later one without the
latency percentiles), ``engines/vllm_serve_failed_negative.json`` (``failed: -3``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.parsers import PARSERS, InvalidMeasurement, ParseError
from orchestrator.parsers.base import lookup, request_counts
from orchestrator.protocol import Event
from orchestrator.suites.command import command_result, parse_case
from orchestrator.suites.loader import load_registry, parse_suite

FIX = Path(__file__).parents[1] / "fixtures"
WRONG_TXT = (FIX / "nccl-tests" / "all_reduce_perf_wrong.txt").read_text()
WRONG_JSON = (FIX / "nccl-tests" / "all_reduce_perf_wrong.json").read_text()
GOOD_TXT = (FIX / "nccl-tests" / "all_reduce_perf_8xh200.txt").read_text()
GOOD_JSON = (FIX / "nccl-tests" / "all_reduce_perf_8xh200.json").read_text()
APPENDED = (FIX / "engines" / "sglang_serving_appended.jsonl").read_text()
VLLM = (FIX / "engines" / "vllm_serve.json").read_text()
VLLM_NEG = (FIX / "engines" / "vllm_serve_failed_negative.json").read_text()
MIB = 1048576
NCCL = PARSERS["nccl-tests"]


def _event(case: dict[str, Any], info: dict[str, Any], index: int = 0) -> Event:
    data = {"case_index": index, "case": case, "metrics": {"wall_ms": {"value": 900.0, "unit": "ms"}}, "info": info}
    return Event(seq=index + 1, type="result", data=data)


def _nccl_case(size: int) -> dict[str, Any]:
    return {"size_bytes": size, "gpus": 8, "binary": "x", "argv": ["x"], "env": {}, "timeout_s": 300.0}


def _nccl_suite(name: str = "nccl-allreduce-text") -> Any:
    sd = load_registry().get(name)
    assert sd.command is not None
    return sd.command


# -- 1. nccl-tests that report wrong results ------------------------------------------------------------------


def test_a_row_with_wrong_elements_is_an_invalid_case_naming_the_line() -> None:
    ev = command_result(_nccl_suite(), _event(_nccl_case(MIB), {"stdout": WRONG_TXT}), "b300")
    assert ev.type == "error" and ev.data["kind"] == "invalid"
    assert ev.data["message"] == (
        "parser nccl-tests found nccl-tests line 19 (size 1048576 B): #wrong is 12 out-of-place and 12 in-place — "
        "the collective returned wrong elements, so its time and bandwidth are not a valid measurement; check the "
        "GPUs, the NCCL build and the network"
    )
    assert "metrics" not in ev.data  # busbw 96.73 GB/s is never stored
    assert ev.data["info"]["error_kind"] == "invalid" and ev.data["info"]["agent_result"] is True
    assert ev.data["case"] == {"size_bytes": MIB, "gpus": 8, "binary": "x"}


@pytest.mark.parametrize("size", [MIB // 2, 2 * MIB])
def test_a_clean_row_of_a_run_whose_footer_failed_is_invalid_too(size: int) -> None:
    ev = command_result(_nccl_suite(), _event(_nccl_case(size), {"stdout": WRONG_TXT}), "b300")
    assert ev.type == "error" and ev.data["kind"] == "invalid"
    assert ev.data["message"].startswith(
        f"parser nccl-tests found nccl-tests line 21: '# Out of bounds values : 24 FAILED' — the run returned wrong "
        f"elements (for a size other than {size} B"
    ), ev.data["message"]


def test_a_failed_footer_alone_invalidates_and_a_zero_ok_footer_does_not() -> None:
    only_footer = WRONG_TXT.replace("      12", "       0")
    assert "      12 " not in only_footer
    with pytest.raises(InvalidMeasurement, match="line 21: '# Out of bounds values : 24 FAILED'"):
        NCCL.parse(only_footer, None, {"size_bytes": MIB})
    failed_word = only_footer.replace("24 FAILED", "0 FAILED")
    with pytest.raises(InvalidMeasurement, match="Out of bounds values : 0 FAILED"):
        NCCL.parse(failed_word, None, {"size_bytes": MIB})
    ok = only_footer.replace("24 FAILED", "0 OK")
    (rec,) = NCCL.parse(ok, None, {"size_bytes": MIB})
    assert rec["wrong"] == 0 and type(rec["wrong"]) is int


def test_json_nwrong_and_out_of_bounds_are_invalid_naming_the_result() -> None:
    ev = command_result(_nccl_suite("nccl-allreduce"), _event(_nccl_case(MIB), {"output": WRONG_JSON}), "b300")
    assert ev.type == "error" and ev.data["kind"] == "invalid"
    assert ev.data["message"].startswith(
        "parser nccl-tests found nccl-tests results[1] (size 1048576 B): #wrong is 12 out-of-place and 12 in-place"
    ), ev.data["message"]
    with pytest.raises(InvalidMeasurement, match=r"out_of_bounds.count: '# Out of bounds values : 24 FAILED'"):
        NCCL.parse(WRONG_JSON, None, {"size_bytes": 2 * MIB})


def test_wrong_is_stored_as_an_integer_count() -> None:
    for suite, info in (("nccl-allreduce-text", {"stdout": GOOD_TXT}), ("nccl-allreduce", {"output": GOOD_JSON})):
        ev = command_result(_nccl_suite(suite), _event(_nccl_case(MIB), info), "b300")
        assert ev.type == "result", ev.data
        wrong = ev.data["metrics"]["wrong"]
        assert wrong == {"value": 0, "unit": "elements"} and type(wrong["value"]) is int
        assert json.dumps(wrong) == '{"value": 0, "unit": "elements"}'


def _row_line(text: str, size: int) -> str:
    return next(ln for ln in text.splitlines() if ln.split()[:1] == [str(size)])


@pytest.mark.parametrize(("col", "what"), [(5, "time"), (6, "algbw"), (7, "busbw"), (9, "time"), (11, "busbw")])
def test_a_negative_time_or_bandwidth_in_the_table_is_a_parse_error_naming_the_line(col: int, what: str) -> None:
    good = GOOD_TXT.replace(" 0 OK", " 0 OK")
    line = _row_line(good, MIB)
    cells = line.split()
    bad = line.replace(f" {cells[col]} ", f" -{cells[col]} ", 1) if cells[col] != cells[col - 4] else line
    assert bad != line
    with pytest.raises(ParseError) as exc:
        NCCL.parse(good.replace(line, bad), None, {"size_bytes": MIB})
    assert not isinstance(exc.value, InvalidMeasurement)
    assert f"nccl-tests line 35: {what} '-{cells[col]}' is negative" in str(exc.value), str(exc.value)


def test_the_reported_negative_bandwidth() -> None:
    line = _row_line(GOOD_TXT, MIB)
    bad = GOOD_TXT.replace(line, line.replace("55.28", "-3.5"))
    with pytest.raises(ParseError, match=r"nccl-tests line 35: algbw '-3.5' is negative; a time or bandwidth is >= 0"):
        NCCL.parse(bad, None, {"size_bytes": MIB})


def _json_with(**changes: Any) -> str:
    doc = json.loads(GOOD_JSON)
    rec = next(r for r in doc["results"] if r["size"] == MIB)
    for path, value in changes.items():
        node: Any = rec
        *parents, last = path.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"size": 8.7}, "results[17].size must be a whole number from 0 to 2^63, got 8.7"),
        ({"size": 1e300}, "results[17].size must be a whole number from 0 to 2^63, got 1e+300"),
        ({"size": -8}, "results[17].size must be a whole number from 0 to 2^63, got -8"),
        ({"size": 2**63 + 1}, "results[17].size must be a whole number from 0 to 2^63, got 9223372036854775809"),
        ({"size": "1048576"}, 'results[17].size must be a whole number from 0 to 2^63, got "1048576"'),
        ({"count": True}, "results[17].count must be a whole number from 0 to 2^63, got true"),
        ({"out_of_place__alg_bw": -3.5}, "results[17].out_of_place.alg_bw is -3.5, negative"),
        ({"in_place__time": -1}, "results[17].in_place.time is -1, negative"),
        ({"out_of_place__bus_bw": "fast"}, 'results[17].out_of_place.bus_bw must be a finite number, got "fast"'),
        ({"out_of_place__nwrong": 1.5}, "results[17].out_of_place.nwrong must be a whole number from 0 to 2^63"),
        ({"out_of_place__nwrong": -1}, "results[17].out_of_place.nwrong must be a whole number from 0 to 2^63"),
    ],
)  # fmt: skip
def test_json_values_out_of_their_domain_are_parse_errors_naming_the_field(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ParseError) as exc:
        NCCL.parse(_json_with(**changes), None, {"size_bytes": MIB if "size" not in changes else None})
    assert message in str(exc.value), str(exc.value)


def test_the_largest_size_is_accepted() -> None:
    doc = json.loads(_json_with(size=2**63))
    (rec,) = NCCL.parse(json.dumps(doc), None, {"size_bytes": 2**63})
    assert rec["size_bytes"] == 2**63


# -- 3. -J JSON of an unexpected shape: a parse error for that case, never an internal error ----------------------


def _shaped(where: str, value: Any) -> str:
    doc = json.loads(GOOD_JSON)
    if where == "doc":
        return json.dumps(value)
    if where.startswith("config."):
        doc["config"][where.split(".", 1)[1]] = value
    elif where in ("config", "out_of_bounds", "average_bus_bandwidth", "results"):
        doc[where] = value
    else:
        rec = next(r for r in doc["results"] if r["size"] == MIB)
        rec[where] = value
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("root", "x", 'results[17].root must be a rank number such as "    -1", got "x"'),
        ("root", [0], 'results[17].root must be a rank number such as "    -1", got [0]'),
        ("out_of_place", [1, 2], "results[17].out_of_place must be an object with time, alg_bw, bus_bw and nwrong, "
                                 "got [1, 2]"),
        ("in_place", "n/a", 'results[17].in_place must be an object with time, alg_bw, bus_bw and nwrong, got "n/a"'),
        ("type", {"t": 1}, 'results[17].type must be a string, got {"t": 1}'),
        ("config.devices", 5, "config.devices must be a list of objects (one per process), got 5"),
        ("config.devices", ["GPU0"], 'config.devices must be a list of objects (one per process), got ["GPU0"]'),
        ("config.nthreads", "1", 'config.nthreads must be a whole number >= 0, got "1"'),
        ("config", [], "config must be an object, got []"),
        ("out_of_bounds", 24, "out_of_bounds must be an object with a count, got 24"),
        ("out_of_bounds", {"count": "24"}, 'out_of_bounds.count must be a whole number from 0 to 2^63, got "24"'),
        ("average_bus_bandwidth", [1], "average_bus_bandwidth must be an object, got [1]"),
        ("results", {"size": 8}, "expected an object with a 'results' list"),
    ],
)  # fmt: skip
def test_json_of_an_unexpected_shape_is_a_parse_error_naming_the_field(where: str, value: Any, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        NCCL.parse(_shaped(where, value), None, {"size_bytes": MIB})
    assert str(exc.value) == f"no usable nccl-tests output (nccl-tests JSON: {message})", str(exc.value)


def test_one_malformed_case_costs_only_that_case() -> None:
    """Four cases on one host: the second's -J file has ``out_of_place: [1, 2]``; the other three are stored."""
    suite = _nccl_suite("nccl-allreduce")
    sizes = [MIB // 2, MIB, 2 * MIB, 4 * MIB]
    outputs = [GOOD_JSON, _shaped("out_of_place", [1, 2]), GOOD_JSON, GOOD_JSON]
    events = [command_result(suite, _event(_nccl_case(s), {"output": o}, i), "b300")
              for i, (s, o) in enumerate(zip(sizes, outputs, strict=True))]  # fmt: skip
    assert [e.type for e in events] == ["result", "error", "result", "result"]
    assert events[1].data["kind"] == "parse" and "results[17].out_of_place must be an object" in events[1].data[
        "message"
    ]
    expected = [NCCL.parse(GOOD_JSON, None, {"size_bytes": s})[0]["busbw_gbps"] for s in (sizes[0], *sizes[2:])]
    assert [e.data["metrics"]["busbw_gbps"]["value"] for e in (events[0], events[2], events[3])] == expected
    assert expected[0] == 57.129763


# -- 2. JSONL: one record per output, never fields of several runs ------------------------------------------------


def test_sglang_serving_takes_every_field_from_the_last_run_and_warns() -> None:
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: sglang-serving\n')
    assert sd.command is not None
    ev = command_result(sd.command, _event({"c": 1, "argv": ["x"]}, {"stdout": APPENDED}), "g")
    assert ev.type == "result", ev.data
    m = ev.data["metrics"]
    assert m["output_throughput"]["value"] == 5335.06
    # the first run's latencies (p99_itl_ms 9.87, median_ttft_ms 180.3) never leak into the second run's result
    assert sorted(m) == ["output_throughput", "wall_ms"]
    assert ev.data["info"]["warnings"] == [
        "the output holds 2 sglang-serving result records (lines 1, 2): used the last one (line 2) for every metric; "
        "the others are earlier runs appended to the same file"
    ]


def test_the_reported_mix_of_two_runs() -> None:
    text = (
        '{"backend": "sglang", "completed": 10, "duration": 1, "output_throughput": 111, "p99_itl_ms": 999, '
        '"median_ttft_ms": 555}\n{"backend": "sglang", "completed": 10, "duration": 1, "output_throughput": 222}\n'
    )
    sd = parse_suite(
        'name: s\ndescription: d\ncommand: ["x"]\nparser: sglang-serving\n'
        "metrics:\n  output_throughput: {}\n  p99_itl_ms: {}\n  median_ttft_ms: {}\n"
    )
    assert sd.command is not None
    with pytest.raises(ParseError, match=r"found no metric p99_itl_ms, median_ttft_ms in the output"):
        parse_case(sd.command, [text])
    only = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: sglang-serving\nmetrics:\n'
                       "  output_throughput: {}\n")  # fmt: skip
    assert only.command is not None
    parsed = parse_case(only.command, [text])
    assert parsed.metrics["output_throughput"].value == 222 and len(parsed.notes) == 1


@pytest.mark.parametrize("parser", ["jsonl", "sglang-one-batch"])
def test_every_jsonl_parser_reads_one_record(parser: str) -> None:
    one_batch = (FIX / "engines" / "sglang_one_batch.jsonl").read_text().splitlines()
    first, second = json.loads(one_batch[0]), json.loads(one_batch[1])
    first["extra_ms"] = 7.5
    text = "log line\n" + json.dumps(first) + "\nanother log line\n" + json.dumps(second) + "\n"
    records, notes = PARSERS[parser].parse_noted(text)
    assert records == [second]
    assert notes == [
        f"the output holds 2 {parser} result records (lines 2, 4): used the last one (line 4) for every metric; "
        "the others are earlier runs appended to the same file"
    ]
    single, none = PARSERS[parser].parse_noted(one_batch[0] + "\n")
    assert single == [json.loads(one_batch[0])] and none == []


# -- 5. request counts ----------------------------------------------------------------------------------------


def test_a_negative_failed_count_is_a_parse_error() -> None:
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: vllm-serve\n')
    assert sd.command is not None
    ev = command_result(sd.command, _event({"c": 1, "argv": ["x"]}, {"output": VLLM_NEG}), "g")
    assert ev.type == "error" and ev.data["kind"] == "parse"
    assert ev.data["message"].startswith(
        "parser vllm-serve found 'failed' is -3, not a request count (a whole number >= 0); last output lines:"
    ), ev.data["message"]
    ok = command_result(sd.command, _event({"c": 1, "argv": ["x"]}, {"output": VLLM}), "g")
    assert ok.type == "result" and ok.data["metrics"]["failed_requests"] == {"value": 0.0, "unit": "req"}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"completed": -1}, "'completed' is -1, not a request count"),
        ({"completed": 3.5}, "'completed' is 3.5, not a request count"),
        ({"completed": 10, "failures": -2}, "'failures' is -2, not a request count"),
        ({"completed": 10, "num_prompts": -64}, "'num_prompts' is -64, not a request count"),
        ({"completed": 1e308 * 10, "failed": 0}, "'completed' is inf, not a request count"),
        ({"completed": 64, "failed": 3, "num_prompts": 64}, "64 completed and 3 failed requests are more than the 64"),
    ],
)  # fmt: skip
def test_request_counts_that_cannot_be_counts(record: dict[str, Any], message: str) -> None:
    with pytest.raises(ParseError, match=message.replace("(", r"\(")):
        request_counts(record)


def test_request_counts_that_are_counts() -> None:
    c = request_counts({"completed": 61, "failed": 3, "num_prompts": 64})
    assert c is not None and (c.completed, c.failed, c.total) == (61, 3, 64)
    c = request_counts({"completed": 64.0, "failed": "n/a"})  # not a number: the tool did not say
    assert c is not None and (c.completed, c.failed, c.total) == (64, None, None)


def test_lookup_keeps_integers_and_refuses_huge_ones() -> None:
    assert lookup({"a": 12}, "a") == 12 and type(lookup({"a": 12}, "a")) is int
    assert lookup({"a": 10**400}, "a") is None
    assert lookup({"a": 2**53}, "a") == 2**53 and lookup({"a": -(2**53)}, "a") == -(2**53)
    assert lookup({"a": 2**53 + 1}, "a") is None and lookup({"a": -(2**53) - 1}, "a") is None  # the off-by-one
    assert lookup({"a": 2**63 - 1}, "a") is None  # a double would store it as 9223372036854775808
    assert lookup({"a": "12.5"}, "a") == 12.5
    assert lookup({"a": float("nan")}, "a") is None


# -- 3. fuzz: type-confused JSON in every parser gives a result or a ParseError, nothing else --------------------

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
)  # fmt: skip
_JSON = st.recursive(
    _SCALARS,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8,
)
_NCCL_KEYS = ("size", "count", "type", "redop", "root", "out_of_place", "in_place")
_BLOCK_KEYS = ("time", "cpu_time", "alg_bw", "bus_bw", "nwrong")
_SERVING_KEYS = ("completed", "failed", "failures", "errors", "input_lens", "num_prompts", "duration",
                 "output_throughput", "median_ttft_ms", "accept_length", "backend", "batch_size",
                 "median_decode_throughput", "avg_latency", "percentiles")  # fmt: skip


def _confused(keys: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), _JSON, max_size=len(keys))


def _blocks() -> st.SearchStrategy[Any]:
    return st.one_of(_JSON, _confused(_BLOCK_KEYS))


_NCCL_RESULT = st.one_of(
    _JSON,
    _confused(_NCCL_KEYS),
    st.fixed_dictionaries(
        {"size": _JSON, "count": _JSON},
        optional={"root": _JSON, "type": _JSON, "out_of_place": _blocks(), "in_place": _blocks()},
    ),
)
_NCCL_DOC = st.fixed_dictionaries(
    {"results": st.one_of(_JSON, st.lists(_NCCL_RESULT, max_size=3))},
    optional={"config": st.one_of(_JSON, _confused(("devices", "nthreads", "ngpus"))), "out_of_bounds": _JSON,
              "average_bus_bandwidth": _JSON, "nccl_version": _JSON},
)  # fmt: skip


def _suite_for(parser: str) -> Any:
    named = "{name: regex, pattern: 'x=(?P<x>\\S+)'}" if parser == "regex" else parser
    metrics = "metrics:\n  x: {path: x, unit: s}\n" if PARSERS[parser].generic else ""
    sd = parse_suite(f'name: s\ndescription: d\ncommand: ["x"]\nparser: {named}\n{metrics}')
    assert sd.command is not None
    return sd.command


def _result_or_parse_error(parser: str, text: str, case: dict[str, Any]) -> None:
    suite = _suite_for(parser)
    try:
        parse_case(suite, [text], case)
    except ParseError:
        pass
    ev = command_result(suite, _event({**case, "argv": ["x"]}, {"output": text}), "g")
    assert ev.type == "result" or (ev.type == "error" and ev.data["kind"] in ("parse", "invalid", "requests")), ev
    assert "this is a bug in orch" not in ev.data.get("message", "")
    json.dumps(ev.data, allow_nan=False)  # whatever is stored is valid JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_NCCL_DOC, size=st.one_of(st.none(), st.integers(min_value=0, max_value=2**64)))
def test_fuzz_nccl_json_shapes(doc: dict[str, Any], size: int | None) -> None:
    text = json.dumps(doc)
    _result_or_parse_error("nccl-tests", text, {} if size is None else {"size_bytes": size})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parser=st.sampled_from(sorted(PARSERS)), records=st.lists(st.one_of(_JSON, _confused(_SERVING_KEYS)),
                                                                  max_size=3), as_lines=st.booleans())
def test_fuzz_every_parser_with_type_confused_json(parser: str, records: list[Any], as_lines: bool) -> None:
    text = "\n".join(json.dumps(r) for r in records) if as_lines else json.dumps(records[-1] if records else {})
    _result_or_parse_error(parser, text, {})


@settings(max_examples=150, deadline=None)
@given(cells=st.lists(st.one_of(st.text(alphabet="0123456789.-eE+naNifN/A", min_size=1, max_size=8)),
                      min_size=13, max_size=13))
def test_fuzz_nccl_text_rows(cells: list[str]) -> None:
    header = "\n".join(ln for ln in GOOD_TXT.splitlines()[:17])
    text = f"{header}\n   1048576  262144  {'  '.join(cells[2:])}\n# Out of bounds values : 0 OK\n"
    _result_or_parse_error("nccl-tests", text, {"size_bytes": MIB})


def test_a_parser_bug_costs_only_its_case_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net in command_result: an exception other than ParseError (a bug) is an error for this case."""
    from dataclasses import replace

    import orchestrator.suites.command as command

    def broken(text: str, pattern: str | None) -> list[Any]:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setitem(command.PARSERS, "vllm-serve", replace(PARSERS["vllm-serve"], records=broken))
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: vllm-serve\n')
    assert sd.command is not None
    ev = command_result(sd.command, _event({"c": 1, "argv": ["x"]}, {"output": VLLM}), "g")
    assert ev.type == "error" and ev.data["kind"] == "parse" and ev.data["case"] == {"c": 1}
    assert ev.data["message"] == (
        "parser vllm-serve failed on this output (TypeError: 'int' object is not iterable); this is a bug in orch, "
        "please report it with the output kept in info.output_tail"
    )


@pytest.mark.parametrize(
    ("parser", "text", "shown"),
    [
        ("vllm-serve", VLLM.replace('"p99_ttft_ms": 341.08', '"p99_ttft_ms": -341.08'), "p99_ttft_ms = -341.08"),
        ("vllm-serve", VLLM.replace('"output_throughput": 2282.45', '"output_throughput": -2282.45'),
         "output_throughput = -2282.45"),
        ("sglang-serving", APPENDED.replace('"output_throughput": 5335.06', '"output_throughput": -5335.06'),
         "output_throughput = -5335.06"),
        ("vllm-latency", (FIX / "engines" / "vllm_latency.json").read_text().replace('"avg_latency": 1.',
                                                                                   '"avg_latency": -1.'),
         "avg_latency = -1.28345"),
    ],
)  # fmt: skip
def test_a_negative_engine_metric_is_a_parse_error(parser: str, text: str, shown: str) -> None:
    assert text != (FIX / "engines" / "vllm_latency.json").read_text() and "-" in text
    sd = parse_suite(f'name: s\ndescription: d\ncommand: ["x"]\nparser: {parser}\n')
    assert sd.command is not None
    with pytest.raises(ParseError) as exc:
        parse_case(sd.command, [text])
    assert str(exc.value) == (
        f"parser {parser} found {shown} in the output: a time, throughput or count this tool reports is never "
        "negative, so the output is broken"
    )


def test_a_generic_parser_keeps_a_negative_value() -> None:
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: json\nmetrics:\n  delta: {path: d, unit: ms}\n')
    assert sd.command is not None
    assert parse_case(sd.command, ['{"d": -2.5}']).metrics["delta"].value == -2.5


def test_a_negative_average_bus_bandwidth_is_a_parse_error() -> None:
    bad = GOOD_TXT.replace("# Avg bus bandwidth    : 142.975", "# Avg bus bandwidth    : -142.975")
    assert bad != GOOD_TXT
    with pytest.raises(ParseError, match=r"average bus bandwidth '-142.975' is negative"):
        NCCL.parse(bad, None, {"size_bytes": MIB})


# -- 4. one rule for every parser: an integer metric within +-2**53 (a double holds it exactly), a float finite -

_INT_RULE = "an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot hold exactly"
_NOT_FINITE = "not a finite number (NaN, an infinity, or past float's range): no measurement"


def _generic(parser: str) -> Any:
    named = "{name: regex, pattern: 'v=(?P<v>\\S+)'}" if parser == "regex" else parser
    sd = parse_suite(
        f'name: s\ndescription: d\ncommand: ["x"]\nparser: {named}\nmetrics:\n  v: {{path: v, unit: "1"}}\n'
    )
    assert sd.command is not None
    return sd.command


@pytest.mark.parametrize("parser", ["json", "jsonl", "regex"])
@pytest.mark.parametrize(
    ("written", "value"),
    [("9007199254740992", 2**53), ("-9007199254740992", -(2**53)), ("12", 12), ("1.5e3", 1500.0),
     ("9.223372036854775807e18", 9.223372036854775807e18)],  # a float is a double already: taken as written
)
def test_the_exact_integer_edges_are_metrics_in_every_generic_parser(parser: str, written: str, value: float) -> None:
    text = f"v={written}" if parser == "regex" else f'{{"v": {written}}}'
    got = parse_case(_generic(parser), [text]).metrics["v"].value
    assert got == value and type(got) is type(value)  # "12" is the integer 12 in regex as in JSON


@pytest.mark.parametrize("parser", ["json", "jsonl", "regex"])
@pytest.mark.parametrize(
    ("written", "shown", "why"),
    [
        ("9007199254740993", "9007199254740993", _INT_RULE),  # 2**53 + 1: stored as ...992 before
        ("-9007199254740993", "-9007199254740993", _INT_RULE),
        ("9223372036854775807", "9223372036854775807", _INT_RULE),  # int64's largest: stored as 2**63 before
        ("9223372036854775808", "9223372036854775808", _INT_RULE),  # 2**63: the json parser took it
        ("-9223372036854775809", "-9223372036854775809", _INT_RULE),  # regex stored these three as floats
        ("18446744073709551616", "18446744073709551616", _INT_RULE),
        ("12345678901234567890", "12345678901234567890", _INT_RULE),
        ("1e400", "1e400", "past the range of a double (±1.8e308): no measurement"),  # JSON read it as inf
        ("9" * 5000, "99999999999999999999...9999999999 (5,000 digits)", _INT_RULE),  # JSON: "no JSON object"
    ],
)
def test_a_value_no_metric_may_hold_is_one_parse_error_naming_metric_and_value(
    parser: str, written: str, shown: str, why: str
) -> None:
    text = f"v={written}" if parser == "regex" else f'log line\n{{"v": {written}}}'
    with pytest.raises(ParseError) as exc:
        parse_case(_generic(parser), [text, text], {})
    hint = " (a figure that large is written as a float, 1.8e19, or in a larger unit)" if why == _INT_RULE else ""
    assert str(exc.value) == f"parser {parser}: metric 'v' in the output is {shown}, {why}{hint} (run 1 of 2)"


@pytest.mark.parametrize("parser", ["json", "jsonl", "regex"])
@pytest.mark.parametrize("written", ["1e-400", "-2.5E-330", "0." + "0" * 330 + "7"])
def test_a_non_zero_value_a_double_holds_only_as_zero_is_one_parse_error(parser: str, written: str) -> None:
    """Python's float() and json read ``1e-400`` as 0.0 without a word: it was stored as a measured 0."""
    text = f"v={written}" if parser == "regex" else f'log line\n{{"v": {written}}}'
    with pytest.raises(ParseError) as exc:
        parse_case(_generic(parser), [text, text], {})
    shown = written if len(written) <= 40 else written[:20] + "..." + written[-10:]
    assert str(exc.value) == (f"parser {parser}: metric 'v' in the output is {shown}, not zero but below the "
                              "smallest double (4.9e-324): it would be stored as 0 (run 1 of 2)")  # fmt: skip


@pytest.mark.parametrize("written", ["0", "0.0", "-0", "0e-400", "1e-320", "5e-324"])
def test_zero_and_subnormal_values_are_metrics(written: str) -> None:
    for parser in ("json", "regex"):
        text = f"v={written}" if parser == "regex" else f'{{"v": {written}}}'
        assert parse_case(_generic(parser), [text]).metrics["v"].value == float(written)


@pytest.mark.parametrize(("parser", "written"), [("json", "NaN"), ("json", "-Infinity"), ("regex", "nan"),
                                                 ("regex", "-inf"), ("regex", "Infinity")])  # fmt: skip
def test_nan_and_infinities_are_named_not_missing(parser: str, written: str) -> None:
    text = f"v={written}" if parser == "regex" else f'{{"v": {written}}}'
    with pytest.raises(ParseError) as exc:
        parse_case(_generic(parser), [text])
    assert "found no metric" not in str(exc.value)
    assert str(exc.value).startswith("parser " + parser + ": metric 'v' in the output is ")
    assert str(exc.value).endswith(_NOT_FINITE)


def test_an_engine_parser_follows_the_same_rule_and_names_the_field() -> None:
    text = VLLM.replace('"output_throughput": 2282.45', '"output_throughput": 9223372036854775808')
    assert text != VLLM
    sd = parse_suite('name: s\ndescription: d\ncommand: ["x"]\nparser: vllm-serve\n')
    assert sd.command is not None
    with pytest.raises(ParseError) as exc:
        parse_case(sd.command, [text])
    assert str(exc.value).startswith(
        f"parser vllm-serve: metric 'output_throughput' in the output is 9223372036854775808, {_INT_RULE}"
    )
    ev = command_result(sd.command, _event({"argv": ["x"]}, {"output": text}), "g")
    assert ev.type == "error" and ev.data["kind"] == "parse"
    assert "metric 'output_throughput' in the output is 9223372036854775808" in ev.data["message"]


def test_a_word_or_foreign_digits_are_no_number_and_an_earlier_record_is_never_taken_instead() -> None:
    regex = _generic("regex")
    for word in ("abc", "\u0661\u0662", "1_000", "0x10"):  # float() read Arabic-Indic digits and underscores
        with pytest.raises(ParseError) as exc:
            parse_case(regex, [f"v={word}"])
        # the pattern matched: the value is named, not "found no metric" (which sent the user to the pattern)
        assert str(exc.value) == (f"parser regex: metric 'v' in the output is {word!r}, not a number (a metric is "
                                  "written in ASCII decimal digits: 12, -1.5, 2e3)")  # fmt: skip
    for parser in ("json", "jsonl"):
        with pytest.raises(ParseError, match=r"metric 'v' in the output is \[1, 2\], not a number"):
            parse_case(_generic(parser), ['{"v": [1, 2]}'])
        with pytest.raises(ParseError, match="found no metric v in the output"):  # absent: as before
            parse_case(_generic(parser), ['{"w": 1}'])
    # the last match holding v decides: an unfit value there is refused, never replaced by an earlier one
    with pytest.raises(ParseError, match="is 99999999999999999999"):
        parse_case(regex, ["v=5\nv=99999999999999999999"])


@pytest.mark.parametrize("parser", ["json", "jsonl"])
def test_a_metric_written_as_null_is_named_not_missing(parser: str) -> None:
    """``{"v": null}`` said "found no metric v in the output (looked for v)": the field is there, without a value."""
    with pytest.raises(ParseError) as exc:
        parse_case(_generic(parser), ['{"v": null}'], {})
    assert str(exc.value) == (f"parser {parser}: metric 'v' in the output is null: the tool wrote the field without "
                              "a value, no measurement")  # fmt: skip
    with pytest.raises(ParseError, match="found no metric v in the output"):
        parse_case(_generic(parser), ['{"w": null}'], {})
