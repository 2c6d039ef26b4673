"""The dashboard in a real browser (Debian's chromium driven by Playwright, tests/plugins/browser.py) against the
real API on a uvicorn server: every page loads with no console error and reloads to the same view from its URL;
a run page has one trace per host with the stored number of points and the roofline lines; the compare page's
geometric mean is the API's and throttled cases are marked; a 1,000-case run renders in under 2 s by the
browser's own clock; the read token is asked for once per tab. Screenshots of each page go to the artifacts dir.

SQLite only here (the pages read the API, whose PostgreSQL answers test_api_views.py checks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry
from tests.integration.conftest import WRITE_TOKEN
from tests.plugins.browser import needs_chromium
from tests.plugins.timing import scaled

pytestmark = needs_chromium
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
READ_TOKEN = "r" * 8 + "-0123456789abcdef"
RENDER_BUDGET_MS = 2000.0


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'orch.db'}"


def short(rid: str) -> str:
    return rid.replace("-", "")[-8:]


def moe_run(store: Store, label: str, hosts: dict[str, str], ms: dict[int, float], *,
            throttled: frozenset[int] = frozenset()) -> str:  # fmt: skip
    """A finished moe-sweep run (kimi-k2 shapes) on ``hosts`` (name -> GPU name): per M, time_ms ±1 %, with gbps
    and tflops as the runner's enrichment would add them; the cases in ``throttled`` carry the telemetry flag."""
    rid = store.create_run(suite="moe-sweep", params={}, preset="kimi-k2", label=label, hosts=list(hosts),
                           started_by="t@box", started_on="box")  # fmt: skip
    for host, gpu in hosts.items():
        store.upsert_host(host, address=None, group="g", labels={})
        store.start_host_run(rid, host, facts={"gpu_name": gpu, "gpus": [{"name": gpu}]}, agent_version="v",
                             build_sha=None)  # fmt: skip
        events = []
        for i, (m, t) in enumerate(sorted(ms.items())):
            gbps = 792.7e6 * min(m, 40) / (t * 1e-3) / 1e9
            metrics = {
                "time_ms": {"value": t, "median": t, "p10": t * 0.99, "p90": t * 1.01, "unit": "ms"},
                "gbps": {"value": gbps, "median": gbps, "p10": gbps / 1.01, "p90": gbps / 0.99, "unit": "GB/s"},
                "tflops": {"value": m * 7.9e-4 / t, "unit": "TFLOP/s"},
                "us_per_token": {"value": t * 1000 / m, "unit": "µs"},
                "distinct_experts": {"value": 9, "unit": "experts"},
            }
            info = {"throttled": True, "shared_gpu": False, "throttle_reason": "power cap in 4/40 samples"} \
                if m in throttled else {}  # fmt: skip
            case = {"M": m, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16"}
            events.append(Event(seq=i, type="result", data={"case": case, "metrics": metrics, "info": info}))
        store.ingest(rid, host, events)
        store.finish_host_run(rid, host, "completed")
    store.finish_run(rid, "completed")
    return rid


@pytest.fixture
def seeded(store: Store) -> dict[str, str]:
    runs: dict[str, str] = {}
    for kind in ("hbm", "moe"):  # the real H200 run (docs/results/h200.md), as `orch runs import` stores it
        runs[f"h200-{kind}"] = import_spool(store, FIX / kind / "events.jsonl", host="h200-0",
                                            registry=builtin_registry()).run_id  # fmt: skip
    sweep = {2**i: 0.3 + 0.8 * i for i in range(8)}
    two = {"ct200-0": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "b300-0": "NVIDIA B300 SXM6 AC"}
    runs["base"] = moe_run(store, "base", two, sweep)
    runs["head"] = moe_run(store, "head", two, {m: t * (1.2 if m == 1 else 0.97) for m, t in sweep.items()},
                           throttled=frozenset({4}))  # fmt: skip
    store.set_run_info(runs["head"], {"fleet": {"differences": [  # as the runner stores the fleet view at start
        {"group": "g", "field": "driver", "host": "ct200-0", "value": "570.124", "majority": "580.95"}]}})  # fmt: skip
    return runs


@pytest.fixture
def url(store: Store, seeded: dict[str, str], serve: Callable[[Settings, Store], str]) -> str:
    return serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)


def ready(page: Any) -> None:
    """Wait until the page's router finished drawing the URL's view (dash.js sets body[data-ready])."""
    page.wait_for_function("document.body.dataset.ready !== undefined && !document.querySelector('#view > p.muted')")


def plot_data(page: Any) -> list[dict[str, Any]]:
    """Per plot on the page: its metric, the data traces (name, number of points) and the reference lines' names."""
    return list(page.evaluate("""() => [...document.querySelectorAll('.plot')].map((d) => ({
        metric: d.dataset.metric,
        traces: d.data.filter((t) => t.meta === 'data').map((t) => [t.name, t.x.length]),
        refs: d.data.filter((t) => t.meta === 'ref').map((t) => t.name),
        flags: d.data.filter((t) => t.meta === 'flag').map((t) => [t.name, t.x.length]),
        all: d.data.length,
        drawn: d.querySelectorAll('g.scatterlayer g.trace').length }))"""))


def test_every_page_loads_clean_and_reloads_from_its_url(
    url: str, seeded: dict[str, str], open_page: Callable[[str], Any], artifacts_dir: Path
) -> None:
    pages = {
        "runs": "/?suite=moe-sweep",
        "run": f"/runs/{short(seeded['h200-moe'])}",
        "overlay": f"/runs/{short(seeded['base'])}?with={short(seeded['head'])}",
        "compare": f"/compare?base={short(seeded['base'])}&head={short(seeded['head'])}",
        "host": "/hosts/b300-0",
        "series": "/series?suite=moe-sweep&metric=gbps&x=M&group_by=run",
    }
    for name, path in pages.items():
        page = open_page(url + path)
        ready(page)
        assert page.locator("#error").count() == 0, page.locator("#error").inner_text()
        first = page.locator("#view").inner_text()
        page.screenshot(path=str(artifacts_dir / f"dashboard-{name}.png"), full_page=True)
        page.reload()
        ready(page)
        assert page.locator("#view").inner_text() == first, name  # a deep link draws the same view again
        assert page.errors == [], (name, page.errors)
    # the runs filter lives in the URL: moe-sweep only (3 of the 4 runs)
    page = open_page(url + pages["runs"])
    ready(page)
    assert page.locator("#runs tr.run").count() == 3
    assert page.locator("#filters input[name=suite]").input_value() == "moe-sweep"
    # usable at 1280 px: nothing scrolls sideways and the last column (results) is on screen
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    box = page.locator("table.runs th").last.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 1280
    page.fill("#filters input[name=label]", "head")
    page.click("#filters button[type=submit]")
    page.wait_for_url("**label=head**")
    ready(page)
    assert page.locator("#runs tr.run").count() == 1 and "suite=moe-sweep" in page.url
    page = open_page(url + "/?until=2000-01-01")  # dates in the URL: nothing started before 2000
    ready(page)
    assert page.locator("#runs").inner_text() == "no runs match"
    assert page.locator("#filters input[name=until]").input_value() == "2000-01-01"


def test_links_history_back_and_forward(url: str, seeded: dict[str, str], open_page: Callable[[str], Any]) -> None:
    page = open_page(url + "/")
    ready(page)
    page.locator(f"#runs a[href='/runs/{short(seeded['base'])}']").click()
    page.wait_for_url(f"**/runs/{short(seeded['base'])}")
    ready(page)
    assert page.locator("#title").inner_text() == "moe-sweep — base"
    page.locator("#meta a[href='/hosts/ct200-0']").click()
    page.wait_for_url("**/hosts/ct200-0")
    ready(page)
    assert page.locator("#title").inner_text() == "host ct200-0"
    page.go_back()
    page.wait_for_url(f"**/runs/{short(seeded['base'])}")
    ready(page)
    assert page.locator("#title").inner_text() == "moe-sweep — base"
    page.go_back()
    page.wait_for_url(url + "/")
    ready(page)
    assert page.locator("#runs tr.run").count() == 4
    page.go_forward()
    ready(page)
    assert page.locator("#title").inner_text() == "moe-sweep — base"
    assert page.errors == []


def test_run_page_one_trace_per_host_with_every_stored_case_and_the_roofs(
    url: str, seeded: dict[str, str], store: Store, open_page: Callable[[str], Any]
) -> None:
    page = open_page(url + f"/runs/{seeded['base'][:13]}")  # a prefix (with its dash) resolves too
    ready(page)
    plots = plot_data(page)
    assert [p["metric"] for p in plots] == ["gbps", "tflops", "us_per_token", "time_ms"]  # never distinct_experts
    stored = store.results(seeded["base"], limit=1000).items
    per_host = {h: sum(r.host == h for r in stored) for h in ("b300-0", "ct200-0")}
    for p in plots:
        # one trace per host, one point per stored case
        assert sorted(p["traces"]) == sorted([h, n] for h, n in per_host.items())
        assert p["drawn"] == p["all"]  # Plotly drew every trace (SVG, no WebGL needed)
    assert plots[0]["refs"] == ["B300 (Blackwell Ultra) datasheet 8,000 GB/s",
                                "RTX PRO 6000 Blackwell Server Edition datasheet 1,597 GB/s"]  # an overlay of SKUs
    assert plots[1]["refs"] == ["B300 (Blackwell Ultra) bf16 dense peak 2,250 TFLOP/s",
                                "RTX PRO 6000 Blackwell Server Edition bf16 dense peak 504 TFLOP/s"]
    h200 = open_page(url + f"/runs/{short(seeded['h200-moe'])}")
    ready(h200)
    [gbps, tflops, *_] = plot_data(h200)
    assert gbps["traces"] == [["h200-0", 13]]
    assert gbps["refs"] == ["H200 SXM datasheet 4,800 GB/s", "h200-0 measured copy roof 4,274 GB/s"]
    assert tflops["refs"] == ["H200 SXM bf16 dense peak 989 TFLOP/s"]
    hover = h200.evaluate("document.querySelector('.plot[data-metric=gbps]').data"
                          ".find((t) => t.meta === 'data').text[0]")
    # median and p10/p90 of the stored gbps, then the case's other parameters
    assert hover == ("<b>h200-0</b><br>M=1: 2,265 GB/s<br>p10 2,256 · p90 2,272<br>"
                     "E=384 H=7168 I=2048 dtype=bf16 impl=auto k=8 shared=1")
    ticks = h200.evaluate("[...document.querySelectorAll('.plot[data-metric=gbps] .xtick text')]"
                          ".map((t) => t.textContent)")
    assert ticks == ["1", "4", "16", "64", "256", "1024", "4096"]  # round labels on the log2 axis, none clipped
    overlay = open_page(url + f"/runs/{short(seeded['base'])}?with={short(seeded['head'])}")
    ready(overlay)
    gbps = plot_data(overlay)[0]
    assert sorted(gbps["traces"]) == [["b300-0 · base", 8], ["b300-0 · head", 8], ["ct200-0 · base", 8],
                                      ["ct200-0 · head", 8]]  # fmt: skip
    assert sorted(gbps["flags"]) == [["b300-0 · head: throttled / shared GPU", 1],
                                     ["ct200-0 · head: throttled / shared GPU", 1]]  # M=4 of head, marked ✕
    assert overlay.locator(".notice.flagged").count() == 0  # the flags box is the page's own run's (base)
    assert h200.errors == [] and page.errors == [] and overlay.errors == []


def test_compare_page_is_the_apis_comparison_with_flags(
    url: str, seeded: dict[str, str], open_page: Callable[[str], Any]
) -> None:
    api = httpx.get(f"{url}/api/v1/compare", params={"base": seeded["base"], "head": seeded["head"]}, timeout=30).json()
    page = open_page(url + f"/compare?base={short(seeded['base'])}&head={short(seeded['head'])}")
    ready(page)
    assert page.locator("#compare-title").inner_text() == \
        f"Compare time_ms (ms): head {seeded['head']} / base {seeded['base']}"  # fmt: skip
    summary = page.locator("#compare-summary").inner_text()
    assert summary.startswith(f"geometric mean head/base {api['geomean']:.3f} over {len(api['cases'])} cases")
    assert summary.endswith("; 2 ran throttled or on a shared GPU")  # M=4 on both hosts of head
    rows = page.locator("#compare-cases tbody tr")
    assert rows.count() == len(api["cases"]) == 16
    shown = [rows.nth(i).locator("td").nth(5).inner_text() for i in range(rows.count())]
    assert shown == [c["verdict"] for c in api["cases"]]
    for i, c in enumerate(api["cases"]):
        assert rows.nth(i).locator("td").nth(4).inner_text() == f"{c['ratio']:.3f}"
        marks = rows.nth(i).locator("td").nth(7).inner_text()
        assert ("head: throttled (power cap in 4/40 samples)" in marks) == (c["case"]["M"] == 4), c
    regressions = [i for i, c in enumerate(api["cases"]) if c["verdict"] == "regression"]
    assert regressions and all(rows.nth(i).locator("td").nth(5).get_attribute("class") == "worse" for i in regressions)
    assert page.locator(".notice.flagged").inner_text().startswith("head: 2 case(s) ran throttled or on a shared GPU")
    fleet = page.locator(".notice.fleet").inner_text()
    assert fleet == "head: fleet at start: 1 difference(s) between hosts\ng: ct200-0 has driver 570.124 (others 580.95)"

    # another metric: the URL changes and the API recomputes; swapping base and head inverts the ratios
    page.select_option("#compare-form select[name=metric]", "gbps")
    page.click("#compare-form button[type=submit]")
    page.wait_for_url("**metric=gbps")
    ready(page)
    gbps = httpx.get(f"{url}/api/v1/compare", timeout=30,
                     params={"base": seeded["base"], "head": seeded["head"], "metric": "gbps"}).json()  # fmt: skip
    assert page.locator("#compare-title").inner_text().startswith("Compare gbps (GB/s): ")
    assert page.locator("#compare-summary").inner_text().startswith(f"geometric mean head/base {gbps['geomean']:.3f} ")
    page.click("#swap")
    ready(page)
    assert page.locator("#compare-title").inner_text() == \
        f"Compare gbps (GB/s): head {seeded['base']} / base {seeded['head']}"  # fmt: skip
    page.go_back()
    ready(page)
    assert page.locator("#compare-title").inner_text().endswith(f"head {seeded['head']} / base {seeded['base']}")
    assert page.errors == []


def test_a_thousand_case_run_renders_within_two_seconds(
    store: Store, serve: Callable[[Settings, Store], str], open_page: Callable[[str], Any], artifacts_dir: Path
) -> None:
    rid = moe_run(store, "big", {"h200-0": "NVIDIA H200"}, {m: 0.3 + m / 100 for m in range(1, 1001)})
    url = serve(Settings(), store)
    page = open_page(url + f"/runs/{short(rid)}")
    ready(page)
    plots = plot_data(page)
    assert [p["traces"] for p in plots] == [[["h200-0", 1000]]] * 4
    # The browser's own clock (performance.now()) from the route's start — URL parsed, the API's answers fetched
    # and parsed — to the last of the four Plotly plots drawn (1,000 points each, SVG). Not a wall-clock timer
    # around Playwright. The server and chromium share this machine with other test runs (load 10-30 on 2 cores
    # is seen), which stretches any wall time: the figure checked is the best of up to ten reloads, stopping at the
    # first within budget (the reload least stretched by other processes; each reload is a cold page), against
    # the 2 s, times ORCH_TEST_TIME_SCALE for slower machines. Measured: ~0.5 s at load 8; at load 28 on
    # 2 cores five reloads gave 1.3-7.8 s.
    timings: list[float] = []
    for _ in range(10):
        page.reload()
        ready(page)
        [t] = page.evaluate("window.orchTimings")  # one route drawn per page load
        timings.append(t["ms"])
        print(f"1,000-case run page: API answers in {t['fetched_ms']:.0f} ms, drawn at {t['ms']:.0f} ms")
        if t["ms"] < scaled(RENDER_BUDGET_MS):
            break
    print(f"1,000-case run page: {', '.join(f'{t:.0f}' for t in timings)} ms in the browser")
    page.screenshot(path=str(artifacts_dir / "dashboard-1000-cases.png"), full_page=True)
    assert min(timings) < scaled(RENDER_BUDGET_MS), timings
    assert page.errors == []


def test_read_token_is_asked_once_per_tab(store: Store, seeded: dict[str, str], serve: Callable[[Settings, Store], str],
                                          open_page: Callable[[str], Any]) -> None:  # fmt: skip
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN), api_read_token=SecretStr(READ_TOKEN)), store)
    page = open_page(url + f"/runs/{short(seeded['base'])}")
    ready(page)
    assert page.locator("#token-box h2").inner_text() == "Read token needed"
    assert page.locator("#token-msg").inner_text().startswith("this server needs a read token: ")
    page.fill("#token", "wrong-token-0123456789")
    page.click("#token-use")
    ready(page)
    assert page.locator("#token-msg").inner_text().startswith("the read token was refused: ")
    page.fill("#token", READ_TOKEN)
    page.click("#token-use")
    ready(page)
    assert page.locator("#title").inner_text() == "moe-sweep — base"
    page.reload()  # kept for the tab
    ready(page)
    assert page.locator("#title").inner_text() == "moe-sweep — base"
    assert page.evaluate("localStorage.length") == 0  # never stored beyond the tab
    other = open_page(url + "/")  # a new tab (browser context) asks again
    ready(other)
    assert other.locator("#token-box").count() == 1


def test_untrusted_labels_and_names_stay_text(
    store: Store, seeded: dict[str, str], serve: Callable[[Settings, Store], str], open_page: Callable[[str], Any]
) -> None:
    """A label (free text) in the runs table, a page title and a Plotly legend: shown as written, never markup."""
    evil = '<img src=x onerror="window.pwned=1">'
    store.set_label(seeded["head"], evil)
    url = serve(Settings(), store)
    runs = open_page(url + "/?suite=moe-sweep")
    ready(runs)
    assert evil in runs.locator("#runs td.label").all_inner_texts()
    page = open_page(url + f"/runs/{short(seeded['head'])}?with={short(seeded['base'])}")
    ready(page)
    assert page.locator("#title").inner_text() == f"moe-sweep — {evil}"
    legend = page.evaluate("[...document.querySelectorAll('.plot[data-metric=gbps] .legendtext')]"
                           ".map((t) => t.textContent)")
    assert f"b300-0 · {evil}" in legend
    assert page.evaluate("window.pwned") is None and runs.evaluate("window.pwned") is None
    assert page.errors == [] and runs.errors == []


def test_compare_page_shows_the_statistics_of_two_recorded_h200_sweeps(
    store: Store, seeded: dict[str, str], url: str, open_page: Callable[[str], Any]
) -> None:
    """The 2026-11-29 bf16 sweep against the 2026-11-30 one (both recorded on the H200, raw samples stored): the
    page shows the API's verdicts, ratios and per-case statistics (q, bootstrap interval, samples)."""
    quant = FIX.parent / "h200-quant" / "moe-bf16" / "events.jsonl"
    head = import_spool(store, quant, host="h200-0", registry=builtin_registry()).run_id
    api = httpx.get(f"{url}/api/v1/compare", params={"base": seeded["h200-moe"], "head": head}, timeout=30).json()
    page = open_page(url + f"/compare?base={short(seeded['h200-moe'])}&head={short(head)}")
    ready(page)
    assert page.locator("#compare-summary").inner_text().startswith(
        f"geometric mean head/base {api['geomean']:.3f} over 13 cases")
    assert page.locator("#noise-floor").inner_text() == f"noise bands: {api['noise_floor']}"
    rows = page.locator("#compare-cases tbody tr")
    assert rows.count() == 13
    for i, c in enumerate(api["cases"]):
        cells = rows.nth(i).locator("td").all_inner_texts()
        assert cells[1] == f"M={c['case']['M']}" and cells[4] == f"{c['ratio']:.3f}" and cells[5] == c["verdict"]
        s = c["stats"]
        assert cells[6].startswith("q ") and cells[6].endswith(f" · n {s['n_base']}/{s['n_head']}"), cells
    assert page.errors == []


def test_an_integer_case_parameter_past_2_53_is_shown_with_its_digits(
    store: Store, serve: Callable[[Settings, Store], str], open_page: Callable[[str], Any]
) -> None:
    """A tester's case parameter n=9007199254740993 (2**53 + 1; suite parameters are int64): the API sends it
    exactly, and the browser's JSON.parse made it ...992 on the run page."""
    rid = store.create_run(suite="serve", params={}, preset=None, label="big", hosts=["h1"], started_by="t@box",
                           started_on="box")  # fmt: skip
    store.upsert_host("h1", address=None, group="g", labels={})
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    events = [Event(seq=i, type="result", data={"case": {"C": c, "n": 2**53 + 1},
                                                "metrics": {"wall_ms": {"value": 2.0 + c, "unit": "ms"}}})
              for i, c in enumerate((1, 2))]  # fmt: skip
    store.ingest(rid, "h1", events)
    store.finish_host_run(rid, "h1", "completed")
    store.finish_run(rid, "completed")
    page = open_page(serve(Settings(), store) + f"/runs/{short(rid)}")
    ready(page)
    cells = page.evaluate("[...document.querySelectorAll('details.results td:nth-child(2)')].map((t) => t.textContent)")
    assert cells and all("n=9007199254740993" in c for c in cells), cells
    assert page.errors == []
