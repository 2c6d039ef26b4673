"""Tables over cases (``runs compare``/``runs check``, ``calibrate``): parameters every case shares once above
the table, only the varying ones per row, rows in the sweep's numeric order (M=8 before M=64) — pure rendering."""

from __future__ import annotations

from types import SimpleNamespace
from unittest.mock import patch

import pytest
from rich.console import Console

from orchestrator.cli import render, render_regress
from orchestrator.cli.render import split_case_params


def test_split_case_params() -> None:
    cases = [{"M": m, "E": 16, "H": 256, "seed": m} for m in (64, 8, 1)]
    assert split_case_params(cases, skip=("seed",)) == ({"E": 16, "H": 256}, ("M",))
    assert split_case_params([{"M": 1, "E": 16}]) == ({}, ("M", "E"))  # one case keeps its parameters
    assert split_case_params([{"M": 1}, {"M": 1, "E": 16}]) == ({"M": 1}, ("E",))  # missing in one: varies


def test_calibration_rows_in_numeric_sweep_order_with_shared_params_once() -> None:
    cal = [SimpleNamespace(host="h", case={"M": m, "E": 16, "seed": 0}, metric="time_ms", n_runs=3,
                           aa_spread=0.01, within_spread=0.02) for m in (64, 8, 1024, 1)]  # fmt: skip
    out = SimpleNamespace(suite="moe-sweep", runs=[SimpleNamespace(run_id="01a22ce3-97d8-7af5-a290-bdba3844cf0c",
                                                                   status="completed")],
                          calibrations=cal, skipped={}, too_wide=[])  # fmt: skip
    wide = Console(highlight=False, emoji=False, width=100, record=True)
    with patch.object(render, "console", lambda: wide), patch.object(render_regress, "console", lambda: wide):
        render_regress.calibration_table(out)
    text = wide.export_text()
    assert "every case: E=16" in text
    cases = [ln.split("│")[2].strip() for ln in text.splitlines() if ln.count("│") >= 6]
    assert cases == ["M=1", "M=8", "M=64", "M=1024"], text
    assert max(len(ln) for ln in text.splitlines()) <= 100


def _metric_row(size: int, busbw: float) -> SimpleNamespace:
    metrics = {n: {"value": busbw, "median": busbw, "unit": "GB/s", "n": 20}
               for n in ("busbw_gbps_inplace", "algbw_gbps_outofplace")}  # fmt: skip
    metrics["time_ms"] = {"value": 1.25, "median": 1.25, "unit": "ms", "n": 20}
    return SimpleNamespace(case={"size_bytes": size, "op": "all_reduce"}, metrics=metrics, status="ok", error=None,
                           info={}, pct_of_measured_roof=None)  # fmt: skip


def test_generic_table_breaks_names_at_underscores_and_keeps_every_column() -> None:
    """A narrow terminal folded ``busbw_gbps_inplace`` into ``busbw_gbps_inpla`` / ``ce``: headers now break after
    underscores, every column stays (``n`` included), and at 80 columns no case is folded."""
    rows = [_metric_row(1048576, 361.5), _metric_row(8, 0.02)]
    for width in (60, 80):
        narrow = Console(highlight=False, emoji=False, width=width, record=True)
        narrow.print(render._generic_table("allreduce on h1", rows))
        text = narrow.export_text()
        assert max(len(ln) for ln in text.splitlines()) <= width, text
        words = {w for ln in text.splitlines() for w in ln.replace("┃", " ").replace("│", " ").split()}
        assert {"busbw_gbps_", "inplace", "algbw_gbps_", "outofplace", "time_ms", "n", "20"} <= words, text
        assert ("size_bytes=1048576" in words) == (width == 80), text


def test_name_lines() -> None:
    assert render.name_lines("busbw_gbps_inplace") == "busbw_gbps_\ninplace"
    assert render.name_lines("a_very_long_metric_name_here") == "a_very_long_\nmetric_name_\nhere"
    assert render.name_lines("time_ms") == "time_ms"
    assert render.name_lines("tokens_per_s") == "tokens_per_s"  # 12 characters: one line


def _moe_row(m: int, t: float, p10: float, p90: float, roof: float | None = None) -> SimpleNamespace:
    metrics = {"time_ms": {"value": t, "median": t, "p10": p10, "p90": p90, "unit": "ms", "n": 20},
               "us_per_token": {"value": t * 1000 / m}, "gbps": {"value": 12.3}, "tflops": {"value": 0.0123}}
    return SimpleNamespace(m=m, seq=m, status="ok", error=None, info={}, case={"M": m}, metrics=metrics,
                           pct_of_measured_roof=roof, roof_note=None)  # fmt: skip


@pytest.mark.parametrize("width", [80, 100])
def test_moe_table_keeps_every_figure_whole_at_80_columns(width: int) -> None:
    """The variant tester: at 80 columns a CPU sweep's spread read ``172 (169–2…`` while the empty % of peak and
    % of roof columns were kept; now a percent column no result has is left out and no figure is cut."""
    rows = [_moe_row(1, 0.239, 0.236, 0.2451), _moe_row(64, 172.0, 169.0, 2000.0), _moe_row(4096, 1234.5, 1200, 1300)]
    con = Console(highlight=False, emoji=False, width=width, record=True)
    con.print(render._moe_table("moe-sweep on cpu-0", rows))
    text = con.export_text()
    assert "…" not in text and max(len(ln) for ln in text.splitlines()) <= width, text
    for figure in ("0.239", "(0.236–0.245)", "172", "(169–2,000)", "1,234", "(1,200–1,300)", "2,688", "0.0123"):
        assert figure in text, (figure, text)
    assert "% of peak" not in text and "% of roof" not in text
    rows[1].pct_of_measured_roof = 71.5  # a roof for one row: the column is there, '-' where there is none
    con = Console(highlight=False, emoji=False, width=width, record=True)
    con.print(render._moe_table("moe-sweep on gpu-0", rows))
    assert "% of roof" in con.export_text() and "% of peak" not in con.export_text()


def test_visible_shows_a_nul_as_the_stores_stand_in_and_other_controls_as_escapes() -> None:
    """A host name read raw with a NUL (SQLite keeps it) showed as ``\\x00`` where every stored text shows U+2400:
    the hypothesis test of untrusted text failed on seed 2."""
    from orchestrator.cli.render import visible

    assert visible("a\x00b\x1bc\td") == "a\u2400b\\x1bc\\td"
    assert visible("a\x00\nb", lines=True) == "a\u2400\nb"
