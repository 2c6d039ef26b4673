"""The record a parser stores is the tool's last result, never an earlier line's figure taken because the last
one could not be read (the variant testers' cases, each stored an earlier figure, completed, exit 0)."""

from __future__ import annotations

import pytest

from orchestrator.parsers import PARSERS
from orchestrator.parsers.base import ParseError


def _t(parser: str, text: str, pattern: str | None = None) -> tuple[float, list[str]]:
    records, notes = PARSERS[parser].parse_noted(text, pattern)
    return float(records[-1]["t"]), notes


def test_json_takes_the_last_top_level_document_not_a_per_iteration_line() -> None:
    text = '{"iter": 1, "t": 1.0}\n{"iter": 2, "t": 1.1}\n{\n  "t": 1.05,\n  "iters": 2\n}\n'
    t, notes = _t("json", text)
    assert t == 1.05 and notes and "3 json result records (lines 1, 2, 3)" in notes[0], notes


def test_json_never_takes_an_indented_line_inside_the_document() -> None:
    text = 'INFO start\n{\n  "t": 2.0,\n  "runs": [\n    {"t": 1.0}\n  ]\n}\n'
    assert _t("json", text) == (2.0, [])
    assert _t("json", text.replace("INFO start\n", "")) == (2.0, [])  # the whole text, one document


@pytest.mark.parametrize(
    "last",
    [
        '{"t": 2.0, "gpu": "NVIDIA\tH200"}',  # a raw tab inside a string, as C writers print it
        '\ufeff{"t": 2.0}',  # a byte order mark
        '{"t": 2.0, "note": "a\x00b"}',
        '{"t": 2.0, "note": "a\u2028b"}',
    ],
)
def test_jsonl_reads_the_last_line_whatever_its_strings_hold(last: str) -> None:
    assert _t("jsonl", '{"t": 1.0}\n' + last + "\n")[0] == 2.0


@pytest.mark.parametrize(
    "last", ['{"t": 2.5, "gpu": "H2', '{"t": 2.0, "note": "a\x0cb"}', '{"t": 2.0,}']
)
def test_jsonl_refuses_an_unreadable_last_object_line(last: str) -> None:
    with pytest.raises(ParseError, match=r"output line 2 starts as a JSON object but is not JSON"):
        _t("jsonl", '{"t": 1.0}\n' + last + "\n")


def test_json_refuses_a_document_cut_short_after_the_last_one_read() -> None:
    with pytest.raises(ParseError, match=r"output line 2 starts a JSON object that is not JSON"):
        _t("json", '{"t": 1.0}\n{\n  "t": 2.0,\n')


@pytest.mark.parametrize(("parser", "text"), [("jsonl", '{"t": 1, "t": 2}\n'), ("json", '{"t" : 1.5, "t" : 2.5}'),
                                              ("json", 'log\n{"a": {"t": 1, "t": 2}}\n')])  # fmt: skip
def test_a_key_written_twice_in_the_tool_s_json_is_not_read(parser: str, text: str) -> None:
    with pytest.raises(ParseError, match=r"writes the key 't' twice"):
        _t(parser, text)


@pytest.mark.parametrize("end", ["\r\n", "\x0c\n", "\r"])
def test_regex_lines_end_where_every_parser_s_do(end: str) -> None:
    assert _t("regex", "t=1.0\nt=2.0" + end, r"t=(?P<t>[0-9.]+)$")[0] == 2.0
    assert _t("regex", "t=1.0\nprogress 99%\rt=2.0\n", r"^t=(?P<t>[0-9.]+)")[0] == 2.0
