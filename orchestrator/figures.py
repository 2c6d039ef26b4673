"""Draw ``analysis.views.Views`` into a PNG or SVG file with matplotlib — the same views as the dashboard.

Headless: a bare ``matplotlib.figure.Figure`` (no pyplot, no GUI backend, no global state), saved by the Agg
canvas (PNG) or the SVG backend. SVG keeps its text as ``<text>`` (``svg.fonttype = none``) so that labels stay
searchable and testable. One panel per view, two per row; legends below each panel, outside the data.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from orchestrator.analysis.views import View, Views, short_id
from orchestrator.errors import UsageError

FORMATS = (".png", ".svg")
COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#4b5563"]
PANEL_W_IN, PANEL_H_IN, DPI = 6.4, 4.6, 120


def check_output(path: Path) -> str:
    """The format of ``path`` from its suffix (``png`` or ``svg``). Raises UsageError for any other suffix."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"cannot write {path}: the file name must end in .png or .svg",
                         "e.g. orch runs plot latest -o moe.png (or moe.svg)")  # fmt: skip
    return suffix[1:]


def _panel(ax: Any, view: View) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator, StrMethodFormatter

    for i, t in enumerate(view.traces):
        color = COLORS[i % len(COLORS)]
        xs = [p.x for p in t.points]
        ys = [p.y for p in t.points]
        ax.plot(xs, ys, marker="o", markersize=3.5, linewidth=1.6, color=color, label=t.name)
        band = [(p.x, p.p10, p.p90) for p in t.points if p.p10 is not None and p.p90 is not None]
        if band:
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=color, alpha=0.15,
                            linewidth=0)  # fmt: skip
        hot = [p for p in t.points if p.flags]
        if hot:
            ax.scatter([p.x for p in hot], [p.y for p in hot], marker="x", s=60, color="#b42318", zorder=5,
                       label=f"{t.name}: throttled / shared GPU")  # fmt: skip
    for r in view.refs:
        ax.axhline(r.y, color="#111827" if r.kind == "measured" else "#6b7280", linewidth=1.1,
                   linestyle="--" if r.kind == "measured" else ":", label=r.label)  # fmt: skip
    if view.x_axis.log:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(view.x_axis.tickvals))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(view.x_axis.tickvals, view.x_axis.ticktext)
    ax.margins(y=0.08)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.6g}"))
    ax.set_xlabel(view.x_axis.title)
    ax.set_ylabel(view.y_title)
    ax.set_title(view.title, fontsize=11, loc="left")
    ax.grid(True, color="#e5e7eb", linewidth=0.6)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=7.5, frameon=False)


def write(views: Views, path: Path) -> list[str]:
    """Draw every view of ``views`` into ``path`` (.png at 120 dpi or .svg); returns the metrics drawn.

    Raises:
        UsageError: a suffix other than .png/.svg, or nothing to plot (the views' note says why).
    """
    fmt = check_output(path)
    if not views.views:
        raise UsageError(f"nothing to plot for suite {views.suite}: {views.note or 'no views'}",
                         "see the run with `orch runs show RUN`; pick a metric with --metric")  # fmt: skip
    import matplotlib
    from matplotlib.figure import Figure

    cols = 1 if len(views.views) == 1 else 2
    rows = math.ceil(len(views.views) / cols)
    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 9}):
        fig = Figure(figsize=(PANEL_W_IN * cols, PANEL_H_IN * rows), layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False)
        for i, view in enumerate(views.views):
            _panel(axes[i // cols][i % cols], view)
        for j in range(len(views.views), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        names = ", ".join(r.label or short_id(r.id) for r in views.runs)
        fig.suptitle(f"{views.suite}: {names}", fontsize=12)
        try:
            fig.savefig(path, format=fmt, dpi=DPI)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}", "check the directory exists and is "
                             "writable") from exc  # fmt: skip
    return [v.metric for v in views.views]
