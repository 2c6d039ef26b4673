"""All rich output of the CLI: consoles, the error line, and tables built from service return values."""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any

from rich.console import Console

from orchestrator.errors import OrchError


@cache
def console() -> Console:
    return Console(highlight=False)


@cache
def err_console() -> Console:
    return Console(stderr=True, highlight=False)


def error(exc: OrchError) -> None:
    """Print an expected failure as a red line plus its hint (stderr)."""
    c = err_console()
    c.print(f"[bold red]error:[/bold red] {exc.message}", markup=True, soft_wrap=True)
    if exc.hint:
        c.print(f"[yellow]hint:[/yellow] {exc.hint}", soft_wrap=True)


def print_json(doc: Any) -> None:
    """``--json``: one JSON document on stdout and nothing else there."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()


_STATUS_STYLE = {"ok": "[green]ok[/green]", "warn": "[yellow]warn[/yellow]", "fail": "[bold red]FAIL[/bold red]",
                 "skipped": "[dim]-[/dim]"}


def doctor_table(report: Any) -> None:
    """One row per host, one column per check; failures and warnings explained below the table."""
    from rich.table import Table

    from orchestrator.doctor import CHECK_NAMES

    table = Table(title="orch doctor", show_lines=False)
    table.add_column("host", style="bold")
    table.add_column("address")
    for name in CHECK_NAMES:
        table.add_column(name, justify="center")
    notes: list[str] = []
    for h in report.hosts:
        by_name = {c.name: c for c in h.checks}
        row = [h.host, f"{h.address or '-'}:{h.port or '-'}" if h.port else (h.address or "local")]
        for name in CHECK_NAMES:
            c = by_name.get(name)
            row.append(_STATUS_STYLE.get(c.status, c.status) if c else "")
            if c and c.status in ("fail", "warn"):
                hint = c.data.get("hint")
                colour = "red" if c.status == "fail" else "yellow"
                notes.append(f"[{colour}]{h.host} {name}:[/{colour}] {c.detail}" + (f"\n    hint: {hint}" if hint else ""))
        table.add_row(*row)
    c = console()
    c.print(table)
    for h in report.hosts:
        if h.facts is not None:
            details = [ch.detail for ch in h.checks if ch.name in ("python", "gpus") and ch.status == "ok"]
            if details:
                c.print(f"[bold]{h.host}[/bold]: " + "; ".join(details))
    for n in notes:
        c.print(n, soft_wrap=True)
    passed = sum(1 for h in report.hosts if h.ok)
    colour = "green" if passed == len(report.hosts) else "red"
    c.print(f"[{colour}]{passed}/{len(report.hosts)} hosts passed[/{colour}]")


def hosts_table(hosts: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="inventory")
    for col in ("host", "group", "connection", "address", "port", "user", "python", "labels"):
        table.add_column(col)
    for h in hosts:
        table.add_row(h.name, h.group, h.connection, h.address or "(ssh_config/DNS)", str(h.port or "-"),
                      h.user or "-", h.python or "-", ",".join(f"{k}={v}" for k, v in h.labels.items()))
    console().print(table)


def _param_value(v: Any) -> str:
    """A parameter value as ``--set`` would take it; doubling lists of 4+ items shortened to ``A..B``."""
    if isinstance(v, list):
        if len(v) >= 4 and all(isinstance(x, int) for x in v) and all(b == 2 * a for a, b in zip(v, v[1:], strict=False)):
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
    for r in rows:
        table.add_row(r["name"], r["bench"], r["description"])
    console().print(table)


def suite_detail(doc: dict[str, Any]) -> None:
    """``orch suites show``: a suite's ``SuiteDef.describe()`` as a header, a parameter table and presets."""
    from rich.table import Table

    c = console()
    c.print(f"[bold]{doc['name']}[/bold] (bench {doc['bench']}): {doc['description']}", soft_wrap=True)
    if doc.get("sweep"):
        c.print(f"sweep axis: {doc['sweep']} (one case per value)")
    params = Table(title="Parameters (--set KEY=VALUE)", title_justify="left")
    for col in ("key", "type", "default", "accepted", "scope", "help"):
        params.add_column(col, overflow="fold")
    for p in doc["params"]:
        accepted = [", ".join(p["choices"])] if p["choices"] else []
        if p["min"] is not None:
            accepted.append(f">= {p['min']:g}")
        if p["max"] is not None:
            accepted.append(f"<= {p['max']:g}")
        params.add_row(
            p["name"], p["type"], _param_value(p["default"]), " ".join(accepted), p["scope"], p["help"]
        )
    c.print(params)
    if doc["presets"]:
        presets = Table(title="Presets (--preset NAME)", title_justify="left")
        for col in ("preset", "description", "values"):
            presets.add_column(col, overflow="fold")
        for pr in doc["presets"]:
            values = " ".join(f"{k}={_param_value(v)}" for k, v in pr["values"].items())
            presets.add_row(pr["name"], pr["description"], values)
        c.print(presets)
        d = doc["default_preset"]
        c.print(f"default preset: {d['cuda'] or '-'} on a CUDA host, {d['cpu'] or '-'} without CUDA")


def trust_offer(offer: Any) -> None:
    c = console()
    c.print(f"[bold]{offer.host}[/bold] ({offer.hostname}:{offer.port}) offers a {offer.key_type} key")
    c.print(f"  fingerprint: [bold]{offer.fingerprint}[/bold]")
    c.print(f"  known_hosts verdict: {offer.verdict.verdict} — {offer.verdict.detail}")
    for k in offer.verdict.known:
        c.print(f"    known: {k.get('file')}:{k.get('line')} {k.get('key_type')} {k.get('fingerprint')}")


def trust_result(host: str, result: Any) -> None:
    c = console()
    if result.removed:
        c.print(f"removed {result.removed} old entr{'y' if result.removed == 1 else 'ies'} for {host} "
                f"(backup: {result.backup})")
    if result.recorded:
        c.print(f"[green]recorded[/green] {host}'s key in {result.file}")


def _param_value(v: Any) -> str:
    """A parameter value as ``--set`` would take it; doubling lists of 4+ items shortened to ``A..B``."""
    if isinstance(v, list):
        if len(v) >= 4 and all(isinstance(x, int) for x in v) and all(b == 2 * a for a, b in zip(v, v[1:], strict=False)):
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
    for r in rows:
        table.add_row(r["name"], r["bench"], r["description"])
    console().print(table)


def suite_detail(doc: dict[str, Any]) -> None:
    """``orch suites show``: a suite's ``SuiteDef.describe()`` as a header, a parameter table and presets."""
    from rich.table import Table

    c = console()
    c.print(f"[bold]{doc['name']}[/bold] (bench {doc['bench']}): {doc['description']}", soft_wrap=True)
    if doc.get("sweep"):
        c.print(f"sweep axis: {doc['sweep']} (one case per value)")
    params = Table(title="Parameters (--set KEY=VALUE)", title_justify="left")
    for col in ("key", "type", "default", "accepted", "scope", "help"):
        params.add_column(col, overflow="fold")
    for p in doc["params"]:
        accepted = [", ".join(p["choices"])] if p["choices"] else []
        if p["min"] is not None:
            accepted.append(f">= {p['min']:g}")
        if p["max"] is not None:
            accepted.append(f"<= {p['max']:g}")
        params.add_row(
            p["name"], p["type"], _param_value(p["default"]), " ".join(accepted), p["scope"], p["help"]
        )
    c.print(params)
    if doc["presets"]:
        presets = Table(title="Presets (--preset NAME)", title_justify="left")
        for col in ("preset", "description", "values"):
            presets.add_column(col, overflow="fold")
        for pr in doc["presets"]:
            values = " ".join(f"{k}={_param_value(v)}" for k, v in pr["values"].items())
            presets.add_row(pr["name"], pr["description"], values)
        c.print(presets)
        d = doc["default_preset"]
        c.print(f"default preset: {d['cuda'] or '-'} on a CUDA host, {d['cpu'] or '-'} without CUDA")
