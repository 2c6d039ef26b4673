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
