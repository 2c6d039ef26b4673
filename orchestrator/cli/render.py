"""All rich output of the CLI: consoles, the error line, and tables built from service return values."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from rich.text import Text

from orchestrator.analysis.compare import is_wide, relative_spread
from orchestrator.cli.prose import ProseConsole, say
from orchestrator.errors import OrchError
from orchestrator.netaddr import host_port
from orchestrator.numfmt import number
from orchestrator.store.compute import short_run_id
from orchestrator.wording import counted


def _width(stream: Any) -> int | None:
    """A terminal's own width; when not a terminal (CI logs, pipes), ``$COLUMNS`` if set, else a fixed
    ``PIPE_WIDTH`` (rich would take 80; tables are laid out to fit 100 columns)."""
    if stream.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else PIPE_WIDTH


PIPE_WIDTH = 100


@cache
def console() -> Console:
    return ProseConsole(highlight=False, emoji=False, width=_width(sys.stdout))


@cache
def err_console() -> Console:
    return ProseConsole(stderr=True, highlight=False, emoji=False, width=_width(sys.stderr))


# C0/C1 control characters, line/paragraph separators and bidi overrides: a terminal would act on them (ESC starts
# a control sequence; U+202E reorders what follows), so they are shown as escapes (\x1b, \u202e) instead. A table
# cell or a one-line field also shows tab and newline as escapes (a newline would split the row).
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on written as a Python escape (``"a\x1bb"`` ->
    ``a\\x1bb``): control characters, line/paragraph separators, bidi overrides; tab and newline too unless
    ``lines`` (a message that may span lines). A NUL is shown as U+2400 (␀), the character the store keeps in its
    place (store/storable.py), so a text shows alike whether it was stored with the stand-in or read raw."""
    pattern = _UNPRINTABLE if lines else _UNPRINTABLE_LINE
    return pattern.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text.replace("\x00", "\u2400"))


# rich.markup's tag pattern, and a backslash run before any other "[" (rich's renderer turns "\\[" outside a tag
# into "[", so such a run needs one more backslash to show as given; rich's own escape() covers only tags)
_MARKUP_ESCAPE = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])|(\\+)(?=\[)")


def _markup_escape(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(2) is not None:
            return m.group(1) * 2 + "\\" + m.group(2)
        return m.group(3) + "\\"

    text = _MARKUP_ESCAPE.sub(sub, text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def safe(value: object, *, lines: bool = False) -> str:
    """Any string from a host, a tool, a user or the database, ready to go into rich markup: shown as given
    (brackets are not markup, emoji codes stay text, control characters are escapes, see :func:`visible`)."""
    return _markup_escape(visible(str(value), lines=lines))


def red(value: object, *, lines: bool = False) -> Text:
    """A table cell in red holding any untrusted string shown as given (:func:`visible`), as a rich Text rather
    than markup: a value ending in backslashes put before a closing tag (``[red]...\\[/red]``) lost half of
    them to rich's markup escapes."""
    from rich.text import Text

    return Text(visible(str(value), lines=lines), style="red")


def error(exc: OrchError) -> None:
    """Print an expected failure as a red line plus its hint (stderr)."""
    c = err_console()
    c.print(f"[bold red]error:[/bold red] {safe(exc.message, lines=True)}", markup=True, soft_wrap=True)
    if exc.hint:
        c.print(f"[yellow]hint:[/yellow] {safe(exc.hint, lines=True)}", soft_wrap=True)


def print_json(doc: Any) -> None:
    """``--json``: one JSON document on stdout and nothing else there, written whole: a reader that goes away
    before the end (``| head -c 100``) ends orch as ``fastexit.broken_pipe`` says. Written with ``os.write`` in
    a loop: Python's buffered stdout took a pipe's partial write (the kernel's SIGPIPE ignored) and exited 0 with
    the document cut."""
    from orchestrator.cli import fastexit

    data = memoryview((json.dumps(doc, indent=2, default=str) + "\n").encode("utf-8"))
    try:
        sys.stdout.flush()
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (captured in-process by a test): as text
        sys.stdout.write(data.tobytes().decode("utf-8"))
        sys.stdout.flush()
        return
    try:
        while data:
            data = data[os.write(fd, data) :]
    except BrokenPipeError:
        fastexit.broken_pipe()


_STATUS_STYLE = {
    "ok": "[green]ok[/green]",
    "warn": "[yellow]warn[/yellow]",
    "fail": "[bold red]FAIL[/bold red]",
    "skipped": "[dim]-[/dim]",
}


CHECK_ABBREVIATIONS = {"banner": "bnr", "hostkey": "key", "python": "py", "agent": "agt",
                       "slurm": "slrm", "partition": "part"}  # fmt: skip
"""Doctor's check headers in a terminal too narrow for the full names (a legend under the table spells them)."""


def _check_headers(columns: Sequence[str], hosts: list[int], addresses: list[int]) -> dict[str, str]:
    """The check columns' abbreviated headers (name -> short) when the table with full headers is wider than the
    console, else none. A check cell is at most 4 characters (ok, warn, FAIL, -), so the full table takes
    ``host + address + sum(max(len(header), 4)) + 3 * columns + 1`` cells (``fit.table_width``)."""
    from orchestrator.cli.fit import table_width

    fixed = [max([4, *hosts]), max([7, *addresses])]
    if table_width([*fixed, *(max(len(n), 4) for n in columns)]) <= console().width:
        return {}
    return {n: CHECK_ABBREVIATIONS[n] for n in columns if n in CHECK_ABBREVIATIONS}


def _doctor_layout(columns: Sequence[str], headers: dict[str, str], hosts: list[int], addresses: list[int]) -> str:
    """Which doctor table fits the console: ``per_check`` (host, address, a column per check; ``headers`` the
    abbreviations in use), else ``checks`` (host, address, one column saying what did not pass), else
    ``stacked`` (the address under the host name, then that column): host names too long for the others."""
    from orchestrator.cli.fit import table_width

    fixed = [max([4, *hosts]), max([7, *addresses])]
    if table_width([*fixed, *(max(len(headers.get(n, n)), 4) for n in columns)]) <= console().width:
        return "per_check"
    if table_width([*fixed, _CHECKS_MIN]) <= console().width:
        return "checks"
    return "stacked"


_CHECKS_MIN = 24  # the one-column layout's "checks" cell: "FAIL tcp; skipped banner" on a line


def _checks_cell(checks: Sequence[Any], columns: Sequence[str]) -> str:
    """One cell for all of a host's checks (the layout for host names too long for a column per check):
    ``FAIL tcp; skipped banner hostkey ...; ok dns``, what did not pass first; ``all ok`` when every check
    passed."""
    by_status: dict[str, list[str]] = {}
    for name, c in zip(columns, checks, strict=True):
        if c is not None:
            by_status.setdefault(c.status, []).append(name)
    if set(by_status) <= {"ok"}:
        return "[green]all ok[/green]" if by_status else ""
    order = ["fail", "warn", "skipped", "ok"]
    words = {**_STATUS_STYLE, "skipped": "[dim]skipped[/dim]"}
    return "; ".join(f"{words.get(st, st)} {' '.join(by_status[st])}"
                     for st in sorted(by_status, key=lambda st: order.index(st) if st in order else 2))  # fmt: skip


def doctor_table(report: Any) -> None:
    """One row per host, one column per check; failures and warnings explained below the table. Host names too
    long for a column per check get one column saying what did not pass (``_doctor_layout``)."""
    from rich.table import Table

    from orchestrator.cli.fit import table_width

    columns = report.columns  # doctor.CHECK_NAMES, plus slurm/partition/node for a Slurm group
    table = Table(title="orch doctor", show_lines=False)
    addresses = [safe(host_port(h.address, h.port) if h.port else (h.address or "local")) for h in report.hosts]
    headers = _check_headers(columns, [len(h.host) for h in report.hosts], [len(a) for a in addresses])
    layout = _doctor_layout(columns, headers, [len(h.host) for h in report.hosts], [len(a) for a in addresses])
    # host and address are never cut (an address without its port names another host) while they fit; the checks'
    # cells give way first, then the column per check; a name longer than the terminal folds as a last resort
    # a name too long for even a 10-column checks cell beside it (66 characters in 80 columns) gets the table's
    # whole width, with the address and the checks under it
    alone = layout == "stacked" and table_width([max(len(h.host) for h in report.hosts), 10]) > console().width
    if alone:
        longest = max(len(h.host) for h in report.hosts)  # folds only when longer than the terminal's width
        table.add_column("host / address / checks", overflow="fold", width=min(longest, console().width - 4))
    elif layout == "stacked":
        longest = max(len(h.host) for h in report.hosts)  # the name whole: a 10-column checks cell fits beside
        table.add_column("host / address", overflow="fold", width=max(14, longest))
    else:
        table.add_column("host", style="bold", no_wrap=True,
                         min_width=max((len(h.host) for h in report.hosts), default=4))  # fmt: skip
        table.add_column("address", no_wrap=True, min_width=max((len(a) for a in addresses), default=7))
    if layout == "per_check":
        for name in columns:
            table.add_column(headers.get(name, name), justify="center", overflow="fold")
    else:
        if not alone:
            table.add_column("checks", overflow="fold", min_width=10)
        headers = {}
    notes: list[str] = []
    for h, address in zip(report.hosts, addresses, strict=True):
        by_name = {c.name: c for c in h.checks}
        row: list[Any] = [safe(h.host), address]
        if layout == "stacked":
            row = [f"[bold]{safe(h.host)}[/bold]\n  {address}"]
        if alone:
            from rich.console import Group
            from rich.padding import Padding

            under = f"{address}\n{_checks_cell([by_name.get(name) for name in columns], columns)}"
            row = [Group(f"[bold]{safe(h.host)}[/bold]", Padding(under, (0, 0, 0, 2)))]
        elif layout != "per_check":
            row.append(_checks_cell([by_name.get(name) for name in columns], columns))
        for name in columns:
            c = by_name.get(name)
            if layout == "per_check":
                row.append(_STATUS_STYLE.get(c.status, c.status) if c else "")
            if c and c.status in ("fail", "warn"):
                hint = c.data.get("hint")
                colour = "red" if c.status == "fail" else "yellow"
                notes.append(
                    f"[{colour}]{safe(h.host)} {name}:[/{colour}] {safe(c.detail, lines=True)}"
                    + (f"\n    hint: {safe(hint, lines=True)}" if hint else "")
                )
        table.add_row(*row)
    c = console()
    c.print(table)
    if headers:
        c.print("[dim]" + ", ".join(f"{short} = {name}" for name, short in headers.items()) + "[/dim]")
    for h in report.hosts:
        if h.facts is not None:
            details = [ch.detail for ch in h.checks if ch.name in ("python", "gpus") and ch.status == "ok"]
            if details:
                c.print(f"[bold]{safe(h.host)}[/bold]: " + safe("; ".join(details)))
    for h in report.hosts:
        hk = next((ch for ch in h.checks if ch.name == "hostkey"), None)
        if hk is not None and hk.status == "ok" and hk.data.get("hops"):
            c.print(f"[bold]{safe(h.host)}[/bold] hostkey: {safe(hk.detail)}", soft_wrap=True)
    for n in notes:
        c.print(n, soft_wrap=True)
    known_hosts_warnings(getattr(report, "warnings", []))
    passed = sum(1 for h in report.hosts if h.ok)
    colour = "green" if passed == len(report.hosts) else "red"
    c.print(f"[{colour}]{passed}/{len(report.hosts)} hosts passed[/{colour}]")


def fleet_table(view: Any, *, only_differences: bool = False) -> None:
    """Per group: every fleet field with its majority value and the hosts that differ (red); with
    ``only_differences`` (under doctor's table) just the fields where a host differs, or one line saying none."""
    from rich.markup import escape
    from rich.table import Table

    from orchestrator.fleet import FIELDS

    c = console()
    for g in view.groups:
        flagged = {d.field: d for d in g.differences}
        if only_differences and not flagged:  # (not an empty table when the only news is an unreachable host)
            alike = "alike in every field" if len(g.hosts) > 1 else "compared: no other host to compare it with"
            c.print(f"fleet {escape(g.group)}: {counted(len(g.hosts), 'host')} {alike}")
        else:
            table = Table(title=f"fleet {escape(g.group)} ({counted(len(g.hosts), 'host')})")
            table.add_column("field")
            table.add_column("majority")
            table.add_column("differs")
            for f in FIELDS:
                if only_differences and f.key not in flagged:
                    continue
                differs = "; ".join(f"{escape(d.host)}: {escape(d.value)}" for d in g.differences if d.field == f.key)
                table.add_row(f.key, escape(g.majority.get(f.key, "-")), f"[red]{differs}[/red]" if differs else "")
            c.print(table)
        for host, why in g.unreachable.items():
            c.print(f"[yellow]{escape(host)}: not compared ({escape(why)})[/yellow]")


def hosts_table(hosts: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="inventory")
    for col in ("host", "group", "connection", "address", "port", "user", "python", "labels"):
        table.add_column(col)
    for h in hosts:
        local = h.connection == "local"
        table.add_row(
            safe(h.name),
            safe(h.group),
            safe(h.connection),
            "(this machine)" if local else safe(h.address or "(ssh_config/DNS)"),
            "-" if local else safe(h.port or "(ssh_config/22)"),
            safe(h.user or "-"),
            safe(h.python or ("(orch's own)" if local else "python3")),
            safe(",".join(f"{k}={v}" for k, v in h.labels.items())),
        )
    console().print(table)


def _param_value(v: Any) -> str:
    """A parameter value as ``--set`` would take it; doubling lists of 4+ items shortened to ``A..B``."""
    if isinstance(v, list):
        if (
            len(v) >= 4
            and all(isinstance(x, int) for x in v)
            and all(b == 2 * a for a, b in zip(v, v[1:], strict=False))
        ):
            return f"{v[0]}..{v[-1]}"
        return ",".join(str(x) for x in v)
    return str(v)


def suites_table(rows: list[dict[str, Any]]) -> None:
    """``orch suites list``: rows of ``{"name", "bench", "description"}``."""
    from rich.table import Table

    table = Table(title="Suites", title_justify="left")
    table.add_column("suite", style="bold")
    table.add_column("bench")
    table.add_column("description", overflow="fold")
    table.add_column("source", overflow="fold")
    for r in rows:
        table.add_row(safe(r["name"]), safe(r["bench"]), safe(r["description"]), safe(r.get("source", "built-in")))
    console().print(table)


def suite_detail(doc: dict[str, Any]) -> None:
    """``orch suites show``: a suite's ``SuiteDef.describe()`` as a header, a parameter table and presets; for a
    suite file (``command``) its own parameters with repeat and warmup, not ``GPU_RUN_PARAMS``."""
    from rich.table import Table

    c = console()
    c.print(
        f"[bold]{safe(doc['name'])}[/bold] (bench {safe(doc['bench'])}): {safe(doc['description'])}", soft_wrap=True
    )
    if doc.get("sweep"):
        c.print(f"sweep axis: {safe(doc['sweep'])} (one case per value)")
    if doc.get("plots"):
        roofs = {"memory": " against the datasheet and copy roofs", "compute": " against the dense peak"}
        shown = ", ".join(safe(p["metric"]) + roofs.get(p["roof"] or "", "") for p in doc["plots"])
        c.print(f"plots (dashboard, orch runs plot): {shown}", soft_wrap=True)
    params = Table(title="Parameters (--set KEY=VALUE)", title_justify="left")
    for col in ("key", "type", "default", "accepted", "scope", "help"):
        params.add_column(col, overflow="fold")
    for p in doc["params"]:
        if doc.get("command") and p["name"] in GPU_RUN_PARAMS:
            continue  # a suite file's own parameters: device and seed are the built-in GPU benches' knobs
        accepted = [", ".join(p["choices"])] if p["choices"] else []
        if p["min"] is not None:
            accepted.append(f">= {p['min']:g}")
        if p["max"] is not None:
            accepted.append(f"<= {p['max']:g}")
        params.add_row(*(safe(x) for x in (p["name"], p["type"], _param_value(p["default"]), " ".join(accepted),
                                            p["scope"], p["help"])))  # fmt: skip
    c.print(params)
    if doc["presets"]:
        presets = Table(title="Presets (--preset NAME)", title_justify="left")
        for col in ("preset", "description", "values"):
            presets.add_column(col, overflow="fold")
        for pr in doc["presets"]:
            values = " ".join(f"{k}={_param_value(v)}" for k, v in pr["values"].items())
            presets.add_row(safe(pr["name"]), safe(pr["description"]), safe(values))
        c.print(presets)
        d = doc["default_preset"]
        if d["cuda"] or d["cpu"]:
            c.print(f"default preset: {safe(d['cuda'] or '-')} on a CUDA host, {safe(d['cpu'] or '-')} without CUDA")
    if doc.get("command"):
        _command_suite_detail(doc)


GPU_RUN_PARAMS = ("device", "seed")
"""Run parameters every suite carries (``registry.RUN_PARAMS``) that only the built-in benches read (the device
the tensors go to, the seed of weights, inputs and routing); ``orch suites show`` of a suite file leaves them out
(``--json`` lists every parameter the run accepts)."""


def _command_suite_detail(doc: dict[str, Any]) -> None:
    """The suite-file part of ``orch suites show``: source, argv template, grid, parser, metrics, references."""
    import shlex

    from rich.table import Table

    c = console()
    c.print(f"source: {safe(doc['source'])}", soft_wrap=True)
    c.print("command: " + safe(shlex.join(doc["command"])), soft_wrap=True)
    if doc.get("env"):
        c.print("env: " + safe(" ".join(f"{k}={v}" for k, v in doc["env"].items())), soft_wrap=True)
    grid = safe(json.dumps(doc["grid"]))
    c.print(f"timeout per run: {doc['timeout_s']:g} s; grid: {grid}; parser: {safe(doc['parser'])}")
    metrics = Table(title="Metrics", title_justify="left")
    for col in ("metric", "field", "unit"):
        metrics.add_column(col)
    for m in doc["metrics"]:
        metrics.add_row(safe(m["name"]), safe(m["path"]), safe(m["unit"]))
    c.print(metrics)
    if doc.get("references"):
        refs = Table(title="References (per host group)", title_justify="left")
        for col in ("group", "metric", "bound"):
            refs.add_column(col)
        for group, bounds in doc["references"].items():
            for metric, text in bounds.items():
                refs.add_row(safe(group), safe(metric), safe(text))
        c.print(refs)


def trust_offer(offer: Any) -> None:
    c = console()
    c.print(f"[bold]{safe(offer.host)}[/bold] ({safe(host_port(offer.hostname, offer.port))}) offers a "
            f"{safe(offer.key_type)} key")  # fmt: skip
    c.print(f"  fingerprint: [bold]{safe(offer.fingerprint)}[/bold]")
    c.print(f"  known_hosts verdict: {safe(offer.verdict.verdict)} — {safe(offer.verdict.detail)}")
    for k in offer.verdict.known:  # every entry consulted for the name; a marked one says what it is
        marker = k.get("marker")
        what = {"@revoked": "revoked", "@cert-authority": "CA"}.get(str(marker), str(marker)) if marker else "known"
        c.print(f"    {what}: " + safe(f"{k.get('file')}:{k.get('line')} {marker + ' ' if marker else ''}"
                                     f"{k.get('key_type')} {k.get('fingerprint')}"))  # fmt: skip
    known_hosts_warnings(offer.warnings)


def known_hosts_warnings(warnings: Any) -> None:
    """known_hosts lines OpenSSH skips (bad hash form, truncated key ...), once per file:line."""
    c = console()
    for w in warnings:
        c.print(f"[yellow]known_hosts warning:[/yellow] {safe(w)} (OpenSSH skips this line)", soft_wrap=True)


def ssh_settings(name: str, rows: list[tuple[str, str, str]]) -> None:
    """``orch hosts show``: one row per resolved SSH setting, with where it came from."""
    from rich.table import Table

    table = Table(title=f"{name}: as OpenSSH resolves it (ssh -G)")
    for col in ("setting", "value", "from"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(safe(x) for x in row))
    console().print(table)


def trust_result(host: str, result: Any) -> None:
    c = console()
    if result.removed:
        c.print(
            f"removed {result.removed} old entr{'y' if result.removed == 1 else 'ies'} for {safe(host)} "
            f"(backup: {safe(result.backup)})"
        )
    if result.recorded:
        c.print(f"[green]recorded[/green] {safe(host)}'s key in {safe(result.file)}")


# -- orch db / orch serve / orch runs (store views) ----------------------------------------------------------

# moe-sweep's table: (header, metric name); the metric names are those of analysis/enrich.py.
_MOE_COLUMNS = (
    ("median ms", "time_ms"),
    ("µs/token", "us_per_token"),
    ("GB/s", "gbps"),
    ("% of peak", "pct_peak"),
    ("% of roof", "pct_of_measured_roof"),
    ("TFLOP/s", "tflops"),
)


def _redact_url(url: str) -> str:
    from orchestrator.store.urls import redact_url

    return redact_url(url)


def _fmt(x: Any, digits: int = 3) -> str:
    """A numeric table cell: ``orchestrator.numfmt.number`` (>= ``digits`` significant figures, never a non-zero
    value shown as 0)."""
    return number(x, digits)


def _ratio(x: float | None) -> str:
    """head/base and its interval: 3 decimals (``1.001``), more when the value is small (``0.000400``)."""
    return number(x, 3, min_decimals=3)


def _when(dt: Any, *, short: bool = False) -> str:
    if dt is None:
        return "-"
    return str(dt.strftime("%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S"))


def db_upgraded(url: str, revision: str | None) -> None:
    console().print(f"database {safe(_redact_url(url))} is at revision {safe(revision or '-')} (head)")


def serving(host: str, port: int, db_url: str) -> None:
    shown = f"[{host}]" if ":" in host else host
    err_console().print(
        f"orch results API on http://{safe(shown)}:{port}/ (docs /docs) over {safe(_redact_url(db_url))}",
        soft_wrap=True,
    )


def runs_table(page: Any) -> None:
    """The runs list, fitted to the console (``fit.fitted_table``): id, suite, status, started and the counts are
    always shown; in a narrow terminal "by", then hosts, then the label are left out (named in the caption) rather
    than squeezed into a column a letter wide, and where even the columns always shown do not fit (60 columns)
    the runs are stacked, each id with every field under it (``fit.stacked_table``). Host names and ids are never
    broken. Below it, a warning for each
    run marked running whose orch process is gone (:func:`orphaned_note`), and how to collect or stop them."""
    from orchestrator.cli.fit import Col, print_fitted

    runs = page.items
    styles = {"completed": "green", "partial": "yellow", "failed": "red"}

    def status(s: str) -> str:
        style = styles.get(s)
        return f"[{style}]{s}[/{style}]" if style else safe(s)

    cols = [
        Col("id", [short_run_id(r.id) for r in runs]),
        Col("suite", [safe(r.suite) for r in runs]),
        Col("status", [status(r.status) for r in runs]),
        Col("label", [safe(r.label or "-") for r in runs], drop=1, wrap=True),
        Col("hosts", [safe(", ".join(r.hosts)) for r in runs], drop=2, wrap=True),
        Col("results", [str(r.results) for r in runs], justify="right"),
        Col("errors", [str(r.errors) for r in runs], justify="right"),
        Col("started UTC", [_when(r.started_at, short=True) for r in runs]),
        Col("by", [safe(r.started_by) for r in runs], drop=3, wrap=True),
    ]
    print_fitted(console(), f"Runs ({len(runs)} of {page.total})", cols)
    orphaned = [(r, note) for r in runs if (note := orphaned_note(r)) is not None]
    c = console()
    for _, (warning, _hint) in orphaned:
        c.print(f"[yellow]warning:[/yellow] {safe(warning)}", soft_wrap=True)
    if orphaned:
        ids = " ".join(short_run_id(r.id) for r, _ in orphaned)
        c.print(f"[yellow]hint:[/yellow] collect what their hosts hold: orch run --resume ID (for {safe(ids)}); or "
                "stop them: orch cancel ID", soft_wrap=True)  # fmt: skip


def _case_text(case: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return " ".join(f"{k}={v}" for k, v in case.items() if k not in skip)


NAME_LINE_CHARS = 12  # a metric name's header is broken at underscores into lines of about this many characters


def name_lines(name: str, width: int = NAME_LINE_CHARS) -> str:
    """A metric or parameter name as a column header: broken after underscores into lines of at most ``width``
    characters where it can be (``busbw_gbps_inplace`` -> ``busbw_gbps_`` / ``inplace``), never inside a word
    (rich folds a header with no space mid-word: ``busbw_gbps_inpla`` / ``ce``)."""
    lines: list[str] = []
    for part in name.replace("_", "_\n").split("\n"):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(lines)



PLATEAU_NOTE = (
    "plateau from M: the smallest M from which at least 90% of the routed experts are touched and the time per "
    "call stays within 10% of the plateau level (the time at the first M that touches every expert); "
    "compute-bound from M: the first larger M whose time is more than 10% above that level (docs/metrics.md)"
)


def _plateau_text(p: Any) -> str:
    if p is None:
        return "-"
    if p.plateau_from_m is None:
        return str(p.reason)
    bound = f"compute-bound from M={p.compute_bound_from_m}" if p.compute_bound_from_m else "no compute-bound rise"
    return f"plateau from M={p.plateau_from_m}, {bound}"


def orphaned_note(run: Any) -> tuple[str, str] | None:
    """``(warning, hint)`` for a run still ``pending``/``running`` whose controller (the orch process that drove
    it, ``info.controller``) is gone on this machine (``controller.gone``): nothing collects its results; None
    otherwise (finished, driven now, or driven from another machine)."""
    from orchestrator import controller

    if run.status not in ("pending", "running"):
        return None
    why = controller.gone(run.controller)
    if why is None:
        return None
    return (f"run {short_run_id(run.id)} is marked {run.status}, but {why}: nothing is collecting its results",
            f"collect what its hosts hold (their agents run on): orch run --resume {run.id}; or stop them: "
            f"orch cancel {run.id}")  # fmt: skip


def run_detail(run: Any, results: list[Any]) -> None:
    """``orch runs show``: the run, its hosts, then one results table per host (moe-sweep: with the plateau and
    the compute-bound start, defined in a footnote)."""

    from orchestrator.rundoc import host_plateau, host_status, result_warnings

    c = console()
    # header and summary lines: wrapped at words to the width (prose.say), a path or an id never broken
    say(c, f"[bold]run {short_run_id(run.id)}[/bold] ({safe(run.id)})  suite {safe(run.suite)}  "
           f"status {safe(run.status)}  label {safe(run.label or '-')}")  # fmt: skip
    say(c, f"started {_when(run.started_at)} UTC by {safe(run.started_by)}; finished {_when(run.finished_at)}")
    orphaned = orphaned_note(run)
    if orphaned is not None:
        say(c, f"[yellow]warning:[/yellow] {safe(orphaned[0])}")
        say(c, f"[yellow]hint:[/yellow] {safe(orphaned[1])}")
    from orchestrator.cli.asked import asked_line, preset_line

    say(c, safe(asked_line(run.params or {})) + "; " + safe(preset_line(run)))
    slurm = (run.info or {}).get("slurm")
    if isinstance(slurm, dict):
        reason = f", reason {slurm['reason']}" if slurm.get("reason") else ""
        say(c, f"slurm job {safe(str(slurm.get('job_id') or '-'))} (group {safe(str(slurm.get('group')))}): "
               f"{safe(str(slurm.get('state') or '-'))}{safe(reason)}")  # fmt: skip
    by_host: dict[str, list[Any]] = {}
    for r in results:
        by_host.setdefault(r.host, []).append(r)
    plateaus = {h.host: host_plateau(run.suite, by_host.get(h.host, [])) for h in run.host_runs}
    cols = ("host", "status", "results", "errors", "warnings", "GPU", "agent", "roof GB/s", "plateau M", "error")
    host_rows = []
    for h in run.host_runs:
        gpus = (h.facts or {}).get("gpus") or []
        gpu = gpus[0].get("name", "-") if gpus and isinstance(gpus[0], dict) else "-"
        p = plateaus.get(h.host)
        warned = sum(1 for r in by_host.get(h.host, []) if result_warnings(r))
        host_rows.append((
            safe(h.host), host_status(h.status, h.errors), str(h.results), str(h.errors),
            f"[yellow]{warned}[/yellow]" if warned else "0", safe(f"{gpu} x{len(gpus)}" if gpus else "-"),
            safe((h.agent_version or "-")[:12]), _fmt(h.measured_roof_gbps),
            _fmt(p.plateau_from_m if p else None), safe((h.error or "").splitlines()[-1] if h.error else ""),
        ))  # fmt: skip
    keep = ("host", "status", "results", "errors")
    _hosts_table(c, cols, host_rows, keep=keep)
    for h in run.host_runs:  # the errors of attempts a resume followed again: history, not the current status
        drops, first = (h.info or {}).get("reconnects"), (h.info or {}).get("first_drop")
        if isinstance(drops, int) and drops > 0 and isinstance(first, str):
            say(c, f"[dim]{safe(h.host)}: reconnected {drops} time(s): {safe(first, lines=True)}[/dim]")
        for e in h.earlier_errors:
            say(c, f"[dim]{safe(h.host)}: earlier attempt {safe(str(e.get('status')))}: "
                   f"{safe(str(e.get('error')), lines=True)}[/dim]")  # fmt: skip
    for host, rows in by_host.items():
        p = plateaus.get(host)
        title = safe(host) + (f" — {_plateau_text(p)}" if p is not None else "")
        if run.suite == "overheads":
            table = _items_table(title, rows)
        else:
            table = _moe_table(title, rows) if run.suite == "moe-sweep" else _generic_table(title, rows)
        # the title (host name first) wrapped at the console's width, not folded at the table's
        c.print(table.title, style="table.title")
        table.title = None
        c.print(table)
        if run.suite == "moe-sweep":
            for note in percent_reasons(host, run.host_run(host), rows):
                c.print(f"[dim]{safe(note, lines=True)}[/dim]")  # prose: wrapped at words, at the width
    run_conditions(run, results)
    for host, rows in by_host.items():
        noisy = noisy_cases(rows, ("time_ms",) if run.suite == "moe-sweep" else None)
        if noisy:
            shown = "; ".join(noisy[:8]) + (f"; and {counted(len(noisy) - 8, 'case')} more" if len(noisy) > 8 else "")
            c.print(f"[yellow]noisy:[/yellow] {safe(host)}: {safe(shown)} — {NOISY_NOTE}")
    if any(p is not None for p in plateaus.values()):
        c.print(f"[dim]{PLATEAU_NOTE}[/dim]")
    for host, rows in by_host.items():
        for r in rows:
            for w in result_warnings(r):
                say(c, f"[yellow]warning:[/yellow] {safe(host)} {safe(_case_text(r.case))}: {safe(w)}")


_HOSTS_DROP = {"warnings": 5, "GPU": 6, "plateau M": 7, "roof GB/s": 8, "agent": 9}
"""The order in which ``runs show``'s Hosts table leaves columns out when the terminal is too narrow (highest
first); the host name, its status and counts and a failed host's error are never left out."""


def _hosts_table(c: Any, cols: tuple[str, ...], rows: Sequence[tuple[str, ...]], *, keep: tuple[str, ...]) -> None:
    """``runs show``'s Hosts table laid out by ``fit.print_fitted``: columns whose every cell is empty or ``-``
    are left out (except ``keep``); host names, statuses, counts and ids are never broken; GPU wraps at words;
    the error (why a host failed) is always shown, folding a word too long for it (a path); what else does not
    fit is left out (``_HOSTS_DROP``) and named under the table."""
    from orchestrator.cli.fit import Col, print_fitted

    shown = [i for i, col in enumerate(cols) if col in keep or any(row[i] not in ("", "-") for row in rows)]
    columns = [Col(cols[i], [row[i] for row in rows], drop=_HOSTS_DROP.get(cols[i]), wrap=cols[i] in ("GPU", "error"),
                   fold=cols[i] == "error") for i in shown]  # fmt: skip
    # a host name too long for its status and counts beside it: stacked, each host's fields under its name
    print_fitted(c, "Hosts", columns)


def _items_table(title: str, rows: list[Any]) -> Any:
    """One row per metric (the overheads suite: one result holding every item), then the skipped items."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("item", "median", "p10", "p90", "unit"):
        t.add_column(col, justify="left" if col in ("item", "unit") else "right")
    for r in rows:
        if r.status != "ok":
            t.add_row("error", "-", "-", "-", red(r.error or '', lines=True))
            continue
        for name, m in r.metrics.items():
            t.add_row(safe(name), _fmt(m.get("median", m.get("value"))), _fmt(m.get("p10")), _fmt(m.get("p90")),
                      safe(m.get("unit", "")))  # fmt: skip
        for name, why in ((r.info or {}).get("skipped") or {}).items():
            t.add_row(safe(name), "skipped", "", "", safe(why))
    return t


def percent_reasons(host: str, host_run: Any, rows: list[Any]) -> list[str]:
    """Why moe-sweep's "% of peak" / "% of roof" columns are ``-`` on every row of a host (said once, with the
    command that fills the column), or nothing when some row has the figure."""
    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        return []
    notes = []
    if all("pct_peak" not in r.metrics for r in ok):
        gpus = ((host_run.facts if host_run is not None else None) or {}).get("gpus") or []
        name = gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None
        notes.append(
            f"% of peak is - : orch's GPU catalog (orchestrator/analysis/gpus.py) has no datasheet bandwidth for {name}"
            if name
            else "% of peak is - : the run used no GPU (a CPU device has no datasheet bandwidth in orch's catalog)"
        )
    if all(r.pct_of_measured_roof is None for r in ok):
        notes.append(
            f"% of roof is - : no hbm-bandwidth run on {host} yet; measure its copy roof with: "
            f"orch run hbm-bandwidth --hosts {host}"
        )
    elif host_run is not None and getattr(host_run, "roof_run_id", None):
        at = host_run.roof_measured_at
        when = f" of {at:%Y-%m-%d %H:%M} UTC" if at else ""
        notes.append(
            f"% of roof = gbps / {_fmt(host_run.measured_roof_gbps)} GB/s, the copy roof of hbm-bandwidth run "
            f"{short_run_id(host_run.roof_run_id)}{when}: {host}'s latest at the time you read this, which may have "
            "been measured after this run"
        )
    above = [r for r in ok if getattr(r, "roof_note", None)]
    if above:
        cases = ", ".join(f"M={r.m}" if r.m is not None else _case_text(r.case, ("seed",)) for r in above)
        from orchestrator.analysis.roof import cache_words

        device = next(((r.info or {}).get("device") for r in above if isinstance(r.info, dict)), None)
        notes.append(
            f"% of roof above 100 (marked cache) at {cases}: a cache-resident working set — the layer's weights stay "
            f"in {cache_words(device)} between calls, so these measure cache, not "
            f"{'DRAM' if device == 'cpu' else 'HBM'}, bandwidth (docs/metrics.md)"
        )
    return notes


def _roof_cell(r: Any) -> str:
    """A result's "% of roof", marked ``cache`` above 100 (``roof_note``: a cache-resident working set)."""
    return _fmt(r.pct_of_measured_roof) + (" [yellow]cache[/yellow]" if getattr(r, "roof_note", None) else "")


def _moe_table(title: str, rows: list[Any]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    t.add_column("M", justify="right")
    # a percent column no result has (a CPU run, no roof measured yet) is left out: the notes under the table say
    # why, and an 80-column terminal keeps the figures whole instead of cutting them (`172 (169–2…`)
    columns = [(h, n) for h, n in _MOE_COLUMNS if not n.startswith("pct") or any(_moe_value(r, n) for r in rows)]
    for header, name in columns:  # the spread wraps below the median when narrow, never cut
        t.add_column(header + (" (p10–p90)" if name == "time_ms" else ""), justify="right", overflow="fold")
    t.add_column("n", justify="right")
    t.add_column("case / error", overflow="fold")
    for r in sorted(rows, key=lambda r: (r.m is None, r.m or 0, r.seq)):
        if r.status != "ok":
            first = (r.error or "").strip().splitlines()[:1] or ["error"]  # the traceback stays in --json
            t.add_row(_fmt(r.m), *["-"] * (len(columns) + 1), red(first[0]))
            continue
        cells = []
        for _, name in columns:
            if name == "pct_of_measured_roof":
                cells.append(_roof_cell(r))
            elif name == "time_ms":
                cells.append(_with_spread(r.metrics.get(name) or {}))
            else:
                m = r.metrics.get(name) or {}
                cells.append(_fmt(m.get("median", m.get("value"))))
        t.add_row(_fmt(r.m), *cells, _fmt((r.metrics.get("time_ms") or {}).get("n")), "")
    return t


def _moe_value(r: Any, name: str) -> bool:
    """Whether result ``r`` has a figure for the moe-sweep column ``name`` (an ok row's metric or roof)."""
    if r.status != "ok":
        return False
    if name == "pct_of_measured_roof":
        return r.pct_of_measured_roof is not None
    m = r.metrics.get(name) or {}
    return m.get("median", m.get("value")) is not None


def _with_spread(m: dict[str, Any], unit: bool = False) -> str:
    """A metric's median with its p10–p90 range when the result has one: ``0.354 (0.351–0.360)``."""
    med, p10, p90 = m.get("median", m.get("value")), m.get("p10"), m.get("p90")
    if not (isinstance(med, (int, float)) and isinstance(p10, (int, float)) and isinstance(p90, (int, float))):
        return _fmt(med) + (f" {safe(m['unit'])}" if unit and m.get("unit") else "")
    digits = 3  # as many significant digits as it takes to tell apart the figures that differ (at most 6)
    while digits < 6 and any(
        a != b and _fmt(float(a), digits) == _fmt(float(b), digits) for a, b in ((med, p10), (med, p90))
    ):
        digits += 1
    text = f"{_fmt(float(med), digits)} ({_fmt(float(p10), digits)}–{_fmt(float(p90), digits)})"
    if unit and m.get("unit"):
        text += f" {safe(m['unit'])}"
    return text + (NOISY_MARK if is_wide(med, p10, p90) else "")


def noisy_cases(rows: list[Any], metrics: tuple[str, ...] | None = None) -> list[str]:
    """``M=1 time_ms 35%, gbps 34%``: per ok result, every metric whose p10–p90 spread is wider than
    ``WIDE_SPREAD`` of the median (``analysis.compare.is_wide``) — each one its table marks ``noisy`` — with the
    relative spread in percent. ``metrics``: the metrics whose cells carry the mark (moe-sweep's table shows a
    spread for time_ms only); None: every metric."""
    out = []
    for r in rows:
        if r.status != "ok":
            continue
        wide = []
        for name, m in (r.metrics or {}).items():
            if isinstance(m, dict) and (metrics is None or name in metrics):
                med, p10, p90 = m.get("median", m.get("value")), m.get("p10"), m.get("p90")
                if is_wide(med, p10, p90):
                    wide.append(f"{name} {(relative_spread(med, p10, p90) or 0.0) * 100:.0f}%")
        if wide:
            m_value = getattr(r, "m", None)
            case = f"M={m_value}" if m_value is not None else _case_text(r.case, ("seed",))
            out.append(f"{case} {', '.join(wide)}")
    return out


def _generic_table(title: str, rows: list[Any]) -> Any:
    """Results of any suite: the case parameters that vary as the first column (the constant ones once in the
    title), one column per metric, "% of roof" only when some row has it, references when a suite sets them."""
    from rich.table import Table

    names: list[str] = []
    for r in rows:
        names.extend(n for n in r.metrics if n not in names)
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r.case if k not in keys)
    constant = {k: rows[0].case.get(k) for k in keys if len({repr(r.case.get(k)) for r in rows}) == 1}
    varying = tuple(k for k in keys if k not in constant) or tuple(keys[:1])
    fixed = _case_text({k: v for k, v in constant.items() if k not in varying})
    t = Table(title=title + (f"\n[dim]{safe(fixed)}[/dim]" if fixed else ""), title_justify="left")
    t.add_column("case", overflow="fold")
    for n in names:
        t.add_column(safe(name_lines(n), lines=True), justify="right", overflow="fold")
    t.add_column("n", justify="right")
    with_roof = any(r.pct_of_measured_roof is not None for r in rows)
    if with_roof:
        t.add_column("% of roof", justify="right")
    with_refs = any(_references(r) for r in rows)
    if with_refs:
        t.add_column("references", overflow="fold")
    for r in rows:
        case = safe(_case_text({k: r.case.get(k) for k in varying}))
        extra = ([_roof_cell(r)] if with_roof else []) + ([_references_cell(r)] if with_refs else [])
        if r.status != "ok":
            first = (r.error or "").strip().splitlines()[:1] or ["error"]  # the traceback stays in --json
            t.add_row(case, red(first[0]), *["-"] * (len(names) + len(extra)))
            continue
        cells = [_with_spread(r.metrics[n], unit=True) if r.metrics.get(n) else "-" for n in names]
        t.add_row(case, *cells, _fmt(_samples(r)), *extra)
    return t


def _samples(r: Any) -> int | None:
    """The sample count of a result (``n`` of its metrics; the largest when they differ)."""
    counts = [m["n"] for m in r.metrics.values() if isinstance(m, dict) and isinstance(m.get("n"), int)]
    return max(counts) if counts else None


def _references(r: Any) -> dict[str, Any]:
    refs = (r.info or {}).get("references") if isinstance(r.info, dict) else None
    return refs if isinstance(refs, dict) else {}


def _references_cell(r: Any) -> str:
    """``pass`` or ``FAIL metric (value, want bound)`` for each reference a result was checked against."""
    refs = _references(r)
    if not refs:
        return "-"
    failed = [safe(f"{k} {_fmt(v.get('value'))}, want {v.get('bound')}") for k, v in refs.items() if not v.get("pass")]
    return "[green]pass[/green]" if not failed else "[red]FAIL " + "; ".join(failed) + "[/red]"


def split_case_params(
    cases: Sequence[dict[str, Any]], skip: tuple[str, ...] = ()
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The parameters every case shares (printed once above a table, as the dashboard does: "every case: E=16
    H=256 ...") and the names of those that vary (one cell per row); ``skip`` names neither. A single case
    keeps its parameters in its row."""
    keys: list[str] = []
    for case in cases:
        keys.extend(k for k in case if k not in keys and k not in skip)
    if len(cases) < 2:
        return {}, tuple(keys)
    common = {k: cases[0].get(k) for k in keys if all(k in c and c[k] == cases[0][k] for c in cases)}
    return common, tuple(k for k in keys if k not in common)


def comparison_table(cmp: Any) -> None:
    from orchestrator.cli.fit import Col, print_fitted

    unit = f" ({safe(cmp.unit)})" if cmp.unit else ""
    common, varying = split_case_params([x.case for x in cmp.cases], skip=("seed",))
    every = f"\n[dim]every case: {safe(_case_text(common))}[/dim]" if common else ""
    tested = any(getattr(x, "stats", None) is not None for x in cmp.cases)
    cells: dict[str, list[str]] = {k: [] for k in ("host", "case", "base", "head", "n", "ratio", "ci", "q", "verdict")}
    counted_n = any(getattr(x, "n_base", None) is not None or getattr(x, "n_head", None) is not None
                    for x in cmp.cases)  # fmt: skip
    for x in cmp.cases:
        verdict = _VERDICT_STYLE.get(x.verdict, "{}").format(x.verdict)
        if x.warnings:
            verdict += " [yellow](failed requests)[/yellow]"
        case = safe(_case_text({k: x.case.get(k) for k in varying if k in x.case}))
        ci, q = _stats_cells(x.stats) if tested else ("", "")
        for key, cell in (
            ("host", safe(x.host or "*")), ("case", case or "-"),
            ("base", _with_spread({"median": x.base, "p10": x.base_p10, "p90": x.base_p90})),
            ("head", _with_spread({"median": x.head, "p10": x.head_p10, "p90": x.head_p90})),
            ("n", _sample_counts_cell(x)), ("ratio", _ratio(x.ratio)), ("ci", ci), ("q", q), ("verdict", verdict),
        ):  # fmt: skip
            cells[key].append(cell)
    # the samples per side (n: base/head): once above the table when every case has the same, else a column
    n_column = counted_n and len(set(cells["n"])) > 1
    if counted_n and not n_column:
        nb, nh = cells["n"][0].split("/")
        every += f"\n[dim]samples per case: base {nb}, head {nh}[/dim]"
    # in a narrow terminal q, then the CI, then base and head go (the caption names them); a number is never split:
    # a value and its (p10–p90) wrap only at the space between them
    cols = [
        Col("host", cells["host"]), Col("case", cells["case"], wrap=True),
        Col("base (p10–p90)", cells["base"], drop=2, wrap=True, justify="right"),
        Col("head (p10–p90)", cells["head"], drop=2, wrap=True, justify="right"),
        *((Col("n", cells["n"], drop=1, justify="right"),) if n_column else ()),
        Col("head/base", cells["ratio"], justify="right"),
        *((Col("95% CI", cells["ci"], drop=3, justify="right"), Col("q", cells["q"], drop=4, justify="right"))
          if tested else ()),
        Col("verdict", cells["verdict"], wrap=True),
    ]  # fmt: skip
    c = console()
    print_fitted(c, f"{safe(cmp.metric)}{unit}: head {short_run_id(cmp.head)} / base {short_run_id(cmp.base)}{every}",
                 cols)  # fmt: skip
    gm = _ratio(cmp.geomean)
    c.print(
        f"geometric mean head/base: [bold]{gm}[/bold] over {counted(len(cmp.cases), 'case')}: "
        f"{verdict_summary(cmp.verdicts)} "
        f"(paired on {cmp.paired_on}); "
        f"only in base: {cmp.only_base}, only in head: {cmp.only_head}",
        soft_wrap=True,
    )
    if getattr(cmp, "wide_cases", 0):
        c.print(f"[yellow]{counted(cmp.wide_cases, 'case')} marked noisy:[/yellow] {NOISY_NOTE}", soft_wrap=True)
    if getattr(cmp, "noise_floor", None):
        c.print(noise_floor_line(cmp), soft_wrap=True)
    for x in cmp.cases:
        if x.warnings:
            where = f"{safe(x.host or '*')} {safe(_case_text(x.case, ('seed',)))}"
            c.print(f"[yellow]warning:[/yellow] {where}: {safe('; '.join(x.warnings))}", soft_wrap=True)


def _sample_counts_cell(x: Any) -> str:
    """``20/1``: the samples of base and of head of a compared case (``?`` for a side whose count is unknown)."""
    nb, nh = getattr(x, "n_base", None), getattr(x, "n_head", None)
    return f"{'?' if nb is None else nb}/{'?' if nh is None else nh}"


NOISY_MARK = " [yellow]noisy[/yellow]"
NOISY_NOTE = (
    "a p10–p90 spread wider than 20% of the median (docs/metrics.md, Noisy measurements): the figure is uncertain;"
    " rerun on a quieter host or with more --repeat"
)


def verdict_summary(counts: dict[str, int]) -> str:
    """``1 regression, 1 improvement, 5 within noise``: the comparison's verdict counts (those above 0), in the
    words of the table's verdict column."""
    shown = [f"{n} {v}" for v, n in counts.items() if n]
    return ", ".join(shown) if shown else "no verdicts"


def _stats_cells(st: Any) -> tuple[str, str]:
    """The 95% bootstrap interval of head/base and the BH q-value of a case's ``analysis.stats.CaseStats``."""
    if st is None or (st.ci_low is None and st.ci_high is None):
        return "-", "-"
    q = "-" if st.q_value is None else f"{st.q_value:.2g}"
    return ci_text(st.ci_low, st.ci_high), q


def ci_text(low: float | None, high: float | None) -> str:
    """``0.981–1.020``; an end that is not known (not finite: ``analysis.stats``) is ``?``."""
    return f"{'?' if low is None else _ratio(low)}–{'?' if high is None else _ratio(high)}"


def noise_floor_line(cmp: Any) -> str:
    """Under ``runs compare``/``runs check``: the calls, their false discovery rate and where the noise bands came
    from — saying so when no calibration exists."""
    floor = str(cmp.noise_floor)
    alpha = f" at FDR {cmp.alpha:g}" if cmp.alpha is not None else ""
    text = f"statistics: {cmp.slower} slower, {cmp.faster} faster{alpha}; noise floor from {safe(floor)}"
    if floor == "within-run samples only":
        text += " (no calibration stored for these cases: orch calibrate SUITE --hosts SEL)"
    return text


# a case is "within noise" when its p10-p90 ranges overlap or a side's spread exceeds the change (is_noisy);
# "noisy: not judged" when, besides, a side's band is too wide to judge by (analysis.compare.too_noisy)
_VERDICT_STYLE = {
    "regression": "[red]{}[/red]",
    "improvement": "[green]{}[/green]",
    "within noise": "[dim]{}[/dim]",
    "noisy: not judged": "[yellow]{}[/yellow]",
    "too few samples: not judged": "[yellow]{}[/yellow]",
}


class _NoProgress:
    """What ``RunProgress`` calls on rich's ``Progress``, drawing nothing (as ``Progress(disable=True)``)."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *args: object, **fields: object) -> int:
        return 0

    def update(self, *args: object, **fields: object) -> None:
        return None


class RunProgress:
    """The live display of ``orch run``: per host a bar of cases done of total, the current M, the state, and
    the elapsed time. Implements runner.Observer; draws nothing when disabled (``--json``, stderr not a terminal)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._tasks: dict[str, Any] = {}
        self._progress: Any = _NoProgress()
        if not enabled:  # rich's disabled Progress would draw nothing either; its import is ~10 ms of each run
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("[bold]{task.fields[host]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[case]}"),
            TextColumn("[dim]{task.fields[state]}"),
            TimeElapsedColumn(),
            console=err_console(),
            transient=True,  # cleared before the result tables are printed (stdout), so nothing lands after them
        )

    def __enter__(self) -> RunProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(None, None, None)

    def _task(self, host: str) -> Any:
        if host not in self._tasks:
            self._tasks[host] = self._progress.add_task(host, host=safe(host), case="", state="", total=None)
        return self._tasks[host]

    def host_state(self, host: str, state: str, detail: str = "") -> None:
        text = state + (f": {detail}" if detail else "")
        self._progress.update(self._task(host), state=safe(text[:80]))

    def case_progress(self, host: str, done: int, total: int | None, case: dict[str, Any] | None) -> None:
        shown = ""
        if case:
            shown = f"M={case['M']}" if "M" in case else _case_text(case)[:40]
        self._progress.update(self._task(host), completed=done, total=total, case=safe(shown))


def run_outcome(outcome: Any, run: Any, results: list[Any]) -> None:
    """After ``orch run``: the result table per host (as ``orch runs show``), failures with reasons, the id."""
    if results:
        run_detail(run, results)
    c = console()
    for h in outcome.hosts:
        if h.status not in ("completed",):
            colour = "yellow" if h.status == "partial" else "red"
            said = h.error or ""
            said = said[len(h.host) + 2 :] if said.startswith(f"{h.host}: ") else said  # named once, first
            err = f" — {safe(said, lines=True)}" if said else ""
            say(c, f"[{colour}]{safe(h.host)}: {h.status}[/{colour}]" + err)
            if getattr(h, "hint", None):
                say(c, f"    hint: {safe(h.hint, lines=True)}")
    dirs = [f"{safe(h.host)}: {safe(h.state_dir)}" for h in outcome.hosts if getattr(h, "state_dir", None)]
    if dirs:  # connection: local hosts too: say where the node-local state went (the inventory's orch_home:)
        say(c, "run state (spool, spec, outputs) on the hosts: " + ", ".join(dirs))
    if not outcome.run_id:
        say(c, f"[red]{NOTHING_STORED}[/red]")
        return
    colour = {"completed": "green", "partial": "yellow"}.get(outcome.status, "red")
    c.print(
        f"run [bold]{short_run_id(outcome.run_id)}[/bold] {safe(outcome.suite)}: "
        f"[{colour}]{outcome.status}[/{colour}] — "
        f"{counted(sum(h.results for h in outcome.hosts), 'result')} from {counted(len(outcome.hosts), 'host')}; "
        f"details: orch runs show {short_run_id(outcome.run_id)}"
    )


# When every host failed before starting (connect, host key, facts), no run is stored (README, What a run leaves).
NOTHING_STORED = "no run stored: every host failed before starting"


def deploy_table(report: Any) -> None:
    from rich.table import Table

    table = Table(title="orch deploy")
    for col in ("host", "agent", "build", "current", "uploaded", "error"):
        table.add_column(col)
    for r in report.rows:
        if r["ok"]:
            build = f"{r['build_sha'][:12]} {r['build']}" if r.get("build_sha") else "-"
            table.add_row(
                safe(r["host"]),
                safe(f"{r['agent_sha'][:12]} {r['agent']}"),
                safe(build),
                "switched" if r.get("switched") else "-",
                f"{number(r['uploaded_bytes'] / 1e6, min_decimals=2)} MB",
                "",
            )
        else:
            table.add_row(safe(r["host"]), "", "", "", "", red(r['error']))
    console().print(table)
    for r in report.rows:
        if not r["ok"] and r.get("hint"):
            console().print(f"[yellow]{safe(r['host'])} hint:[/yellow] {safe(r['hint'])}")


def interrupted(run_id: str, unconfirmed: Sequence[str] = ()) -> None:
    """Ctrl-C during ``orch run``: the remote agents were stopped (but on the ``unconfirmed`` hosts); say which run
    and that results are kept."""
    c = err_console()
    if run_id and unconfirmed:
        short = short_run_id(run_id)
        c.print(
            f"[yellow]interrupted:[/yellow] run {short} stored cancelled; the remote stop was not confirmed on "
            f"{', '.join(unconfirmed)}: run orch cancel {short}. The results ingested so far are kept"
        )
    elif run_id:
        c.print(
            f"[yellow]interrupted:[/yellow] run {short_run_id(run_id)} cancelled on its hosts; the results "
            f"ingested so far are kept (orch runs show {short_run_id(run_id)})"
        )
    else:
        c.print("[yellow]interrupted[/yellow] before the run started; nothing was stored")


def interrupt_said(run_id: str, action: str) -> None:
    """What a Ctrl-C during ``orch run`` does now (``resume.interrupt_action``): nothing is printed for the first
    (the cancel's end says it); the second is absorbed, the third stops waiting for the remote stops."""
    what = f"run {short_run_id(run_id)}" if run_id else "the run"
    if action == "absorb":
        err_console().print(f"[yellow]still stopping {what} on its hosts[/yellow]; Ctrl-C once more to stop "
                            "waiting (the run is stored cancelled either way)")  # fmt: skip
    elif action == "abandon":
        err_console().print(f"[yellow]no longer waiting[/yellow] for the remote stops of {what}")


def labelled(summary: Any) -> None:
    """``orch runs label``: the run and its new label."""
    label = safe(summary.label) if summary.label else "(none)"
    console().print(f"run {short_run_id(summary.id)} label: {label}", soft_wrap=True)


def runs_to_remove(runs: list[Any]) -> None:
    """``orch runs rm``: what is about to be deleted (stderr, so stdout stays for the result)."""
    c = err_console()
    for r in runs:
        results = sum(h.results for h in r.host_runs)
        c.print(
            f"run {short_run_id(r.id)} {safe(r.suite)} {r.status} label {safe(r.label or '-')}: "
            f"{counted(results, 'result')} on {counted(len(r.host_runs), 'host')}, started {_when(r.started_at)} UTC",
            soft_wrap=True,
        )


def removed(runs: list[Any]) -> None:
    console().print(f"deleted {counted(len(runs), 'run')}: " + ", ".join(short_run_id(r.id) for r in runs))


def nothing_removed(runs: list[Any]) -> None:
    """``orch runs rm`` answered no at its prompt: the runs are kept, said so."""
    kept = ", ".join(short_run_id(r.id) for r in runs)
    console().print(f"nothing removed: {counted(len(runs), 'run')} kept: {kept}")


def cancelled(outcome: Any) -> None:
    """``orch cancel``: which run, its status, and each host's end (a host whose agent had finished keeps its own)."""
    hosts = "; ".join(f"{safe(h.host)} {h.status}" + (f" ({counted(h.results, 'result')})" if h.results else "")
                      + (f": {safe(h.error)}" if h.error else "") for h in outcome.hosts)  # fmt: skip
    console().print(f"run {short_run_id(outcome.run_id)} {outcome.status}: {hosts}", soft_wrap=True)
    for h in outcome.hosts:
        if h.hint:
            console().print(f"  {safe(h.host)}: hint: {safe(h.hint)}", soft_wrap=True)

def projection(rec: Any) -> None:
    """``orch project``: the inputs and formula, the projected rows, and the check when there is one."""
    from rich.markup import escape
    from rich.table import Table

    c = console()
    inp, params = rec.inputs, rec.params
    src, tgt, b = inp["source"], inp["target"], inp["budget"]
    c.print(f"projection {rec.id}: run {rec.source_run_id} ({rec.source_gpu}, {rec.dtype}) -> {rec.target_gpu}")
    c.print(f"formula: {inp['formula']}")
    for side, sku in (("source", src), ("target", tgt)):
        c.print(
            f"{side} {sku['key']}: BW {_fmt(float(sku['bw_gbps']))} GB/s ({escape(sku['bw_source'])}); "
            f"P {_fmt(float(sku['peak_tflops']))} TFLOP/s ({escape(sku['peak_source'])})"
        )
    over = inp.get("overheads")
    c.print(
        f"budget: layers {b['layers']}, n_ar {b['allreduces_per_layer']} all-reduces/layer, n_k "
        f"{b['kernels_per_layer']} kernels/layer, s {b['overhead_scale']}; "
        + (
            f"overheads run {over['run_id']}: node {_fmt(float(over['node_us']))} µs, all-reduce "
            f"({over['allreduce_mode']}) " + (", ".join(f"M={m}: {_fmt(float(v))} µs" for m, v in
                                                        over["allreduce_us"].items()) or "not measured (one GPU)")
            if over
            else "no overheads run: budget 0"
        )
    )  # fmt: skip
    c.print(f"roof: {params.get('roof')}; all-reduce rows: {params.get('allreduce_mode')}")
    t = Table(title=f"{rec.source_gpu} -> {rec.target_gpu}", title_justify="left")
    for h in ("M", "source ms", "f_mem", "MoE ms", "all-reduce µs", "overhead ms", "step ms", "tokens/s",
              "overhead %"):  # fmt: skip
        t.add_column(h, justify="right")
    t.add_column("all-reduce from")
    for r in rec.rows["projected"]:
        t.add_row(
            str(r["M"]), _fmt(r["source_ms"]), _fmt(r["f_mem"]), _fmt(r["moe_ms"]), _fmt(r["allreduce_us"]),
            _fmt(r["overhead_ms"]), _fmt(r["step_ms"]), _fmt(r["tokens_per_s"]), _fmt(100 * r["overhead_share"]),
            r["allreduce_note"],
        )  # fmt: skip
    c.print(t)
    if rec.rows.get("checked"):
        ct = Table(title=f"check against run {rec.check_run_id}", title_justify="left")
        for h in ("M", "predicted ms", "measured ms", "error %"):
            ct.add_column(h, justify="right")
        for r in rec.rows["checked"]:
            ct.add_row(str(r["M"]), _fmt(r["predicted_ms"]), _fmt(r["measured_ms"]), number(r["error_pct"], sign=True))
        c.print(ct)


def import_outcome(o: Any) -> None:
    """After ``orch runs import``: what was stored, and the host's verdict."""
    colour = {"completed": "green", "partial": "yellow"}.get(o.status, "red")
    c = console()
    c.print(
        f"{escape(o.path)}: {counted(o.lines, 'line')}, {o.new_lines} newly stored, into run "
        f"[bold]{short_run_id(o.run_id)}[/bold] {escape(o.suite)} ({'new' if o.created_run else 'existing'}) "
        f"host {escape(o.host)}: [{colour}]{o.status}[/{colour}] — {counted(o.results, 'result')}, "
        f"{counted(o.errors, 'error')} stored; run {o.run_status}",
        soft_wrap=True,
    )
    if o.error:
        c.print(f"[{colour}]{escape(o.host)}: {escape(o.error)}[/{colour}]", soft_wrap=True)



def run_logs(run_id: str, hosts: list[Any]) -> None:
    """``orch runs logs``: per host, case and timed run, a header line (stream, bytes, sha256; a file changed on
    the host since its result was stored says so with the stored size and sha256) and the file as the tool wrote
    it; then, on stderr, one red line per case whose outputs are gone from the host and per changed file, and a
    host that could not answer. A pipe or file gets every output byte for byte (not UTF-8 included). On a
    terminal, control characters (the host's ANSI/OSC escapes, bidi overrides) are shown as escapes
    (:func:`visible`), and a file that is not UTF-8 is shown with U+FFFD for its undecodable bytes, under a line
    that says so and how to get the bytes."""
    from orchestrator.runlogs import file_bytes

    out = sys.stdout
    tty = out.isatty()
    buf = getattr(out, "buffer", None)

    def write(data: bytes) -> None:
        if buf is not None:
            out.flush()
            buf.write(data)
        else:  # a text-only stream (tests): what it can hold
            out.write(data.decode("utf-8", "replace"))

    for h in hosts:
        for c in h.cases:
            for r in c.get("runs", []):
                for stream in ("stdout", "stderr", "output"):
                    f = r.get(stream)
                    if not isinstance(f, dict):
                        continue
                    where = f"{h.host} case {c.get('case_index')} run {r.get('run')} {stream}"
                    stored = f.get("stored") if f.get("check") == "changed" else None
                    flag = (
                        f" CHANGED since stored ({stored.get('bytes')} bytes, sha256 {stored.get('sha256')})"
                        if isinstance(stored, dict)
                        else ""
                    )
                    header = f"==> {visible(where, lines=True) if tty else where} "
                    header += f"({f.get('bytes')} bytes, sha256 {f.get('sha256')}){flag} <==\n"
                    data = file_bytes(f)
                    if tty:
                        text = data.decode("utf-8", "replace")
                        if f.get("encoding") == "base64":
                            header += (
                                "(not UTF-8: shown with U+FFFD for undecodable bytes; the exact bytes: --output DIR "
                                "writes each file as it is, and --json's text is the file's base64)\n"
                            )
                        text = visible(text, lines=True)
                        out.write(header + (text if text.endswith("\n") or not text else text + "\n"))
                    else:
                        write(header.encode("utf-8") + data + (b"" if data.endswith(b"\n") or not data else b"\n"))
    out.flush()
    logs_problems(hosts)


def saved_logs(hosts: list[Any], paths: list[Any]) -> None:
    """``orch runs logs --output DIR``: one line per file written (its path), then :func:`logs_problems`."""
    c = console()
    for p in paths:
        c.print(escape(visible(str(p))), soft_wrap=True)
    c.print(f"{counted(len(paths), 'file')} written, byte for byte")
    logs_problems(hosts)


def logs_problems(hosts: list[Any]) -> None:
    """On stderr, in red: each host's lines about outputs gone from it or changed, and why a host could not answer."""
    err = err_console()
    for h in hosts:
        for line in getattr(h, "problems", None) or []:
            err.print(f"[red]{escape(h.host)} {escape(line)}[/red]", soft_wrap=True)
        if h.error:
            hint = f" ({escape(h.hint)})" if h.hint else ""
            err.print(f"[red]{escape(h.host)}: {escape(h.error)}[/red]{hint}", soft_wrap=True)


def run_conditions(run: Any, results: list[Any]) -> None:
    """Below ``runs show``: the fleet view the run started with, and the cases whose GPU telemetry saw throttling
    or another process on the GPU (``info.throttled`` / ``info.shared_gpu``, set by analysis/telemetry.py)."""
    from rich.markup import escape

    from orchestrator.fleet import describe

    c = console()
    fleet = (run.info or {}).get("fleet")
    if isinstance(fleet, dict):
        diffs = [d for d in fleet.get("differences") or [] if isinstance(d, dict)]
        if diffs:
            from orchestrator.fleet import Difference

            lines = describe([Difference(**{k: str(d.get(k, "")) for k in
                                            ("group", "field", "host", "value", "majority")}) for d in diffs])
            head = f"[yellow]fleet at start: {counted(len(diffs), 'difference')}[/yellow]"
            c.print(head + "\n  " + "\n  ".join(map(escape, lines)))
        else:
            c.print("fleet at start: hosts alike in every field within their groups")
    judged = [r for r in results if isinstance(r.info, dict) and r.info.get("throttled") is not None]
    flagged = [r for r in judged if r.info.get("throttled") or r.info.get("shared_gpu")]
    if judged:
        colour = "red" if flagged else "green"
        counts = f"{len(flagged)} of {counted(len(judged), 'case')}"
        c.print(f"[{colour}]GPU telemetry: {counts} throttled or sharing the GPU[/{colour}]")
    for r in flagged:
        what = "throttled" if r.info.get("throttled") else "shared GPU"
        say(c, f"  [red]{what}[/red] {escape(r.host)} {escape(_case_text(r.case))}: "
               f"{escape(str(r.info.get('throttle_reason') or ''))}")  # fmt: skip


def flagged_cases_note(cmp: Any, flagged: dict[str, list[Any]]) -> None:
    """Under ``runs compare``: which compared cases ran on a throttled or shared GPU, per run, so that a ratio is
    read knowing it."""
    from rich.markup import escape

    by_host = cmp.paired_on == "host+case"
    keys = {(c.host if by_host else None, c.case_key) for c in cmp.cases}
    c = console()
    for side, rid in (("base", cmp.base), ("head", cmp.head)):
        hits = [f for f in flagged.get(rid, []) if (f.host if by_host else None, f.case_key) in keys]
        if not hits:
            continue
        cases = counted(len(hits), "compared case")
        c.print(f"[yellow]{side} {escape(rid)}: {cases} ran on a throttled or shared GPU[/yellow]")
        for f in hits:
            c.print(f"  {escape(f.host)} {escape(_case_text(f.case))}: {escape(str(f.reason or ''))}", soft_wrap=True)


def plot_written(path: Any, views: Any, metrics: list[str]) -> None:
    """After ``orch runs plot``: the file and what it holds."""
    from rich.markup import escape

    runs = ", ".join(short_run_id(r.id) for r in views.runs)
    noun = "run" if len(views.runs) == 1 else "runs"
    console().print(f"wrote {escape(str(path))}: {escape(views.suite)} {escape(', '.join(metrics))} of {noun} "
                    f"{escape(runs)}", soft_wrap=True)  # fmt: skip


def plot_suite_not_loaded(suite: str, metrics: list[str]) -> None:
    """After ``orch runs plot`` of a suite this orch has no definition of (a user YAML suite whose file was not
    loaded): its declared ``plot:`` is unknown, so every stored metric was drawn — say so, on stderr."""
    err_console().print(
        f"[yellow]note[/yellow]: suite {escape(suite)!r} is not loaded (no suite file defining it under "
        f"--suite-dir or ORCH_SUITE_DIR), so its declared `plot:` is unknown and every stored metric was plotted: "
        f"{escape(', '.join(metrics))}; to plot what the suite declares, add --suite-dir DIR (the directory of "
        f"{escape(suite)}'s .yaml file)",
        soft_wrap=True,
    )
