"""``orch runs logs`` output (found by a tester): a host's ANSI/OSC escapes reach a terminal as escapes, never as
control sequences; a pipe or file still gets the text byte for byte."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import pytest

from orchestrator.cli import render

TEXT = "ok \x1b[2J\x1b]0;pwned\x07 \u202eevil\r\ndone\ttab\n"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _hosts() -> list[SimpleNamespace]:
    run = {"run": 0, "stdout": {"bytes": len(TEXT), "sha256": "ab", "text": TEXT}}
    return [SimpleNamespace(host="h\x1b[31m1", error=None, hint=None, cases=[{"case_index": 0, "runs": [run]}])]


@pytest.mark.parametrize("tty", [True, False])
def test_run_logs_escapes_control_characters_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch, tty: bool) -> None:
    out = _Tty() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    render.run_logs("r", _hosts())
    text = out.getvalue()
    if tty:
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\r" not in text
        assert "ok \\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\\r\ndone\ttab\n" in text
        assert text.startswith("==> h\\x1b[31m1 case 0 run 0 stdout (")
    else:
        assert text.endswith(TEXT) and text.startswith("==> h\x1b[31m1 case 0")


RAW = b"\xff\xfe\x00ok\x1b[2J"


def _binary_hosts(problems: list[str] | None = None) -> list[SimpleNamespace]:
    import base64

    f = {"bytes": len(RAW), "sha256": "cd", "encoding": "base64", "text": base64.b64encode(RAW).decode()}
    run = {"run": 0, "stderr": f}
    return [SimpleNamespace(host="h1", error=None, hint=None, problems=problems or [],
                            cases=[{"case_index": 0, "runs": [run]}])]  # fmt: skip


def test_run_logs_writes_bytes_that_are_not_utf8_as_they_are_to_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", out)
    render.run_logs("r", _binary_hosts())
    assert raw.getvalue() == b"==> h1 case 0 run 0 stderr (9 bytes, sha256 cd) <==\n" + RAW + b"\n"


def test_run_logs_says_a_terminal_sees_lossy_text_and_how_to_get_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _Tty()
    monkeypatch.setattr(sys, "stdout", out)
    render.run_logs("r", _binary_hosts())
    text = out.getvalue()
    assert "(not UTF-8: shown with U+FFFD for undecodable bytes; the exact bytes: --output DIR" in text
    assert "\ufffd\ufffd\u2400ok\\x1b[2J\n" in text and "\x1b" not in text
