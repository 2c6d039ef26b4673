"""Rich output of ``orch calibrate``, ``orch runs rerun`` and ``orch runs check`` (kept apart from render.py)."""

from __future__ import annotations

from typing import Any

from orchestrator.cli.render import (
    _case_text,
    _ratio,
    ci_text,
    comparison_table,
    console,
    noise_floor_line,
    safe,
    split_case_params,
)
from orchestrator.numfmt import number, percent
from orchestrator.store.compute import short_run_id
from orchestrator.wording import counted


def _pct(x: float | None) -> str:
    return percent(x)


def _sweep_key(case: dict[str, Any], keys: tuple[str, ...]) -> tuple[tuple[int, float, str], ...]:
    """Order of a case by its varying parameters, numbers numerically (M=8 before M=64), text after numbers."""
    out = []
    for k in keys:
        v = case.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((0, float(v), ""))
        else:
            out.append((1, 0.0, str(v)))
    return tuple(out)


def calibration_table(out: Any) -> None:
    """Per host, case and metric: the A/A spread of the calibration runs' medians and the within-run spread."""
    from rich.table import Table

    c = console()
    runs = ", ".join(f"{short_run_id(r.run_id) if r.run_id else 'none stored'} ({safe(r.status)})" for r in out.runs)
    common, varying = split_case_params([r.case for r in out.calibrations], skip=("seed",))
    every = f"\n[dim]every case: {safe(_case_text(common))}[/dim]" if common else ""
    t = Table(title=f"calibration of {safe(out.suite)}: runs {runs}{every}", title_justify="left")
    for col in ("host", "case", "metric", "runs", "A/A spread", "within-run spread"):
        t.add_column(col, justify="right" if col in ("runs", "A/A spread", "within-run spread") else "left")
    for r in sorted(out.calibrations, key=lambda r: (r.host, _sweep_key(r.case, varying), r.metric)):
        case = safe(_case_text({k: r.case.get(k) for k in varying if k in r.case}))
        t.add_row(
            safe(r.host), case or "-", safe(r.metric), str(r.n_runs), _pct(r.aa_spread), _pct(r.within_spread),
        )  # fmt: skip
    c.print(t)
    c.print(f"{len(out.calibrations)} calibrations stored; later comparisons of these cases use them as noise band")
    skipped = getattr(out, "skipped", None) or {}
    if skipped:
        why = "; ".join(f"{safe(m)} ({safe(k)})" for m, k in sorted(skipped.items()))
        c.print(
            "not calibrated (no raw samples of their own: figures derived from the case or from a timed metric, "
            f"such as bytes, FLOPs and rates; or constant): {why}",
            soft_wrap=True,
        )
    wide = getattr(out, "too_wide", None) or []
    if wide:
        from orchestrator.regress import WIDE_BAND

        names = [
            f"{safe(r.host)} {safe(_case_text({k: r.case.get(k) for k in varying} if varying else r.case, ('seed',)))}"
            f" {safe(r.metric)}"
            for r in wide
        ]
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        c.print(
            f"[yellow]warning:[/yellow] {len(wide)} band(s) wider than {WIDE_BAND:.0%}, too wide to call a change: "
            f"{shown}; calibrate on a quieter host (no other jobs, fixed clocks) or with more --repeat",
            soft_wrap=True,
        )


def rerun_outcome(outcome: Any, replays: str) -> None:
    c = console()
    if not outcome.run_id:  # every host failed before starting: nothing stored
        from orchestrator.cli.render import NOTHING_STORED

        for h in outcome.hosts:
            c.print(f"[red]{safe(h.host)}: {safe(h.error or h.status)}[/red]", soft_wrap=True)
        c.print(f"[red]{NOTHING_STORED}[/red] (replaying {short_run_id(replays)})", soft_wrap=True)
        return
    c.print(
        f"run {short_run_id(outcome.run_id)} ({safe(outcome.status)}) replays {short_run_id(replays)}: "
        + ", ".join(f"{safe(h.host)} {safe(h.status)} {counted(h.results, 'result')}" for h in outcome.hosts)
    )
    for h in outcome.hosts:
        if h.error:
            c.print(f"[red]{safe(h.host)}: {safe(h.error)}[/red]", soft_wrap=True)


def _where(x: Any) -> str:
    return f"{safe(x.host or '*')} {safe(_case_text(x.case, ('seed',)))}"


def _untested_line(u: Any) -> str:
    ratio = _ratio(u.case.ratio)
    if u.outcome == "regression":
        head = f"[red]regression[/red] by {safe(u.rule)}: {_where(u.case)} head/base {ratio}"
    elif u.outcome == "within":
        head = f"within {safe(u.rule)}: {_where(u.case)} head/base {ratio}"
    else:
        head = f"[yellow]cannot judge[/yellow]: {_where(u.case)} head/base {ratio}"
    return f"{head} (not tested: {safe(u.why)}; {safe(u.hint)})"


def check_outcome(out: Any) -> None:
    """The comparison table, the slower cases, the cases the test could not judge (and how the gate treated
    them) and, with --confirm, which flagged cases the rerun reproduced; last the verdict line."""
    comparison_table(out.comparison)
    c = console()
    for x in out.slower:
        st = x.stats
        c.print(
            f"[red]slower[/red]: {_where(x)} head/base {_ratio(x.ratio)} "
            f"(95% CI {ci_text(st.ci_low, st.ci_high)}, "
            f"q {st.q_value:.2g}, noise band ±{percent(st.band)})",
            soft_wrap=True,
        )
    for u in out.untested:
        c.print(_untested_line(u), soft_wrap=True)
    mark = "missing in head" if out.allow_missing else "[red]missing in head[/red]"
    for m in out.missing:
        c.print(f"{mark}: {_where(m)}", soft_wrap=True)
    mark = "failed in head" if out.allow_missing else "[red]failed in head[/red]"
    for f in out.failed:
        c.print(f"{mark}: {_where(f)} ({safe(f.error or 'error')})", soft_wrap=True)
    flagged = out.flagged
    if out.confirm and flagged:
        c.print(f"confirming rerun: {short_run_id(out.rerun.run_id)} ({safe(out.rerun.status)})")
        if out.recheck is not None and out.recheck.noise_floor:
            c.print(noise_floor_line(out.recheck), soft_wrap=True)
        reproduced = {(r.host, r.case_key): r for r in out.reproduced}
        for x in flagged:
            r = reproduced.get((x.host, x.case_key))
            if r is not None:
                c.print(f"[red]reproduced[/red]: {_where(x)} rerun/base {_ratio(r.ratio)}", soft_wrap=True)
            else:
                c.print(f"not reproduced: {_where(x)}", soft_wrap=True)
    unjudged = out.cannot_judge
    if out.regression:
        if out.confirm:
            n, of = len(out.reproduced), len(flagged)
            c.print(f"[red]regression confirmed[/red]: {n} of {counted(of, 'flagged case')} reproduced")
        else:
            parts = [f"{len(out.slower)} called slower", f"{len(out.by_medians)} beyond the rule on the medians"]
            c.print(
                f"[red]regression[/red]: {counted(len(flagged), 'case')} ({', '.join(parts)}; not confirmed: "
                "--confirm reruns them)",
                soft_wrap=True,
            )
    elif out.incomplete:
        parts = [f"lacks {counted(len(out.missing), 'case')} of the base", f"{len(out.failed)} failed"]
        c.print(
            f"[red]incomplete[/red]: head {', '.join(parts)}; a gate passes only a run that measured every case "
            "of the base (--allow-missing judges the shared cases alone) (exit 1)",
            soft_wrap=True,
        )
    elif unjudged:
        need = sorted({u.hint for u in unjudged})
        c.print(
            f"[yellow]inconclusive[/yellow]: {counted(len(unjudged), 'case')} could not be judged and no case is "
            f"a regression; {'; '.join(need)}, or decide on the medians with --min-change (exit 3)",
            soft_wrap=True,
        )
    elif out.confirm and flagged:
        c.print("[green]no regression confirmed[/green]: no flagged case reproduced on rerun")
    elif out.missing or out.failed:
        c.print(
            f"[green]pass[/green] (--allow-missing): no case called slower, every shared case judged; "
            f"{counted(len(out.missing), 'case')} of the base missing, {len(out.failed)} failed",
            soft_wrap=True,
        )
    else:
        c.print("[green]pass[/green]: no case called slower, every case judged: no regression")


def changes_table(report: Any) -> None:
    """``orch runs changes``: every change point found, per host and case, with the run after which it shows."""
    from rich.table import Table

    c = console()
    if not report.changes:
        c.print(
            f"no change point in {report.series} series ({report.points} points) of {safe(report.suite)} "
            f"{safe(report.metric)}"
        )
        return
    t = Table(title=f"change points: {safe(report.suite)} {safe(report.metric)}", title_justify="left")
    for col in ("host", "case", "from run", "started", "before", "after", "change", "p"):
        t.add_column(col, justify="left" if col in ("host", "case", "from run", "started") else "right")
    for x in report.changes:
        t.add_row(
            safe(x.host), safe(_case_text(x.case, ("seed",))), short_run_id(x.run_id),
            x.run_started_at.strftime("%Y-%m-%d %H:%M"), number(x.before, 4), number(x.after, 4),
            percent(x.change, sign=True), "-" if x.p_value is None else f"{x.p_value:.1g}",
        )  # fmt: skip
    c.print(t)
    c.print(f"{counted(len(report.changes), 'change point')} in {report.series} series "
            f"({counted(report.points, 'point')}); stored")
