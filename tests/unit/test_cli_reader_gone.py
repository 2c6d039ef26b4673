"""``orch``'s test for "stdout's reader went away" (cli/main.py): only a pipe with no reader left is one; a
BrokenPipeError anywhere else is a real error and must not end orch as if the user's pager had quit."""

from __future__ import annotations

import io
import os
import sys

import pytest

from orchestrator.cli.main import _stdout_reader_gone


def test_only_a_pipe_whose_read_end_is_closed_has_its_reader_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    with os.fdopen(w, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        assert not _stdout_reader_gone()  # a reader is there
        os.close(r)
        assert _stdout_reader_gone()
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # no descriptor (a test's capture)
    assert not _stdout_reader_gone()
