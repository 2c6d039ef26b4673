"""Untrusted text through the CLI's rich output (issue 11 item 5): labels, host names, case parameters and tool
output with random Unicode, rich markup brackets, emoji codes and control characters go through ``orch runs list``,
``runs show`` and ``runs compare`` (the real CLI entry point on a real SQLite store): no crash, and the text is
shown as given — brackets and emoji codes as typed, control characters as their escapes (``\\x1b``)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from orchestrator.cli import render
from orchestrator.cli.main import main
from orchestrator.protocol import Event
from orchestrator.store.repo import Store

TRICKY = [
    "<s>[INST] hello [/INST]",  # a benchmark's prompt template
    "nightly [/b]",  # a label set over the API
    "h3[/bold]",  # a host name
    "[link=https://x]y[/link]",
    "[bold red]x",
    "\\[not markup]",
    "ends in \\",
    ":thumbs_up: :smile:",
    "\x1b[31mred\x1b[0m",
    "a\tb\nc\rd",
    "rtl \u202egnp.exe",
    "zero\u200bwidth",
    "日本語テキスト",
]
TEXT = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=24),
    st.lists(st.sampled_from([*TRICKY, "[", "]", "/", "\\", "\x00", "\x9b", "x"]), min_size=1, max_size=5).map("".join),
)


def _norm(text: str) -> str:
    return "".join(text.split())


def _shown(text: str) -> str:
    """How a one-line field shows ``text`` read back from the store: a NUL is stored as U+2400 (store/storable.py,
    alike on SQLite and PostgreSQL), other control characters are shown as escapes, nothing else changed."""
    return _norm(render.visible(text.replace("\x00", "\u2400")))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('untrusted') / 'orch.db'}"
    store = Store.from_url(url)
    store.upgrade()
    yield url, store
    store.close()


def _orch(url: str, *argv: str) -> tuple[int, str]:
    """Run the CLI in this process (its one error boundary included); a wide console so that no cell folds."""
    out, err = io.StringIO(), io.StringIO()
    wide, wide_err = Console(highlight=False, emoji=False, width=4000), Console(
        stderr=True, highlight=False, emoji=False, width=4000
    )
    code: int | str | None = 0
    with (
        redirect_stdout(out),
        redirect_stderr(err),
        patch.object(render, "console", lambda: wide),
        patch.object(render, "err_console", lambda: wide_err),
        patch.dict(os.environ, {"ORCH_DB_URL": url}),
    ):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), out.getvalue() + err.getvalue()


def _run(store: Store, label: str, host: str, value: str, output: str) -> str:
    store.upsert_host(host, address=None, group="g", labels={"note": value})
    rid = store.create_run(suite="serve", params={"sets": {"prompt": value}}, preset=None, label=label,
                           hosts=[host], started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, host, facts={}, agent_version=value, build_sha=None)
    case = {"C": 1, "prompt": value}
    store.ingest(rid, host, [
        Event(seq=0, type="result", data={"case": case, "metrics": {"time_ms": {"value": 2.0, "unit": "ms"}},
                                          "info": {"warnings": [f"tool: {output}"]}}),
        Event(seq=1, type="error", data={"case": {"C": 2, "prompt": value}, "message": f"tool said: {output}"}),
    ])  # fmt: skip
    store.finish_host_run(rid, host, "completed", f"host said: {output}")
    store.finish_run(rid, "partial")
    return rid


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=TEXT, host=TEXT, value=TEXT, output=TEXT)
def test_untrusted_text_is_shown_as_given(
    db: tuple[str, Store], label: str, host: str, value: str, output: str
) -> None:
    url, store = db
    base = _run(store, label, host, value, output)
    head = _run(store, label, host, value, output)

    code, text = _orch(url, "runs", "list", "--limit", "1000")
    assert code == 0, text
    assert _shown(label) in _norm(text) and _shown(host) in _norm(text)

    code, text = _orch(url, "runs", "show", head)
    assert code == 0, text
    for given_text in (label, host, value, f"tool: {output}"):
        assert _shown(given_text) in _norm(text), (given_text, text)
    first_line = f"tool said: {output}".strip().splitlines()[0]  # a failed case shows its message's first line
    assert _shown(first_line) in _norm(text)

    code, text = _orch(url, "runs", "compare", base, head)
    assert code == 0, text
    assert _shown(host) in _norm(text) and _shown(f"prompt={value}") in _norm(text)


def test_a_host_selector_with_brackets_is_an_error_line_not_a_crash(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    code, text = _orch(url, "--inventory", str(inv), "run", "moe-sweep", "--hosts", "h3[/bold]")
    assert code == 2 and "orch hit a bug" not in text
    assert "error: --hosts 'h3[/bold]' matches no group or host" in text, text
