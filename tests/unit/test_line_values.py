"""Numbers past a double's range and lone surrogates in an agent line (issue 10): ``protocol.exact_json`` reads
them without raising, ``protocol.unholdable_problem`` names the field, ``ingest.SpoolLines`` makes the line one
error row at its position, and ``compute.clean_metrics`` never raises OverflowError — pure."""

from __future__ import annotations

import sys

import pytest

from orchestrator.ingest import SpoolLines
from orchestrator.protocol import JUDGED_KEY, Unholdable, exact_json, parse_line, unholdable_problem
from orchestrator.store.compute import clean_metrics

BIG = "1" + "0" * 400


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (BIG, "x is 10000000000000000000...0000000000 (401 digits), past the range of a double"),
        ("-" + BIG, "x is -1000000000000000000...0000000000 (401 digits), past the range of a double"),
        ("1e400", "x is 1e400, past the range of a double"),
        ("-1E+400", "x is -1E+400, past the range of a double"),
        ("9" * 5000, "x is 99999999999999999999...9999999999 (5,000 digits)"),  # past int's 4300-digit str limit
        ("2" + "0" * 308, "x is 2000"),  # 309 digits, above float max (1.797e308)
        ("1e-400", "x is 1e-400, not zero but below the smallest double"),  # a double holds it only as 0
        ("-1.5E-400", "x is -1.5E-400, not zero but below the smallest double"),
        ("2e-324", "x is 2e-324, not zero but below"),  # under half the smallest subnormal (4.9e-324): 0.0
        ("0." + "0" * 400 + "1", "x is 0.000000000000000000...0000000001 (402 digits), not zero but below"),
        ("0.000001e-320", "x is 0.000001e-320, not zero but below"),
    ],
)
def test_a_number_no_double_holds_is_read_and_named(token: str, says: str) -> None:
    doc = exact_json(f'{{"x": {token}}}')
    assert isinstance(doc["x"], Unholdable)
    problem = unholdable_problem(doc)
    assert problem is not None and problem.startswith(says), problem


@pytest.mark.parametrize(
    "token",
    ["1" + "0" * 308, str(sys.float_info.max.__int__()), "18446744073709551616", "1e308", "0", "-0", "0e-400",
     "0.0E-999", "1e-320", "4.9e-324", "3e-324", "1.5e-05"],  # a subnormal, zero written with any exponent
)
def test_a_number_a_double_holds_is_read_exactly_and_passes(token: str) -> None:
    doc = exact_json(f'{{"x": [{token}]}}')
    assert not isinstance(doc["x"][0], Unholdable)
    assert unholdable_problem(doc) is None
    if "e" not in token and "." not in token:
        assert doc["x"][0] == int(token)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"metrics": {"t": {"unit": "m\\ud800s"}}}', "metrics.t.unit holds a lone surrogate"),
        ('{"case": {"tag": ["a", "\\udfff"]}}', "case.tag[1] holds a lone surrogate"),
        ('{"case": {"k\\udc00": 1}}', "a key of case ('k\\udc00') holds a lone surrogate"),
        ('{"message": "\\ud800"}', "message holds a lone surrogate"),
    ],
)
def test_a_lone_surrogate_anywhere_is_named(text: str, says: str) -> None:
    problem = unholdable_problem(exact_json(text))
    assert problem is not None and problem.startswith(says), problem


def test_a_surrogate_pair_is_text() -> None:
    doc = exact_json('{"unit": "\\ud83d\\ude00"}')
    assert doc == {"unit": "\U0001f600"} and unholdable_problem(doc) is None


def _result(seq: int, ci: int, metric: str = '{"value": 1.5, "unit": "ms"}', case: str = '{"M": 1}') -> bytes:
    return (f'{{"v": 1, "seq": {seq}, "type": "result", "case_index": {ci}, "case": {case}, '
            f'"metrics": {{"t": {metric}}}}}').encode()  # fmt: skip


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (_result(1, 0, f'{{"value": {BIG}, "unit": "ms"}}'), "metrics.t.value is 1000"),
        (_result(1, 0, f'{{"value": 1, "unit": "ms", "samples": [1, -{BIG}]}}'), "metrics.t.samples[1] is -1000"),
        (_result(1, 0, '{"value": 1, "unit": "ms", "p10": 1e400}'), "metrics.t.p10 is 1e400"),
        (_result(1, 0, f'{{"value": 1, "unit": "ms", "max": {"9" * 5000}}}'), "metrics.t.max is 9999"),
        (_result(1, 0, case=f'{{"M": {BIG}}}'), "case.M is 1000"),
        (_result(1, 0, '{"value": 1, "unit": "m\\ud800s"}'), "metrics.t.unit holds a lone surrogate"),
        (_result(1, 0, '{"value": 1e-400, "unit": "ms"}'), "metrics.t.value is 1e-400, not zero but below"),
        (_result(1, 0, '{"value": 1, "unit": "ms", "samples": [1.5e-05, -0.0001e-321]}'),
         "metrics.t.samples[1] is -0.0001e-321"),  # orjson reads both kinds as 0.0: parse_line reads it again
        (_result(1, 0, case='{"M": 1, "scale": 0.' + "0" * 330 + '7}'), "case.scale is 0.000"),
    ],
)
def test_spool_lines_make_such_a_result_one_error_row_at_its_seq(line: bytes, says: str) -> None:
    spool = SpoolLines(1)
    ev = spool.event(line)
    assert (ev.seq, ev.type, ev.data["kind"], ev.data["line_type"]) == (1, "error", "protocol", "result")
    assert ev.data["message"].startswith(f"agent line 1 (result): {says}"), ev.data["message"]
    assert ev.data["info"] == {JUDGED_KEY: True, "error_kind": "invalid"}  # the agent's result: the case failed
    assert ev.data["case_index"] == 0
    assert "case" not in ev.data or unholdable_problem(ev.data["case"]) is None  # a bad case is not kept
    nxt = spool.event(_result(2, 1))  # ingest goes on
    assert (nxt.seq, nxt.type) == (2, "result")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (f'{{"v": 1, "seq": 0, "type": "done", "counts": {{"lines": 0, "results": {BIG}, "errors": 0}}}}',
         "agent line 0 (done): counts.results is 1000"),
        ('{"v": 1, "seq": 0, "type": "log", "level": "info", "message": "a\\udbffb"}',
         "agent line 0 (log): message holds a lone surrogate"),
        ('{"v": 1, "seq": 0, "type": "hello", "facts": {"gpu": "\\ud800"}}',
         "agent line 0 (hello): facts.gpu holds a lone surrogate"),
        ('{"v": 1, "seq": 0, "type": "error", "message": "boom", "case_index": 0, "case": {"x": 1e999}}',
         "agent line 0 (error): case.x is 1e999"),
    ],
)
def test_every_line_type_is_checked(line: str, says: str) -> None:
    ev = SpoolLines(0).event(line.encode())
    assert (ev.seq, ev.type) == (0, "error") and ev.data["message"].startswith(says), ev.data["message"]


def test_a_seq_mismatch_keeps_its_message_and_drops_an_unholdable_case() -> None:
    ev = parse_line(f'{{"v": 1, "seq": 9, "type": "result", "case_index": 3, "case": {{"M": {BIG}}}}}', expected_seq=2)
    assert ev.type == "error" and "claims seq 9" in ev.data["message"]
    assert ev.data["case_index"] == 3 and "case" not in ev.data


@pytest.mark.parametrize(
    "metric",
    [
        {"value": 10**400, "unit": "ms"},
        {"value": 1.0, "unit": "ms", "median": -(10**400)},
        {"value": 1.0, "unit": "ms", "samples": [1.0, 10**400]},
    ],
)
def test_clean_metrics_refuses_a_huge_int_with_a_value_error_not_overflow(metric: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"of ~401 digits is an integer past 2\*\*53"):
        clean_metrics({"t": metric})
