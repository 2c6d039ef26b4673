"""The runs table's compare flow in a real browser (Debian's chromium driven by Playwright) against the real API,
on SQLite and PostgreSQL: ticking exactly two runs (base first) enables Compare, which opens
/compare?base=&head= with the API's /compare — the function `orch runs compare` prints — base and head named;
a third tick or a reload keeps nothing of an old pair; only a clear regression or improvement is coloured
(issue 11 item 7)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN
from tests.plugins.browser import needs_chromium

pytestmark = needs_chromium


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
def page(store: Store, serve: Callable[[Settings, Store], str],
         open_page: Callable[[str], Any]) -> Iterator[tuple[Any, str, dict[str, str]]]:  # fmt: skip
    runs = {
        "a": _run(store, "label-a", {1: (1.0, 0.99, 1.01), 8: (2.0, 1.98, 2.02)}),
        # b: M=1 20% slower (a clear regression), M=8 2% faster but noisy (within noise)
        "b": _run(store, "label-b", {1: (1.2, 1.19, 1.21), 8: (1.96, 1.5, 2.5)}),
        "c": _run(store, "label-c", {1: (0.5, 0.49, 0.51), 8: (1.0, 0.99, 1.01)}),
    }
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)
    pg = open_page(url + "/")
    pg.wait_for_selector("#runs tr.run")
    yield pg, url, runs


def _tick(pg: Any, label: str) -> None:
    label_cell = pg.locator("td.label", has_text=re.compile(f"^label-{label}$"))
    pg.locator("#runs tr.run").filter(has=label_cell).locator("input[type=checkbox]").click()


def test_compare_opens_the_apis_comparison_of_the_two_ticked_runs(page: tuple[Any, str, dict[str, str]]) -> None:
    pg, url, runs = page
    api = httpx.get(f"{url}/api/v1/compare", params={"base": runs["a"], "head": runs["b"]}, timeout=30).json()
    _tick(pg, "a")
    assert pg.locator("#ticked").inner_text() == "1 run(s) ticked: tick exactly two to compare"
    assert pg.locator("#compare-ticked").is_disabled()
    _tick(pg, "b")
    pg.click("#compare-ticked")
    pg.wait_for_selector("#compare-summary")
    short = {k: v.replace("-", "")[-8:] for k, v in runs.items()}
    assert pg.url == f"{url}/compare?base={short['a']}&head={short['b']}"
    assert pg.locator("#compare-title").inner_text() == f"Compare time_ms (ms): head {runs['b']} / base {runs['a']}"
    names = pg.locator("#compare-names").inner_text()
    assert names.startswith(f"base label-a ({short['a']}) · head label-b ({short['b']})")
    summary = pg.locator("#compare-summary").inner_text()
    verdicts = "1 regression, 1 within noise"  # the table's verdicts, as the CLI and the API's `verdicts` count them
    assert api["verdicts"]["regression"] == api["verdicts"]["within noise"] == 1
    assert summary.startswith(f"geometric mean head/base {api['geomean']:.3f} over 2 cases: {verdicts}")
    rows = pg.locator("#compare-cases tbody tr")
    assert [rows.nth(i).locator("td").nth(5).inner_text() for i in range(2)] == ["regression", "within noise"]
    assert rows.nth(0).locator("td").nth(5).get_attribute("class") == "worse"
    assert rows.nth(1).locator("td").nth(5).get_attribute("class") == ""  # not coloured: the CLI says noise
    assert "noisy head: p10–p90 spread over 20% of the median" in rows.nth(1).locator("td").nth(7).inner_text()

    pg.go_back()  # the runs table again, nothing ticked
    pg.wait_for_selector("#runs tr.run")
    assert pg.locator("#runs input[type=checkbox]:checked").count() == 0
    _tick(pg, "b")
    _tick(pg, "c")
    _tick(pg, "a")  # a third run: no pair, no comparison
    assert pg.locator("#ticked").inner_text() == "3 run(s) ticked: tick exactly two to compare"
    assert pg.locator("#compare-ticked").is_disabled()
    _tick(pg, "a")  # b then c are ticked: b is the base
    assert pg.locator("#ticked").inner_text() == f"base {short['b']}, head {short['c']}"
    pg.click("#compare-ticked")
    pg.wait_for_selector("#compare-summary")
    assert pg.locator("#compare-title").inner_text() == f"Compare time_ms (ms): head {runs['c']} / base {runs['b']}"
    api = httpx.get(f"{url}/api/v1/compare", params={"base": runs["b"], "head": runs["c"]}, timeout=30).json()
    assert f"geometric mean head/base {api['geomean']:.3f} " in pg.locator("#compare-summary").inner_text()
    assert pg.errors == []
