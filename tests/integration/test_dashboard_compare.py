"""The dashboard's compare panel in a real browser (Debian's chromium driven by Playwright) against the real API:
it shows the API's /compare for exactly the two ticked runs, names base and head, never keeps a previous pair's
numbers (a third tick, Reload), and colours only a clear regression or improvement (issue 11 item 7)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="needs Debian's chromium (scripts/setup.sh)")


def _run(store: Store, label: str, times: dict[int, tuple[float, float, float]]) -> str:
    """A finished moe-sweep run on h1: per M, time_ms (median, p10, p90)."""
    store.upsert_host("h1", address=None, group="g", labels={})
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=label, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    store.ingest(rid, "h1", [
        Event(seq=i, type="result", data={"case": {"M": m}, "metrics": {
            "time_ms": {"value": t, "median": t, "p10": lo, "p90": hi, "unit": "ms"}}})
        for i, (m, (t, lo, hi)) in enumerate(sorted(times.items()))
    ])  # fmt: skip
    store.finish_host_run(rid, "h1", "completed")
    store.finish_run(rid, "completed")
    return rid


@pytest.fixture
def page(store: Store, serve: Callable[[Settings, Store], str]) -> Iterator[tuple[Any, str, dict[str, str]]]:
    from playwright.sync_api import sync_playwright

    runs = {
        "a": _run(store, "label-a", {1: (1.0, 0.99, 1.01), 8: (2.0, 1.98, 2.02)}),
        # b: M=1 20% slower (a clear regression), M=8 2% faster but noisy (within noise)
        "b": _run(store, "label-b", {1: (1.2, 1.19, 1.21), 8: (1.96, 1.5, 2.5)}),
        "c": _run(store, "label-c", {1: (0.5, 0.49, 0.51), 8: (1.0, 0.99, 1.01)}),
    }
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        pg = browser.new_page()
        pg.set_default_timeout(60_000)
        pg.goto(url + "/")
        pg.wait_for_selector("#runs tr.run")
        yield pg, url, runs
        browser.close()


def _tick(pg: Any, label: str) -> None:
    label_cell = pg.locator("td:nth-child(4)", has_text=re.compile(f"^label-{label}$"))
    pg.locator("#runs tr.run").filter(has=label_cell).locator("input[type=checkbox]").click()


def test_compare_panel_shows_the_apis_comparison_of_the_two_ticked_runs(page: tuple[Any, str, dict[str, str]]) -> None:
    pg, url, runs = page
    api = httpx.get(f"{url}/api/v1/compare", params={"base": runs["a"], "head": runs["b"]}, timeout=30).json()
    _tick(pg, "a")
    assert pg.locator("#compare").inner_text() == "1 run(s) ticked: tick exactly two to compare"
    _tick(pg, "b")
    pg.wait_for_selector("#compare-summary")
    assert pg.locator("#compare h2").inner_text() == f"Compare time_ms (ms): head {runs['b']} / base {runs['a']}"
    summary = pg.locator("#compare-summary").inner_text()
    assert summary.startswith(f"geometric mean head/base {api['geomean']:.3f} over 2 cases, 1 within noise")
    rows = pg.locator("#compare tbody tr")
    assert [rows.nth(i).locator("td").nth(5).inner_text() for i in range(2)] == ["regression", "within noise"]
    assert rows.nth(0).locator("td").nth(5).get_attribute("class") == "worse"
    assert rows.nth(1).locator("td").nth(5).get_attribute("class") == ""  # not coloured: the CLI says noise

    _tick(pg, "c")  # a third run: no numbers of the old pair stay on screen
    assert pg.locator("#compare").inner_text() == "3 run(s) ticked: tick exactly two to compare"
    _tick(pg, "a")  # b then c are ticked: b is the base
    pg.wait_for_selector("#compare-summary")
    assert pg.locator("#compare h2").inner_text() == f"Compare time_ms (ms): head {runs['c']} / base {runs['b']}"
    api = httpx.get(f"{url}/api/v1/compare", params={"base": runs["b"], "head": runs["c"]}, timeout=30).json()
    assert f"geometric mean head/base {api['geomean']:.3f} " in pg.locator("#compare-summary").inner_text()

    pg.click("#reload")
    pg.wait_for_selector("#runs tr.run")
    assert pg.locator("#compare").inner_text() == ""
    assert pg.locator("#runs input[type=checkbox]:checked").count() == 0
