"""Lines of a program's output are cut where a terminal and OpenSSH cut them, never at U+0085, U+2028 or U+2029
(``str.splitlines`` does): a JSON line, an ssh -G value or an answer's last line holding one stays whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.orch_agent.spool import read_lines
from orchestrator.parsers.base import json_document, json_lines
from orchestrator.textlines import output_lines
from orchestrator.transport.base import CommandResult
from orchestrator.transport.sshconfig import parse_ssh_g

UNICODE_BREAKS = ("\u2028", "\u2029", "\x85")


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\n\nb", ["a", "", "b"]),
        ("a\r\nb\rc\x0bd\x0ce\x1cf\x1dg\x1eh\n", list("abcdefgh")),
        ("x\u2028y\u2029z\x85w\n", ["x\u2028y\u2029z\x85w"]),
    ],
)
def test_output_lines_cut_as_splitlines_but_at_unicode_separators(text: str, lines: list[str]) -> None:
    assert output_lines(text) == lines


@pytest.mark.parametrize("ch", UNICODE_BREAKS)
def test_the_last_json_line_is_read_whole(ch: str) -> None:
    text = '{"t": 1.0}\n' + json.dumps({"t": 2.0, "note": f"a{ch}b"}, ensure_ascii=False) + "\n"
    assert [d["t"] for d in json_lines(text)] == [1.0, 2.0]
    assert json_document("[log] start\n" + text)["t"] == 2.0  # type: ignore[index]


@pytest.mark.parametrize("ch", UNICODE_BREAKS)
def test_an_answer_s_last_line_is_its_json_whole(ch: str) -> None:
    out = '{"x": 1}\n' + json.dumps({"x": 2, "name": f"gpu{ch}0"}, ensure_ascii=False) + "\n"
    assert CommandResult(("t",), 0, out, "", 0.1).json_object()["x"] == 2


def test_an_ssh_g_value_holding_a_separator_is_not_a_keyword_line() -> None:
    got = parse_ssh_g("hostname real.example\nproxycommand nc %h\x85hostname evil.example\nport 22\n")
    assert got["hostname"] == ("real.example",) and got["proxycommand"] == ("nc %h\x85hostname evil.example",)


def test_the_agent_counts_spool_lines_at_newlines_only(tmp_path: Path) -> None:
    spool = tmp_path / "events.jsonl"
    spool.write_bytes(b'{"seq": 0,\r "type": "hello"}\n{"seq": 1}\r\n{"seq": 2, "type"')
    assert read_lines(str(spool)) == [b'{"seq": 0,\r "type": "hello"}\n', b'{"seq": 1}\r\n']
    spool.write_bytes(b"")
    assert read_lines(str(spool)) == []
