"""A headless browser for dashboard tests: Debian's chromium (scripts/setup.sh installs it) driven by Playwright for
Python through ``executable_path`` — no browser download. ``browser`` is one chromium per test (a
session-wide one would keep Playwright's own event loop alive next to pytest-asyncio's);
``open_page(url)`` gives a fresh page (1280x1000) whose console errors and page errors are collected in
``page.errors``. Screenshots go to ``artifacts_dir``: ``$ORCH_TEST_ARTIFACTS`` when set (CI keeps it), else the
test's tmp dir."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium (scripts/setup.sh)")


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield b
        b.close()


@pytest.fixture
def artifacts_dir(tmp_path: Path) -> Path:
    root = os.environ.get("ORCH_TEST_ARTIFACTS")
    path = Path(root) if root else tmp_path / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[[str], Any]]:
    contexts: list[Any] = []

    def open_(url: str) -> Any:
        ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        page.errors = []
        page.on("console", lambda m: page.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: page.errors.append(f"page error: {e}"))
        page.goto(url)
        return page

    yield open_
    for ctx in contexts:
        ctx.close()
