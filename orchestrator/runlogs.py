"""``orch runs logs RUN [--host H] [--case N]`` and ``GET /api/v1/runs/{id}/logs``: the full outputs a ``command``
suite's runs kept on the hosts, fetched on demand.

A result line carries only excerpts, sizes and sha256 of each timed run's stdout, stderr and ``{output}`` file
(the agent's ``benches/command.py``); the whole files stay in ``<orch_home>/runs/<run_id>/<host>/outputs/`` on
the host. This connects to each host of the run (the deploy check finds the agent) and asks ``agent logs``
for them. A host that cannot be reached, or that no longer has the run (its files were removed), is reported
for that host; the others still answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.agentctl import run_opts
from orchestrator.deploy import deploy_host
from orchestrator.errors import OrchError, UsageError
from orchestrator.fanout import fanout
from orchestrator.inventory import Host, Inventory
from orchestrator.transport import open_transport

LOGS_TIMEOUT_S = 600.0


@dataclass
class HostLogs:
    """One host's kept outputs: ``cases`` as ``agent logs`` prints them (``[{"case_index", "runs": [{"run",
    "stdout"|"stderr"|"output": {"text", "bytes", "sha256"}}]}]``), or ``error`` (with ``hint``)."""

    host: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "cases": self.cases, "error": self.error, "hint": self.hint}


async def _host_logs(host: Host, run_id: str, case: int | None, timeout_s: float) -> HostLogs:
    t = await open_transport(host, timeout_s=timeout_s)
    try:
        dep = await deploy_host(t, host)
        argv = [host.interpreter, dep.agent_path, "logs", run_id, *run_opts(host)]
        if case is not None:
            argv += ["--case", str(case)]
        res = await t.run(argv, timeout_s=LOGS_TIMEOUT_S, check=False)
        try:
            doc = res.json_object()
        except ValueError as why:
            return HostLogs(host.name, error=str(why), hint=KEEPS_OUTPUTS)
        cases = doc.get("cases")
        return HostLogs(host.name, cases=cases if isinstance(cases, list) else [])
    finally:
        await t.close()


KEEPS_OUTPUTS = "the host keeps outputs only for command suites (YAML suites with a `command:`)"


def check_keeps_outputs(run_id: str, suite: str) -> None:
    """Raise UsageError when ``suite`` is a built-in suite that runs no command (moe-sweep, hbm, decode...):
    its hosts keep no outputs, so there is nothing to fetch. A suite orch does not know here (a YAML suite
    whose file is not loaded) is asked for: only its hosts know."""
    from orchestrator.store.compute import short_run_id
    from orchestrator.suites.registry import builtin_registry

    reg = builtin_registry()
    if suite in reg.names() and reg.get(suite).command is None:
        short = short_run_id(run_id)
        raise UsageError(
            f"run {short} ran the built-in suite {suite!r}, which runs no command: {KEEPS_OUTPUTS}",
            f"its results are in `orch runs show {short}` (`--json` for every field)",
        )


def check_case(run_id: str, case: int | None, totals: list[int | None]) -> None:
    """Raise UsageError when ``case`` is not an index of the run's cases: 0 to N-1, N the most cases a host of
    the run announced (``cases_total`` of its ``hello`` line; ``totals`` holds one per host asked). Nothing is
    checked when no host announced its count (the hosts then say which cases they kept)."""
    from orchestrator.store.compute import short_run_id
    from orchestrator.wording import counted

    known = [t for t in totals if t is not None]
    if case is None or not known or case < max(known):
        return
    n, short = max(known), short_run_id(run_id)
    valid = f"numbered 0 to {n - 1}" if n else "none to show"
    raise UsageError(
        f"--case {case} is out of range: run {short} has {counted(n, 'case')}, {valid}",
        f"pass --case 0 to {n - 1}, or leave --case out for every case" if n else f"see `orch runs show {short}`",
    )


async def fetch_logs(
    inventory: Inventory, run_id: str, run_hosts: list[str], *, host: str | None = None, case: int | None = None,
    timeout_s: float = 10.0, suite: str | None = None,
) -> list[HostLogs]:  # fmt: skip
    """The kept outputs of run ``run_id`` (whose hosts are ``run_hosts``, its suite ``suite``), from ``host`` or
    every host, for ``case`` (its index in the run) or every case. Raises UsageError for a host that is not in
    the run, or a suite that keeps no outputs (``check_keeps_outputs``), before connecting to any host."""
    if suite is not None:
        check_keeps_outputs(run_id, suite)
    names = run_hosts
    if host is not None:
        if host not in run_hosts:
            raise UsageError(f"host {host!r} is not part of run {run_id}", f"its hosts: {', '.join(run_hosts)}")
        names = [host]
    hosts = [inventory.host(n) for n in names]
    outs = await fanout(hosts, lambda h: _host_logs(h, run_id, case, timeout_s), deadline_s=LOGS_TIMEOUT_S + 60)
    result = []
    for o in outs:
        if o.value is not None:
            result.append(o.value)
        else:
            err: OrchError | None = o.error
            result.append(HostLogs(o.host.name, error=err.message if err else "failed", hint=err.hint if err else None))
    return result
