"""Human output for many hosts: each distinct finding printed once, with its host count and a folded host list
(``n[001-200]``, see :mod:`orchestrator.hostgroups`), failures first and ordered by how many hosts they hit.

Used by ``orch doctor``, ``orch deploy`` and ``orch run`` when more than :data:`FEW_HOSTS` hosts are selected and
``--all`` is not given; ``--json`` never changes. A host's own name, address and port in a message are written
``{host}``, ``{address}``, ``{port}`` so that the same failure on many hosts is one finding; printed, a value
shared by every host of the finding is filled back in, and the others read ``<host>``, ``<address>``, ``<port>``
with one line saying what they stand for.
"""

from __future__ import annotations

from typing import Any

from orchestrator.cli.render import console, safe
from orchestrator.hostgroups import fold, generalize, group_by
from orchestrator.numfmt import number
from orchestrator.store.compute import short_run_id
from orchestrator.wording import counted

FEW_HOSTS = 10
"""Up to this many hosts, commands print their per-host table (as with ``--all``)."""

_LABEL = {"fail": "[bold red]FAIL[/bold red]", "warn": "[yellow]warn[/yellow]", "ok": "[green]ok[/green]"}


def grouped(n_hosts: int, show_all: bool) -> bool:
    """Whether a command prints the grouped summary instead of its per-host table."""
    return not show_all and n_hosts > FEW_HOSTS


def _hosts(n: int) -> str:
    return f"{n} host" if n == 1 else f"{n} hosts"


_PLACEHOLDERS = {"host": "<host>", "address": "<address>", "port": "<port>"}
_MEANING = {"host": "name", "address": "address", "port": "SSH port"}


def fill(text: str, hosts: tuple[str, ...], where: dict[str, tuple[Any, Any]] | None = None) -> tuple[str, list[str]]:
    """``text`` (with ``{host}``/``{address}``/``{port}`` from :func:`~orchestrator.hostgroups.generalize`) as a
    person reads it: a placeholder whose value is the same on every host of the finding is filled in (one host:
    its name); otherwise it is written ``<host>``, ``<address>``, ``<port>``. Returns the text and the names of
    the placeholders left (for the one line that says what they stand for). ``where``: host -> (address, port)."""
    where = where or {}
    values = {
        "host": {hosts[0]} if len(hosts) == 1 else {None},
        "address": {where.get(h, (None, None))[0] for h in hosts},
        "port": {where.get(h, (None, None))[1] for h in hosts},
    }
    left = []
    for name, shown in _PLACEHOLDERS.items():
        token = "{" + name + "}"
        if token not in text:
            continue
        vals = values[name]
        if len(vals) == 1 and None not in vals:
            text = text.replace(token, str(next(iter(vals))))
        else:
            text = text.replace(token, shown)
            left.append(name)
    return text, left


def _finding(
    label: str,
    what: str,
    hosts: tuple[str, ...],
    detail: str,
    hint: str | None,
    where: dict[str, tuple[Any, Any]] | None = None,
) -> None:
    c = console()
    head = f"{_LABEL.get(label, label)} {what}".rstrip()
    c.print(f"{head} on {_hosts(len(hosts))}: {safe(fold(hosts))}", soft_wrap=True)
    left: list[str] = []
    if detail:  # "{host}: " in front says nothing once the hosts are listed above
        text, left = fill(detail.removeprefix("{host}: "), hosts, where)
        c.print("    " + safe(text, lines=True), soft_wrap=True)
    if hint:
        text, more = fill(hint, hosts, where)
        left += [m for m in more if m not in left]
        c.print("    hint: " + safe(text, lines=True), soft_wrap=True)
    if left:
        each = ", ".join(f"{_PLACEHOLDERS[n]} its {_MEANING[n]}" for n in _PLACEHOLDERS if n in left)
        c.print(f"    (on each host: {safe(each)}; --json or --all gives them per host)", soft_wrap=True)


def doctor_summary(report: Any) -> None:
    """``orch doctor`` on many hosts: a count line, every failing then warning (check, detail, hint) once with its
    hosts, the python/gpus facts of passing checks once per distinct text, known_hosts warnings, and the total."""
    from orchestrator.cli.render import known_hosts_warnings

    c = console()
    failed = [h.host for h in report.hosts if not h.ok]
    c.print(f"[bold]orch doctor[/bold]: {_hosts(len(report.hosts))}, {len(report.hosts) - len(failed)} passed, "
            f"{len(failed)} failed", soft_wrap=True)  # fmt: skip
    for status in ("fail", "warn", "ok"):
        pairs = []
        for h in report.hosts:
            for ch in h.checks:
                if ch.status != status or (status == "ok" and ch.name not in ("python", "gpus")):
                    continue
                if status == "ok" and ch.name == "python" and h.facts is None:
                    continue

                def gen(text: str | None, h: Any = h) -> str:
                    return generalize(text or "", host=h.host, address=h.address, port=h.port)

                pairs.append((h.host, (ch.name, gen(ch.detail), gen(ch.data.get("hint")) or None)))
        where = {h.host: (h.address, h.port) for h in report.hosts}
        for g in group_by(pairs):
            name, detail, hint = g.key
            _finding(status, name, g.hosts, detail, hint, where)
    hops = [(h.host, generalize(ch.detail, host=h.host, address=h.address, port=h.port))
            for h in report.hosts for ch in h.checks
            if ch.name == "hostkey" and ch.status == "ok" and ch.data.get("hops")]  # fmt: skip
    where = {h.host: (h.address, h.port) for h in report.hosts}
    for hop in group_by(hops):
        _finding("ok", "hostkey (through jump hosts)", hop.hosts, hop.key, None, where)
    known_hosts_warnings(getattr(report, "warnings", []))
    colour = "green" if not failed else "red"
    tail = f"; failed: {safe(fold(failed))}" if failed else ""
    c.print(f"[{colour}]{len(report.hosts) - len(failed)}/{len(report.hosts)} hosts passed[/{colour}]{tail}",
            soft_wrap=True)  # fmt: skip


def fleet_summary(view: Any, report: Any) -> None:
    """Under ``orch doctor``'s grouped output: per inventory group, each field where hosts differ (the majority
    value, then every other value once with its hosts), and the hosts not compared grouped by reason."""
    c = console()
    where = {h.host: (h.address, h.port) for h in report.hosts}
    for g in view.groups:
        if not g.hosts and not g.unreachable:
            continue
        if not g.differences:
            c.print(f"fleet {safe(g.group)}: {_hosts(len(g.hosts))} alike in every field", soft_wrap=True)
        fields = dict.fromkeys(d.field for d in g.differences)
        for f in fields:
            others = group_by((d.host, d.value) for d in g.differences if d.field == f)
            c.print(
                f"fleet {safe(g.group)}: [red]{safe(f)} differs[/red]: majority {safe(g.majority.get(f, '-'))}; "
                + "; ".join(f"{safe(o.key)} on {_hosts(o.count)}: {safe(o.hostlist)}" for o in others),
                soft_wrap=True,
            )
        lost = []
        for h, why in g.unreachable.items():
            address, port = where.get(h, (None, None))
            lost.append((h, generalize(why, host=h, address=address, port=port)))
        for u in group_by(lost):
            why, _ = fill(u.key, u.hosts, where)  # the doctor findings above say what a <placeholder> stands for
            c.print(f"[yellow]fleet {safe(g.group)}: not compared on {_hosts(u.count)}: {safe(u.hostlist)}[/yellow]"
                    f" ({safe(why)})", soft_wrap=True)  # fmt: skip


def deploy_summary(report: Any) -> None:
    """``orch deploy`` on many hosts: failures (error, hint) once with their hosts, most hosts first, then the
    deployed agent/build (what each host got) once per distinct outcome, and the total."""
    c = console()
    rows = report.rows
    bad = [r for r in rows if not r["ok"]]
    c.print(f"[bold]orch deploy[/bold]: {_hosts(len(rows))}, {len(rows) - len(bad)} ok, {len(bad)} failed",
            soft_wrap=True)  # fmt: skip
    for g in group_by(
        (r["host"], (generalize(str(r["error"]), host=r["host"]), generalize(r.get("hint") or "", host=r["host"])))
        for r in bad
    ):
        _finding("fail", "", g.hosts, g.key[0], g.key[1] or None)
    good = []
    for r in rows:
        if r["ok"]:
            build = f"build {r['build_sha'][:12]} {r['build']}" if r.get("build_sha") else "no build"
            switched = "; switched" if r.get("switched") else ""
            mb = number(r["uploaded_bytes"] / 1e6, min_decimals=2)
            text = f"agent {r['agent_sha'][:12]} {r['agent']}; {build}{switched}; {mb} MB"
            text += " uploaded"
            good.append((r["host"], text))
    for ok_group in group_by(good):
        _finding("ok", "", ok_group.hosts, ok_group.key, None)


def run_summary(outcome: Any) -> None:
    """``orch run`` on many hosts: the hosts per status (and error, hint) once, most hosts first, where the run
    state went, and the run line; the per-host result tables are in ``orch runs show ID``."""
    c = console()
    style = {"completed": "ok", "partial": "warn"}
    for g in group_by(
        (h.host, (h.status, generalize(h.error or "", host=h.host), generalize(h.hint or "", host=h.host)))
        for h in outcome.hosts
    ):
        status, error, hint = g.key
        members = set(g.hosts)
        results = sum(h.results for h in outcome.hosts if h.host in members)
        label = style.get(status, "fail")
        _finding(label, f"{status} ({counted(results, 'result')})", g.hosts, error, hint or None)
    dirs = group_by((h.host, generalize(h.state_dir, host=h.host)) for h in outcome.hosts if h.state_dir)
    for d in dirs:
        c.print(f"run state on {_hosts(d.count)} ({safe(fold(d.hosts))}): {safe(d.key)}", soft_wrap=True)
    if not outcome.run_id:
        from orchestrator.cli.render import NOTHING_STORED

        c.print(f"[red]{NOTHING_STORED}[/red]", soft_wrap=True)
        return
    colour = {"completed": "green", "partial": "yellow"}.get(outcome.status, "red")
    c.print(
        f"run [bold]{short_run_id(outcome.run_id)}[/bold] {safe(outcome.suite)}: "
        f"[{colour}]{outcome.status}[/{colour}] — "
        f"{counted(sum(h.results for h in outcome.hosts), 'result')} from {_hosts(len(outcome.hosts))}; "
        f"details: orch runs show {short_run_id(outcome.run_id)}",
        soft_wrap=True,
    )
