"""``orch runs plot`` through the real ``orch`` process on the stored H200 runs (the recorded spools imported with
``orch runs import``): a PNG and an SVG of the roofline views, the SVG's axis labels and reference lines read
from its text; runs overlaid; bad input is one message and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch

FIX = Path(__file__).resolve().parents[1] / "fixtures"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def orch(tmp_path: Path) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text("groups:\n  h200:\n    hosts:\n      h200-0: {address: 127.0.0.1}\n")
    o = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    assert o("db", "upgrade").returncode == 0
    return o


def _import(orch: Orch, spool: Path) -> str:
    out = orch.json("runs", "import", str(spool), "--host", "h200-0")
    return str(out["run_id"])


def _texts(svg: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_png_and_svg_of_the_h200_moe_sweep(orch: Orch, tmp_path: Path) -> None:
    _import(orch, FIX / "h200" / "hbm" / "events.jsonl")  # the copy roof the GB/s view draws
    moe = _import(orch, FIX / "h200" / "moe" / "events.jsonl")
    png = tmp_path / "moe.png"
    res = orch("runs", "plot", moe[-8:], "-o", str(png))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"wrote {png}: moe-sweep gbps, tflops, us_per_token, time_ms of run {moe[-8:]}")
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and int.from_bytes(data[16:20], "big") > 1000  # IHDR width, px

    svg = tmp_path / "moe.svg"
    assert orch("runs", "plot", moe, "-o", str(svg)).returncode == 0
    texts = _texts(svg.read_text())
    for label in ("gbps (GB/s)", "tflops (TFLOP/s)", "us_per_token (µs)", "time_ms (ms)", "M, tokens per call (log2)",
                  "H200 SXM datasheet 4,800 GB/s", "h200-0 measured copy roof 4,274 GB/s",
                  "H200 SXM bf16 dense peak 989 TFLOP/s", "achieved bandwidth vs M", "h200-0"):  # fmt: skip
        assert label in texts, label
    assert {"1", "4", "16", "64", "256", "1024", "4096"} <= set(texts)  # the log2 axis' swept values
    assert "distinct_experts" not in " ".join(texts)


def test_overlaid_dtypes_and_one_metric(orch: Orch, tmp_path: Path) -> None:
    ids = [_import(orch, FIX / "h200-quant" / f"moe-{d}" / "events.jsonl") for d in ("bf16", "fp8", "int4")]
    svg = tmp_path / "quant.svg"
    res = orch("runs", "plot", *ids, "--metric", "tflops", "-o", str(svg))
    assert res.returncode == 0, res.stderr
    texts = _texts(svg.read_text())
    assert "tflops (TFLOP/s)" in texts and "gbps (GB/s)" not in texts
    assert [t for t in texts if t.startswith("h200-0 · dtype=")] == [
        f"h200-0 · dtype=bf16 · {ids[0][-8:]}", f"h200-0 · dtype=fp8 · {ids[1][-8:]}",
        f"h200-0 · dtype=int4 · {ids[2][-8:]}"]  # fmt: skip
    assert {"H200 SXM bf16, int4 dense peak 989 TFLOP/s", "H200 SXM fp8 dense peak 1,979 TFLOP/s"} <= set(texts)


def test_bad_input_is_one_message_and_exit_2(orch: Orch, tmp_path: Path) -> None:
    moe = _import(orch, FIX / "h200" / "moe" / "events.jsonl")
    hbm = _import(orch, FIX / "h200" / "hbm" / "events.jsonl")
    cases = {
        ("-o", str(tmp_path / "x.jpg")): "the file name must end in .png or .svg",
        ("--metric", "nope", "-o", str(tmp_path / "x.png")): "no result of the run(s) has metric 'nope'",
        ("-o", str(tmp_path / "no-such-dir" / "x.png")): "cannot write",
    }
    for extra, message in cases.items():
        res = orch("runs", "plot", moe, *extra)
        assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, (extra, res.stderr)
    res = orch("runs", "plot", moe, hbm, "-o", str(tmp_path / "x.png"))
    assert res.returncode == 2 and "cannot share a plot" in res.stderr
    res = orch("runs", "plot", "ffffffff", "-o", str(tmp_path / "x.png"))
    assert res.returncode == 2 and "no run matches 'ffffffff'" in res.stderr
    assert not list(tmp_path.glob("x.*"))
    assert json.loads(orch("runs", "list", "--json").stdout)  # the store is untouched and readable
