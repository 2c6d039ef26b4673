"""analysis/views.py: headline metrics per suite (parameters never plotted), traces, log axes, roofline lines."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.analysis.views import HostIn, RowIn, RunIn, build_views, fmt_bytes, x_axis
from orchestrator.errors import SuiteError, UsageError
from orchestrator.suites.loader import load_registry, parse_suite
from orchestrator.suites.registry import get_suite


def _m(v: float, unit: str, spread: float = 0.05) -> dict[str, Any]:
    return {"value": v, "median": v, "p10": v * (1 - spread), "p90": v * (1 + spread), "unit": unit}


def _moe_run(rid: str, hosts: list[str], dtype: str = "bf16", *, ep: bool = False, gpu: str = "NVIDIA H200",
             roof: float | None = 4200.0) -> RunIn:  # fmt: skip
    rows = []
    for h in hosts:
        for i, m in enumerate([1, 2, 4, 8, 16, 32]):
            metrics = {"time_ms": _m(0.3 + i, "ms"), "gbps": _m(2000 + 100 * i, "GB/s"),
                       "tflops": _m(1.0 + i, "TFLOP/s"), "us_per_token": _m(300 / m, "µs"),
                       "distinct_experts": {"value": 9, "unit": "experts"}}  # fmt: skip
            if ep:
                metrics |= {"ep_gpus": {"value": 2, "unit": "GPUs"}, "gbps_per_gpu": _m(1000 + 50 * i, "GB/s")}
            hot = (h, m) == (hosts[0], 8)
            info = {"throttled": True, "throttle_reason": "power cap in 3/40 samples"} if hot else {}
            rows.append(RowIn(host=h, case={"M": m, "E": 384, "k": 8, "dtype": dtype, "seed": i}, metrics=metrics,
                              info=info))  # fmt: skip
    return RunIn(run_id=rid, label=None, suite="moe-sweep-ep" if ep else "moe-sweep",
                 hosts=[HostIn(host=h, gpu_name=gpu, roof_gbps=roof) for h in hosts], rows=rows)  # fmt: skip


def test_moe_sweep_views_one_trace_per_host_with_the_roofs() -> None:
    v = build_views([_moe_run("r1", ["b300-0", "b300-1"])], get_suite("moe-sweep"))
    assert [x.metric for x in v.views] == ["gbps", "tflops", "us_per_token", "time_ms"]
    gbps = v.views[0]
    assert [t.name for t in gbps.traces] == ["b300-0", "b300-1"]  # seed differs per case but names no line
    assert [len(t.points) for t in gbps.traces] == [6, 6]
    assert gbps.unit == "GB/s" and gbps.y_title == "gbps (GB/s)"
    assert [(r.kind, r.y) for r in gbps.refs] == [("datasheet", 4800.0), ("measured", 4200.0), ("measured", 4200.0)]
    assert gbps.refs[0].label == "H200 SXM datasheet 4,800 GB/s"
    assert gbps.refs[1].label == "b300-0 measured copy roof 4,200 GB/s"
    [peak] = v.views[1].refs
    assert (peak.kind, peak.y, peak.label) == ("dense-peak", 989.0, "H200 SXM bf16 dense peak 989 TFLOP/s")
    assert v.views[2].refs == [] and v.views[3].refs == []
    p8 = next(p for p in gbps.traces[0].points if p.x == 8)
    assert p8.flags == ["throttled: power cap in 3/40 samples"]
    assert (p8.y, p8.p10, p8.p90) == pytest.approx((2300.0, 2185.0, 2415.0))
    assert p8.case["dtype"] == "bf16"


def test_moe_sweep_ep_plots_rates_never_its_parameters_or_counts() -> None:
    v = build_views([_moe_run("r1", ["h"], ep=True)], get_suite("moe-sweep-ep"))
    plotted = [x.metric for x in v.views]
    assert plotted == ["gbps", "gbps_per_gpu", "tflops", "us_per_token", "time_ms"]
    assert "distinct_experts" not in plotted and "ep_gpus" not in plotted
    assert [r.kind for r in v.views[1].refs] == ["datasheet", "measured"]  # per GPU against one GPU's roofs
    assert v.views[0].refs == []  # the aggregate of 2 GPUs is not drawn against one GPU's roof


def test_overlaid_dtypes_are_named_and_share_one_peak_line_per_tensor_path() -> None:
    runs = [_moe_run(f"0000-{d}", ["h200-0"], d) for d in ("bf16", "fp8", "int4")]
    v = build_views(runs, get_suite("moe-sweep"))
    names = [t.name for t in v.views[0].traces]
    assert names == ["h200-0 · dtype=bf16 · 0000bf16", "h200-0 · dtype=fp8 · 0000fp8", "h200-0 · dtype=int4 · 0000int4"]
    assert [r.label for r in v.views[1].refs] == [
        "H200 SXM bf16, int4 dense peak 989 TFLOP/s", "H200 SXM fp8 dense peak 1,979 TFLOP/s"]  # fmt: skip
    with pytest.raises(UsageError, match="different suites"):
        build_views([runs[0], _moe_run("x", ["h"], ep=True)], None)


def test_unknown_suite_plots_its_metrics_but_not_a_metric_named_like_a_parameter() -> None:
    rows = [RowIn(host="h", case={"batch": b, "M": b}, metrics={"tput": _m(10.0 * b, "tok/s"), "M": _m(b, "")})
            for b in (1, 2, 4)]  # fmt: skip
    v = build_views([RunIn(run_id="r", label="lbl", suite="mine", hosts=[HostIn(host="h")], rows=rows)], None)
    assert [x.metric for x in v.views] == ["tput"]
    assert v.views[0].x == "batch" and v.views[0].x_axis.log is False  # 1..4 spans less than 16x


def test_metric_and_x_choices_are_checked() -> None:
    run = _moe_run("r", ["h"])
    [only] = build_views([run], get_suite("moe-sweep"), metric="tflops").views
    assert only.metric == "tflops" and only.refs[0].kind == "dense-peak"
    with pytest.raises(UsageError, match="no result of the run.s. has metric 'nope'") as e:
        build_views([run], get_suite("moe-sweep"), metric="nope")
    assert "gbps" in (e.value.hint or "")
    with pytest.raises(UsageError, match="'Q' is not a case parameter"):
        build_views([run], get_suite("moe-sweep"), x="Q")
    with pytest.raises(UsageError, match="'dtype' is not a number in any result") as e:
        build_views([run], get_suite("moe-sweep"), x="dtype")
    assert e.value.hint == "numeric case parameters: E, M, k, seed"
    [by_k] = build_views([run], get_suite("moe-sweep"), metric="gbps", x="k").views
    assert by_k.x == "k" and [t.name for t in by_k.traces][:2] == ["h · M=1", "h · M=2"]  # M now names lines


def test_one_case_suite_has_no_sweep_to_plot() -> None:
    rows = [RowIn(host="h", case={"H": 7168}, metrics={"sync_us": _m(9.0, "us")})]
    v = build_views([RunIn(run_id="r", label=None, suite="overheads", hosts=[], rows=rows)], get_suite("overheads"))
    assert v.views == [] and v.note is not None and "no sweep" in v.note


def test_doubling_sweeps_get_log_axes_with_round_labels() -> None:
    sizes = [8 * 2**i for i in range(31)]
    ax = x_axis("size_bytes", [float(s) for s in sizes])
    assert ax.log and ax.title == "size (bytes, log2)"
    assert ax.ticktext[:4] == ["8 B", "128 B", "2 KiB", "32 KiB"] and ax.ticktext[-1] == "8 GiB"
    assert len(ax.tickvals) <= 11 and ax.tickvals[1] == 128.0
    m = x_axis("M", [float(2**i) for i in range(13)])
    assert m.log and m.ticktext[-1] == "4096" and "1024" in m.ticktext and m.title == "M, tokens per call (log2)"
    assert not x_axis("M", [1.0, 2.0, 4.0]).log
    assert fmt_bytes(32768) == "32 KiB" and fmt_bytes(1.5 * 2**20) == "1.5 MiB"


YAML = """\
name: serving
description: d
command: ["{build}/bin/bench", "--c", "{concurrency}"]
params:
  concurrency: {type: list, default: [1, 4, 16, 64], help: "requests in flight"}
parser: sglang-serving
metrics:
  output_throughput: {}
  median_itl_ms: {}
plot: [median_itl_ms]
"""


def test_yaml_suites_declare_their_plots_and_a_wrong_name_is_a_file_line_error() -> None:
    sd = parse_suite(YAML, "serving.yaml")
    rows = [RowIn(host="h", case={"concurrency": c},
                  metrics={"output_throughput": _m(100.0 * c, "tok/s"), "median_itl_ms": _m(5.0, "ms")})
            for c in (1, 4, 16, 64)]  # fmt: skip
    [view] = build_views([RunIn(run_id="r", label=None, suite="serving", hosts=[], rows=rows)], sd).views
    assert (view.metric, view.x, view.x_axis.log) == ("median_itl_ms", "concurrency", True)
    undeclared = parse_suite(YAML.replace("plot: [median_itl_ms]\n", ""), "serving.yaml")
    plotted = build_views([RunIn(run_id="r", label=None, suite="serving", hosts=[], rows=rows)], undeclared).views
    assert [v.metric for v in plotted] == ["output_throughput", "median_itl_ms"]  # its declared metrics
    with pytest.raises(SuiteError, match=r"serving.yaml:10: plot\[1\]: no metric 'concurrency' in this suite"):
        parse_suite(YAML.replace("plot: [median_itl_ms]", "plot: [median_itl_ms, concurrency]"), "serving.yaml")
    shipped = load_registry().get("sglang-one-batch")
    assert [p.metric for p in shipped.plots] == ["median_decode_throughput", "median_decode_latency",
                                                 "prefill_throughput"]  # fmt: skip


def test_suites_show_names_the_plots() -> None:
    from typer.testing import CliRunner

    from orchestrator.cli.suites import app

    assert get_suite("moe-sweep").describe()["plots"][:2] == [{"metric": "gbps", "roof": "memory"},
                                                              {"metric": "tflops", "roof": "compute"}]  # fmt: skip
    text = CliRunner().invoke(app, ["show", "moe-sweep-ep"], env={"COLUMNS": "300"}).output
    assert ("plots (dashboard, orch runs plot): gbps, gbps_per_gpu against the datasheet and copy roofs, tflops, "
            "us_per_token, time_ms") in text
