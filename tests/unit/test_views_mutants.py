"""analysis/views.py, what a reader of ``runs show``, the API's views and the dashboard sees: every field of a
small view computed by hand, the order of traces, the rows left out, the reference lines and their sources, the
axis and label formatting at their boundaries, and each refusal's exact text.

Written against the survivors of mutation testing (docs/testing.md, "analysis/views.py (session 5)")."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.analysis.gpus import match_gpu
from orchestrator.analysis.views import (
    Axis,
    HostIn,
    Point,
    RefLine,
    RowIn,
    RunIn,
    RunRef,
    Trace,
    View,
    Views,
    build_views,
    fmt_bytes,
    fmt_tick,
    headline,
    pick_x,
    short_id,
    x_axis,
)
from orchestrator.errors import UsageError
from orchestrator.suites.loader import load_registry
from orchestrator.suites.registry import Plot, get_suite

COPY_ROOF_SOURCE = "the host's latest hbm-bandwidth run (device-to-device copy)"


def _row(host: str, case: dict[str, Any], metrics: dict[str, Any], info: dict[str, Any] | None = None) -> RowIn:
    return RowIn(host=host, case=case, metrics=metrics, info=info)


def _gbps(v: float) -> dict[str, Any]:
    return {"median": v, "unit": "GB/s"}


# --- build_views: one whole result, field by field ---------------------------------------------------------------


def test_a_small_run_gives_exactly_these_views() -> None:
    rows = [
        # a metric stored as a bare number is listed but has nothing to plot; it comes first, so the views after it
        # are built only if an empty plot is skipped rather than ending the loop
        _row(
            "h",
            {"batch": 4, "dtype": "fp8"},
            {"count": 7, "gbps": {"median": 40.0, "p10": 38.0, "p90": 42.0, "unit": "GB/s"}},
        ),  # fmt: skip
        # no unit here: the unit seen first (GB/s) stays; the median is absent, so the value is the y
        _row("h", {"batch": 1, "dtype": "fp8"}, {"gbps": {"value": 12.0}, "lat": {"value": 3.0}}),
        _row("h", {"batch": 1, "dtype": "bf16"}, {"lat": {"value": 2.5}}),  # no gbps: left out of that view only
        _row(
            "h",
            {"batch": 4, "dtype": "bf16"},
            {"gbps": {"median": 30.0}, "lat": {"value": 2.0}},
            info={"throttled": True},
        ),  # fmt: skip
    ]
    run = RunIn(run_id="run-1", label="nightly", suite="mine", hosts=[HostIn(host="h", gpu_name="NVIDIA H200")],
                rows=rows)  # fmt: skip
    got = build_views([run], None)
    # x: the only numeric parameter that varies (batch 1, 4); dtype takes two values (bf16, fp8): one trace each,
    # text in alphabetical order (bf16 before fp8, although fp8 was stored first); points in x order
    linear = Axis(title="batch, sequences", log=False, tickvals=[], ticktext=[])  # 2 values: never log
    bf16 = {"dtype": "bf16"}
    fp8 = {"dtype": "fp8"}
    gbps = View(
        metric="gbps", unit="GB/s", title="achieved bandwidth vs batch", x="batch", x_axis=linear,
        y_title="gbps (GB/s)", refs=[],  # a suite without a roof for the metric: no reference lines
        traces=[
            Trace(name="h · dtype=bf16", run_id="run-1", host="h", gpu="NVIDIA H200", group=bf16, points=[
                Point(x=4.0, y=30.0, p10=None, p90=None, case={"batch": 4, "dtype": "bf16"}, flags=["throttled"])]),
            Trace(name="h · dtype=fp8", run_id="run-1", host="h", gpu="NVIDIA H200", group=fp8, points=[
                Point(x=1.0, y=12.0, p10=None, p90=None, case={"batch": 1, "dtype": "fp8"}),
                Point(x=4.0, y=40.0, p10=38.0, p90=42.0, case={"batch": 4, "dtype": "fp8"})]),
        ],
    )  # fmt: skip
    lat = View(
        metric="lat", unit=None, title="lat vs batch", x="batch", x_axis=linear, y_title="lat", refs=[],
        traces=[
            Trace(name="h · dtype=bf16", run_id="run-1", host="h", gpu="NVIDIA H200", group=bf16, points=[
                Point(x=1.0, y=2.5, p10=None, p90=None, case={"batch": 1, "dtype": "bf16"}),
                Point(x=4.0, y=2.0, p10=None, p90=None, case={"batch": 4, "dtype": "bf16"}, flags=["throttled"])]),
            Trace(name="h · dtype=fp8", run_id="run-1", host="h", gpu="NVIDIA H200", group=fp8, points=[
                Point(x=1.0, y=3.0, p10=None, p90=None, case={"batch": 1, "dtype": "fp8"})]),
        ],
    )  # fmt: skip
    assert got == Views(suite="mine", runs=[RunRef(id="run-1", label="nightly", suite="mine", hosts=["h"])],
                        views=[gbps, lat], metrics=["count", "gbps", "lat"], note=None)  # fmt: skip


def test_rows_without_a_usable_x_or_y_are_left_out() -> None:
    rows = [
        _row("h", {"M": 1}, {"gbps": _gbps(100.0)}),
        _row("h", {"M": "auto"}, {"gbps": _gbps(900.0)}),  # x not a number
        _row("h", {"M": float("inf")}, {"gbps": _gbps(800.0)}),  # x not finite
        _row("h", {"M": 4}, {"gbps": {"unit": "GB/s"}}),  # a metric with neither median nor value
        _row("h", {"M": 2}, {"gbps": _gbps(200.0)}),
    ]
    [v] = build_views([RunIn(run_id="r", label=None, suite="mine", hosts=[], rows=rows)], None).views
    [t] = v.traces
    assert [(p.x, p.y) for p in t.points] == [(1.0, 100.0), (2.0, 200.0)]


def test_an_empty_headline_plot_does_not_stop_the_next_one() -> None:
    # moe-sweep's first headline plot is gbps: stored here without a figure, so only tflops is drawn
    rows = [_row("h", {"M": m}, {"gbps": {"unit": "GB/s"}, "tflops": {"value": float(m), "unit": "TFLOP/s"}})
            for m in (1, 2)]  # fmt: skip
    v = build_views([RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[], rows=rows)], get_suite("moe-sweep"))
    assert [x.metric for x in v.views] == ["tflops"] and v.note is None


def test_no_headline_metric_stored_says_so() -> None:
    rows = [_row("h", {"M": m}, {"other": {"value": 1.0}}) for m in (1, 2)]
    run = RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[HostIn(host="h")], rows=rows)
    assert build_views([run], get_suite("moe-sweep")) == Views(
        suite="moe-sweep", runs=[RunRef(id="r", label=None, suite="moe-sweep", hosts=["h"])], views=[],
        metrics=["other"], note="none of the suite's headline metrics is stored")  # fmt: skip


def test_two_runs_are_named_by_label_or_short_id_in_the_order_given() -> None:
    def run(rid: str, label: str | None) -> RunIn:
        rows = [_row("h", {"M": m}, {"gbps": _gbps(float(m))}) for m in (1, 2)]
        return RunIn(run_id=rid, label=label, suite="s", hosts=[HostIn(host="h")], rows=rows)

    # short id: the run id without dashes, last 8 characters: "0000bbbb22223333444455556666"[-8:] = "55556666"
    late = run("0000-bbbb-2222-3333-444455556666", None)
    early = run("0000-aaaa-1111", "before")
    [v] = build_views([late, early], None).views
    assert [t.name for t in v.traces] == ["h · 55556666", "h · before"]
    assert [t.run_id for t in v.traces] == ["0000-bbbb-2222-3333-444455556666", "0000-aaaa-1111"]
    [one] = build_views([early], None).views
    assert [t.name for t in one.traces] == ["h"]  # one run: no run in the name


def test_trace_order_puts_numbers_in_numeric_order_before_text() -> None:
    # "tp" takes 16, 2 and "auto" (stored in that order): 2 before 16 (numbers, not strings), text after numbers
    rows = [_row("h", {"M": m, "tp": tp}, {"gbps": _gbps(1.0)}) for tp in (16, 2, "auto") for m in (1, 2)]
    [v] = build_views([RunIn(run_id="r", label=None, suite="s", hosts=[], rows=rows)], None).views
    assert [t.name for t in v.traces] == ["h · tp=2", "h · tp=16", "h · tp=auto"]
    assert [t.group for t in v.traces] == [{"tp": 2}, {"tp": 16}, {"tp": "auto"}]


def test_no_results_and_no_runs() -> None:
    empty = RunIn(run_id="r1", label="L", suite="mine", hosts=[HostIn(host="a"), HostIn(host="b")], rows=[])
    assert build_views([empty], None) == Views(
        suite="mine", runs=[RunRef(id="r1", label="L", suite="mine", hosts=["a", "b"])], views=[], metrics=[],
        note="no results stored yet")  # fmt: skip
    assert build_views([], get_suite("moe-sweep")) == Views(suite="moe-sweep", runs=[], views=[], metrics=[],
                                                             note="no results stored yet")  # fmt: skip
    assert build_views([], None) == Views(suite="", runs=[], views=[], metrics=[], note="no results stored yet")


def test_one_case_per_host_and_a_non_numeric_axis_are_notes_not_views() -> None:
    one = RunIn(run_id="r", label=None, suite="overheads", hosts=[HostIn(host="h")],
                rows=[_row("h", {"H": 7168}, {"sync_us": {"value": 9.0, "unit": "us"}})])  # fmt: skip
    ref = RunRef(id="r", label=None, suite="overheads", hosts=["h"])
    assert build_views([one], get_suite("overheads")) == Views(
        suite="overheads", runs=[ref], views=[], metrics=["sync_us"],
        note="one case per host: no sweep to plot (see the results table)")  # fmt: skip
    # moe-sweep's axis is M; here M is text in every result
    text = RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[HostIn(host="h")],
                 rows=[_row("h", {"M": "auto", "E": e}, {"gbps": _gbps(1.0)}) for e in (8, 16)])  # fmt: skip
    assert build_views([text], get_suite("moe-sweep")) == Views(
        suite="moe-sweep", runs=[RunRef(id="r", label=None, suite="moe-sweep", hosts=["h"])], views=[],
        metrics=["gbps"], note="the results carry no numeric 'M' to plot against")  # fmt: skip


def test_the_suites_axis_wins_over_the_first_varying_parameter() -> None:
    # E varies and comes first in the case, but moe-sweep's sweep axis is M
    rows = [_row("h", {"E": e, "M": m}, {"gbps": _gbps(float(m))}) for e in (8, 16) for m in (1, 2)]
    [v] = build_views([RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[], rows=rows)],
                      get_suite("moe-sweep")).views  # fmt: skip
    assert v.x == "M" and [t.name for t in v.traces] == ["h · E=8", "h · E=16"]


def test_a_chosen_metric_is_the_only_view() -> None:
    rows = [_row("h", {"M": m}, {"gbps": _gbps(1.0), "distinct_experts": {"value": 9, "unit": "experts"}})
            for m in (1, 2)]  # fmt: skip
    run = RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[], rows=rows)
    # a suite that does not know the metric: plotted without roof lines
    [v] = build_views([run], get_suite("moe-sweep"), metric="distinct_experts").views
    assert (v.metric, v.unit, v.refs, v.y_title) == ("distinct_experts", "experts", [], "distinct_experts (experts)")
    # no suite definition: the chosen metric alone, not the headline of every stored metric
    only = build_views([run], None, metric="distinct_experts").views
    assert [x.metric for x in only] == ["distinct_experts"]


# --- refusals: exact message and hint ----------------------------------------------------------------------------


def test_refusals_name_what_is_there() -> None:
    def run(suite: str, rows: list[RowIn]) -> RunIn:
        return RunIn(run_id="r", label=None, suite=suite, hosts=[], rows=rows)

    with pytest.raises(UsageError) as e:
        build_views([run("b-suite", []), run("a-suite", [])], None)
    assert (str(e.value), e.value.hint) == ("runs of different suites (a-suite, b-suite) cannot share a plot",
                                            "plot runs of one suite together")  # fmt: skip
    two = run("s", [_row("h", {"M": 1, "E": 8}, {"gbps": _gbps(1.0), "tflops": {"value": 1.0}})])
    with pytest.raises(UsageError) as e:
        build_views([two], None, metric="nope")
    assert (str(e.value), e.value.hint) == ("no result of the run(s) has metric 'nope'", "metrics stored: gbps, tflops")
    with pytest.raises(UsageError) as e:
        build_views([run("s", [])], None, metric="nope")
    assert e.value.hint == "metrics stored: none"
    with pytest.raises(UsageError) as e:
        build_views([two], None, x="Q")
    assert (str(e.value), e.value.hint) == ("'Q' is not a case parameter of the run(s)", "case parameters: E, M")
    with pytest.raises(UsageError) as e:
        build_views([run("s", [])], None, x="Q")
    assert e.value.hint == "case parameters: none"
    words = run("s", [_row("h", {"dtype": d, "mode": "x"}, {"gbps": _gbps(1.0)}) for d in ("bf16", "fp8")])
    with pytest.raises(UsageError) as e:
        build_views([words], None, x="dtype")
    assert (str(e.value), e.value.hint) == (
        "case parameter 'dtype' is not a number in any result: it cannot be an x axis",
        "numeric case parameters: none")  # fmt: skip


# --- reference lines ---------------------------------------------------------------------------------------------


def test_memory_roofs_one_datasheet_line_per_gpu_model_and_each_positive_measured_roof() -> None:
    h200, b200 = match_gpu("NVIDIA H200"), match_gpu("NVIDIA B200")
    assert h200 is not None and b200 is not None
    hosts = [
        HostIn(host="idle", gpu_name="NVIDIA H200", roof_gbps=5000.0),  # no results: none of its lines
        HostIn(host="a", gpu_name="NVIDIA H200", roof_gbps=None),  # no measured roof
        HostIn(host="b", gpu_name="NVIDIA B200", roof_gbps=0.0),  # not positive: not drawn
        HostIn(host="c", gpu_name=None, roof_gbps=1.0),  # GPU unknown; 1 GB/s is still a roof
        HostIn(host="d", gpu_name="NVIDIA H200", roof_gbps=4300.0),  # a second H200: no second datasheet line
    ]
    rows = [_row(h, {"M": m}, {"gbps": _gbps(100.0)}) for h in ("a", "b", "c", "d") for m in (1, 2)]
    [v] = build_views([RunIn(run_id="r", label=None, suite="moe-sweep", hosts=hosts, rows=rows)],
                      get_suite("moe-sweep"), metric="gbps").views  # fmt: skip
    # datasheets: H200 4.8 TB/s, B200 8 TB/s (HBM3e), as GB/s = 1e9 B/s
    assert v.refs == [
        RefLine(label="H200 SXM datasheet 4,800 GB/s", y=4800.0, kind="datasheet", source=h200.source),
        RefLine(label="B200 datasheet 8,000 GB/s", y=8000.0, kind="datasheet", source=b200.source),
        RefLine(label="c measured copy roof 1 GB/s", y=1.0, kind="measured", source=COPY_ROOF_SOURCE),
        RefLine(label="d measured copy roof 4,300 GB/s", y=4300.0, kind="measured", source=COPY_ROOF_SOURCE),
    ]
    assert h200.source.startswith("NVIDIA H200 Tensor Core GPU datasheet")
    assert b200.source.startswith("NVIDIA HGX B200 datasheet")


def test_compute_peak_line_cites_the_peaks_source() -> None:
    h200 = match_gpu("NVIDIA H200")
    assert h200 is not None and h200.peaks_source and h200.peaks_source != h200.source
    rows = [_row("h", {"M": m, "dtype": "bf16"}, {"tflops": {"value": 1.0, "unit": "TFLOP/s"}}) for m in (1, 2)]
    run = RunIn(run_id="r", label=None, suite="moe-sweep", hosts=[HostIn(host="h", gpu_name="NVIDIA H200")],
                rows=rows)  # fmt: skip
    [v] = build_views([run], get_suite("moe-sweep"), metric="tflops").views
    # H200 dense BF16: 989 TFLOP/s (1,979 with sparsity, NVIDIA H200 datasheet)
    assert v.refs == [RefLine(label="H200 SXM bf16 dense peak 989 TFLOP/s", y=989.0, kind="dense-peak",
                              source=h200.peaks_source)]  # fmt: skip


# --- telemetry flags on points -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "flags"),
    [
        ({"throttled": True}, ["throttled"]),
        ({"throttled": True, "throttle_reason": ""}, ["throttled"]),
        ({"shared_gpu": True}, ["shared GPU"]),
        ({"shared_gpu": True, "throttle_reason": "pid 4242 on GPU 0"}, ["shared GPU: pid 4242 on GPU 0"]),
        (
            {"throttled": True, "shared_gpu": True, "throttle_reason": "hw slowdown"},
            ["throttled: hw slowdown", "shared GPU: hw slowdown"],
        ),  # fmt: skip
        ({"throttled": False, "shared_gpu": False, "throttle_reason": "x"}, []),
        ({"throttled": "yes", "shared_gpu": 1}, []),  # only a JSON true flags a point
        (None, []),
    ],
)
def test_point_flags_from_the_cases_telemetry(info: dict[str, Any] | None, flags: list[str]) -> None:
    rows = [_row("h", {"M": 1}, {"gbps": _gbps(1.0)}, info), _row("h", {"M": 2}, {"gbps": _gbps(2.0)})]
    [v] = build_views([RunIn(run_id="r", label=None, suite="s", hosts=[], rows=rows)], None).views
    assert [p.flags for p in v.traces[0].points] == [flags, []]


# --- headline metrics and the x parameter -------------------------------------------------------------------------


def test_headline_by_kind_of_suite() -> None:
    # a built-in suite declaring no plots and no command (overheads): every present metric but the parameters
    assert headline(get_suite("overheads"), ["sync_us", "H"], {"H"}) == [Plot("sync_us")]
    # a YAML suite with no plot list: its declared metrics only, in the suite's order, not an undeclared one
    nccl = load_registry().get("nccl-allreduce")
    assert nccl.plots == () and nccl.command is not None
    got = headline(nccl, ["extra_ms", "busbw_gbps", "time_us"], {"size_bytes"})
    assert got == [Plot("time_us"), Plot("busbw_gbps")]
    # declared plots: those present, in the suite's order, keeping their roofs
    assert headline(get_suite("moe-sweep"), ["time_ms", "gbps"], set()) == [Plot("gbps", "memory"), Plot("time_ms")]


def test_pick_x() -> None:
    def rows(*cases: dict[str, Any]) -> list[RowIn]:
        return [_row("h", c, {}) for c in cases]

    varied = rows({"E": 8, "M": 1, "size_bytes": 8}, {"E": 16, "M": 2, "size_bytes": 16})
    assert pick_x(get_suite("moe-sweep"), varied) == "M"  # the sweep axis (no plot_x)
    assert pick_x(get_suite("hbm-bandwidth"), varied) == "size_bytes"  # plot_x (no sweep)
    assert pick_x(None, varied) == "E"  # the first numeric parameter that varies
    # seed varies per case but is never an axis, even first in the case; 2 distinct values are enough
    assert pick_x(None, rows({"seed": 1, "dtype": "bf16", "M": 1}, {"seed": 2, "dtype": "fp8", "M": 2})) == "M"
    assert pick_x(None, rows({"seed": 1, "M": 1}, {"seed": 2, "M": 1})) is None


# --- axes and labels ---------------------------------------------------------------------------------------------


def test_log_axis_boundaries() -> None:
    # log needs 3+ distinct values, all positive, max/min >= 16
    assert x_axis("M", [1.0, 2.0, 16.0]).log  # 3 values, 16/1 = 16 exactly
    assert x_axis("M", [0.5, 1.0, 8.0]).log  # 8/0.5 = 16 (a product would be 4)
    assert not x_axis("M", [1.0, 16.0]).log  # 2 values
    assert not x_axis("M", [1.0, 2.0, 15.0]).log  # 15 < 16
    assert not x_axis("M", [0.0, 1.0, 4.0, 16.0]).log  # 0 on a log axis: linear
    assert x_axis("batch", [1.0, 2.0, 4.0]) == Axis(title="batch, sequences", log=False, tickvals=[], ticktext=[])
    assert x_axis("mystery", [1.0, 2.0]).title == "mystery"


def test_log_axis_ticks() -> None:
    # 7 values (1..64): at most 10 ticks, so every swept value is a tick
    seven = [float(2**i) for i in range(7)]
    assert x_axis("M", seven) == Axis(title="M, tokens per call (log2)", log=True, tickvals=seven,
                                      ticktext=["1", "2", "4", "8", "16", "32", "64"])  # fmt: skip
    # 13 values (1..4096): step ceil(13/10) = 2, indices 0, 2, ..., 12 — the last value is among them, not repeated
    m = x_axis("M", [float(2**i) for i in range(13)])
    assert m.tickvals == [float(4**i) for i in range(7)]
    assert m.ticktext == ["1", "4", "16", "64", "256", "1024", "4096"]
    # 31 sizes 8 B .. 8 GiB: step ceil(31/10) = 4, indices 0, 4, ..., 28 (8 * 2**28 = 2 GiB), then the last, 8 GiB
    sizes = [8.0 * 2**i for i in range(31)]
    ax = x_axis("size_bytes", sizes)
    assert ax.tickvals == [8.0 * 16**i for i in range(8)] + [8.0 * 2**30]
    assert ax.ticktext == ["8 B", "128 B", "2 KiB", "32 KiB", "512 KiB", "8 MiB", "128 MiB", "2 GiB", "8 GiB"]


def test_fmt_bytes_units_and_boundaries() -> None:
    assert fmt_bytes(1023) == "1.02e+03 B"  # below 1024: still bytes (3 significant digits)
    assert fmt_bytes(1024) == "1 KiB"
    assert fmt_bytes(2**40) == "1 TiB"
    assert fmt_bytes(3 * 2**50) == "3 PiB"
    assert fmt_bytes(2**60) == "1.02e+03 PiB"  # past the last unit: stays PiB (1024 PiB)
    assert fmt_bytes(2**50) == "1 PiB"


def test_fmt_tick_and_short_id() -> None:
    assert fmt_tick(3.0, is_bytes=False) == "3"
    assert fmt_tick(1.5, is_bytes=False) == "1.5"
    assert fmt_tick(0.125, is_bytes=False) == "0.125"
    assert fmt_tick(2048.0, is_bytes=True) == "2 KiB"
    assert short_id("12345678-90ab-cdef-1234-56789abcdef0") == "9abcdef0"
