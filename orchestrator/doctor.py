"""``orch doctor``: per host, every check from DNS to the deployed agent; returns a DoctorReport, never prints.

One SSH connection per host; the remote facts (python, torch/CUDA, nvidia-smi, disk, deployed agent/builds)
come back in ONE round trip: the agent's self-contained ``sysinfo.py`` run as ``PYTHON -c SOURCE --json``
under the host's configured interpreter.

Check names and order: dns, tcp, banner, hostkey, auth, python, gpus, disk, agent. Statuses: ok, warn, fail,
skipped. A host passes when no check failed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import OrchError
from orchestrator.facts import gpus_from_facts, read_nvidia_smi
from orchestrator.fanout import fanout
from orchestrator.hostkeys import KnownHostsWarning
from orchestrator.inventory import Host, Inventory
from orchestrator.leases import lease_summary
from orchestrator.numfmt import number
from orchestrator.transport import open_transport
from orchestrator.transport.base import Transport
from orchestrator.transport.sshconfig import SshResolver, ssh_binary

CHECK_NAMES = ("dns", "tcp", "banner", "hostkey", "auth", "python", "gpus", "disk", "agent")
DISK_WARN_BYTES = 20 * 10**9  # a kimi-k2-class engine build plus spooled runs needs tens of GB
DISK_FAIL_BYTES = 1 * 10**9


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | skipped
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.data, "name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class HostReport:
    host: str
    address: str | None
    port: int | None
    checks: list[Check]
    facts: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "address": self.address,
            "port": self.port,
            "ok": self.ok,
            "checks": [c.to_dict() for c in self.checks],
        }


@dataclass
class DoctorReport:
    """Every host's checks, and the known_hosts lines OpenSSH would skip (once per file:line)."""

    hosts: list[HostReport]
    warnings: list[KnownHostsWarning] = field(default_factory=list)
    columns: tuple[str, ...] = CHECK_NAMES  # the checks a table shows (a Slurm group adds slurm/partition/node)

    @property
    def ok(self) -> bool:
        return all(h.ok for h in self.hosts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": [h.to_dict() for h in self.hosts],
            "warnings": [{"file": w.file, "line": w.line, "message": w.message} for w in self.warnings],
        }


@dataclass(frozen=True)
class DoctorOptions:
    timeout_s: float = 10.0  # per step (dns, tcp, banner) and for the login; the facts probe gets 6x
    concurrency: int = 64
    local_agent_sha: str | None = None
    probe_nodes: bool = False  # a Slurm group: gather the facts of every usable node with a short job


def probe_argv(host: Host) -> list[str]:
    """The one remote command doctor runs: sysinfo.py's source under the host's interpreter."""
    from orchestrator.agent_build import sysinfo_source

    return [host.interpreter, "-c", sysinfo_source(), "--json",
            *(["--orch-home", host.orch_home] if host.orch_home else [])]  # fmt: skip


async def check_host(host: Host, opts: DoctorOptions, resolver: SshResolver | None = None) -> HostReport:
    checks: list[Check] = []
    address, port = host.address, host.port
    transport: Transport | None = None
    if host.connection == "local":
        for name in ("dns", "tcp", "banner", "hostkey", "auth"):
            checks.append(Check(name, "skipped", "connection: local"))
        transport = await open_transport(host, timeout_s=opts.timeout_s)
    else:
        from orchestrator.transport import ssh

        trace = ssh.ConnectTrace()
        try:
            transport = await open_transport(host, timeout_s=opts.timeout_s, trace=trace, resolver=resolver)
        except OrchError as exc:
            failure: OrchError | None = exc
        else:
            failure = None
        if trace.settings is not None:
            address, port = trace.settings.hostname, trace.settings.port
        for name in ("dns", "tcp", "banner", "hostkey", "auth"):
            step = trace.steps.get(name)
            if step is not None:
                checks.append(Check(name, step.status, step.detail, dict(step.data)))
            elif failure is not None and not any(c.status == "fail" for c in checks):
                checks.append(Check(name, "fail", failure.message, {"hint": failure.hint} if failure.hint else {}))
            else:
                checks.append(Check(name, "skipped", "an earlier check failed"))
        if failure is not None:
            _add_hint(checks, failure)
    if transport is None:
        checks += [Check(n, "skipped", "not connected") for n in ("python", "gpus", "disk", "agent")]
        return HostReport(host.name, address, port, checks)
    try:
        facts, remote_checks = await _remote_checks(host, transport, opts)
    finally:
        await transport.close()
    checks += remote_checks
    return HostReport(host.name, address, port, checks, facts)


def _add_hint(checks: list[Check], failure: OrchError) -> None:
    for c in checks:
        if c.status == "fail" and failure.hint and "hint" not in c.data:
            c.data["hint"] = failure.hint
            return


async def _remote_checks(
    host: Host, transport: Transport, opts: DoctorOptions
) -> tuple[dict[str, Any] | None, list[Check]]:
    python = host.interpreter
    try:
        res = await transport.run(probe_argv(host), timeout_s=opts.timeout_s * 6, check=False)
    except OrchError as exc:
        return None, [Check("python", "fail", exc.message)] + [
            Check(n, "skipped", "the facts probe failed") for n in ("gpus", "disk", "agent")
        ]
    if res.exit_status != 0:
        err = res.stderr.strip().splitlines()[-1:] or ["(no output)"]
        missing = res.exit_status == 127 or "not found" in err[0] or "No such file" in err[0]
        detail = (
            f"{python}: not found on the host" if missing else f"{python} failed (exit {res.exit_status}): {err[0]}"
        )
        return None, [
            Check(
                "python",
                "fail",
                detail,
                {"hint": "set `python:` for this host in the inventory to an existing Python 3.8+ interpreter"},
            )
        ] + [Check(n, "skipped", "no facts: the python check failed") for n in ("gpus", "disk", "agent")]
    try:
        facts = json.loads(res.stdout)
        if not isinstance(facts, dict):
            raise ValueError("not an object")
    except ValueError:
        return None, [
            Check("python", "fail", f"{python} printed something other than the facts JSON: {res.stdout[:120]!r}")
        ] + [Check(n, "skipped", "no facts") for n in ("gpus", "disk", "agent")]
    return facts, [
        python_check(facts, python),
        _with_leases(gpus_check(facts), facts),
        disk_check(facts),
        agent_check(facts, opts.local_agent_sha),
    ]


def python_check(facts: dict[str, Any], python: str) -> Check:
    """ok: torch imports (and sees CUDA where nvidia-smi sees GPUs); fail: no torch, or GPUs torch can't see."""
    py = facts.get("python") or {}
    torch = facts.get("torch") or {}
    version = str(py.get("version", "?")).split()[0]
    data: dict[str, Any] = {
        "interpreter": python,
        "executable": py.get("executable"),
        "version": version,
        "torch": torch.get("version"),
        "cuda_available": bool(torch.get("cuda_available")),
        "cuda_version": torch.get("cuda_version"),
    }
    gpus = gpus_from_facts(facts)
    if not torch.get("ok"):
        err = torch.get("error") or "torch did not import"
        data["hint"] = (
            f"`{python}` cannot import torch; set `python:` in the inventory for this host to the "
            "interpreter that has torch (e.g. python: /opt/torch/.venv/bin/python3)"
        )
        return Check("python", "fail", f"Python {version} at {py.get('executable', python)}: {err}", data)
    if gpus and not torch.get("cuda_available"):
        data["hint"] = "install a CUDA build of torch in that interpreter, or point `python:` at one"
        return Check(
            "python",
            "fail",
            f"Python {version}, torch {torch.get('version')} does not see CUDA "
            f"although nvidia-smi lists {len(gpus)} GPU(s)",
            data,
        )
    cuda = (
        f"CUDA {torch.get('cuda_version')}, {torch.get('device_count')} device(s)"
        if torch.get("cuda_available")
        else "CPU only"
    )
    return Check("python", "ok", f"Python {version}, torch {torch.get('version')} ({cuda})", data)


def gpus_check(facts: dict[str, Any]) -> Check:
    """The GPUs nvidia-smi lists, whatever its exit status. ok: rows and nothing else; warn: no nvidia-smi, no row,
    or rows with a non-zero exit or warning lines (shown next to the GPUs, all of them in ``warnings``); fail:
    nvidia-smi failed without a row (the whole error text in the detail). Never raises."""
    smi = read_nvidia_smi(facts)
    if not smi.found:
        return Check("gpus", "warn", "no GPU: nvidia-smi not found on the host", {"count": 0, "gpus": []})
    # count None when nvidia-smi failed without a row: how many GPUs the host has is not known, not 0
    data: dict[str, Any] = {"count": None if smi.failed else len(smi.gpus), "gpus": [g.to_dict() for g in smi.gpus]}
    if smi.warnings:
        data["warnings"] = smi.warnings
    if smi.exit_status is not None:
        data["exit_status"] = smi.exit_status
    said = "; ".join(smi.warnings)
    if smi.failed:
        status = f"exit {smi.exit_status}" if smi.exit_status is not None else "did not finish"
        data["error"] = smi.error
        data["hint"] = "check the NVIDIA driver on the host (dmesg, nvidia-smi)"
        return Check("gpus", "fail", f"nvidia-smi failed ({status}): " + "; ".join(str(smi.error).splitlines()), data)
    if not smi.gpus:
        return Check("gpus", "warn", "no GPU: nvidia-smi lists none" + (f"; it said: {said}" if said else ""), data)
    names = sorted({g.name for g in smi.gpus})
    mem = smi.gpus[0].memory_mib
    detail = (
        f"{len(smi.gpus)}x {', '.join(names)}"
        + (f", {mem} MiB each" if mem else "")
        + f", driver {smi.gpus[0].driver_version}"
    )
    if smi.exit_status != 0 or smi.warnings:
        exit_text = f"nvidia-smi exit {smi.exit_status}" if smi.exit_status != 0 else "nvidia-smi"
        return Check("gpus", "warn", f"{detail}; {exit_text}: {said or 'no message'}", data)
    return Check("gpus", "ok", detail, data)


def _with_leases(check: Check, facts: dict[str, Any]) -> Check:
    """The gpus check with the node's GPU leases (held by a running benchmark, or stale) added; a stale one warns."""
    text, data, stale = lease_summary(facts)
    status = "warn" if stale and check.status == "ok" else check.status
    return Check(check.name, status, f"{check.detail}; {text}" if text else check.detail, {**check.data, **data})


def disk_check(facts: dict[str, Any]) -> Check:
    """Free space where orch_home is (the agent's ``disk`` facts: orch_home or its nearest existing parent). fail:
    under ``DISK_FAIL_BYTES``, or that path is not a directory (a regular file, a FIFO: the run state cannot go
    there); warn: under ``DISK_WARN_BYTES`` or unknown."""
    disk = facts.get("disk") or {}
    kind, path, home = disk.get("kind"), disk.get("path"), disk.get("home")
    if kind in ("file", "other"):
        what = "a file" if kind == "file" else "a FIFO, a device or a socket"
        below = f", so orch_home {home} cannot be made" if home and home != path else ""
        return Check("disk", "fail", f"{path} is {what}, not a directory{below}: the run state cannot go there",
                     {"path": path, "home": home, "kind": kind,
                      "hint": f"remove or move {path} on the host, or point the host's orch_home: in the inventory "
                              "at a directory (an absolute path or ~/...)"})  # fmt: skip
    free = disk.get("free_bytes")
    if not isinstance(free, int):
        return Check("disk", "warn", "free space unknown", {})
    data = {"path": disk.get("path"), "free_bytes": free, "total_bytes": disk.get("total_bytes")}
    text = f"{number(free / 1e9, min_decimals=1)} GB free at {disk.get('path')}"
    if free < DISK_FAIL_BYTES:
        return Check("disk", "fail", text, {**data, "hint": "free space on the host before deploying"})
    if free < DISK_WARN_BYTES:
        return Check("disk", "warn", text + " (under 20 GB)", data)
    return Check("disk", "ok", text, data)


def agent_check(facts: dict[str, Any], local_sha: str | None) -> Check:
    orch = facts.get("orch") or {}
    agents = list(orch.get("agents") or [])
    current = orch.get("current_build")
    data = {"agents": agents, "builds": list(orch.get("builds") or []), "current_build": current}
    build = f"; build {current[:12]}" if current else "; no engine build deployed"
    if not agents:
        return Check("agent", "ok", "no agent deployed yet (orch deploy / orch run installs it)" + build, data)
    if local_sha and local_sha not in agents:
        return Check(
            "agent",
            "warn",
            f"deployed agent(s) {', '.join(a[:12] for a in agents)} differ from this "
            f"orch's {local_sha[:12]}; orch deploy updates it" + build,
            data,
        )
    shown = local_sha[:12] if local_sha else agents[-1][:12]
    return Check("agent", "ok", f"agent {shown} deployed" + build, data)


async def run_doctor(inventory: Inventory, selector: str | None, opts: DoctorOptions) -> DoctorReport:
    """Check every selected host concurrently. Raises SelectionError for a bad selector; never raises for a host.
    A Slurm group is checked through its login node (``slurm/doctor.py``)."""
    slurm = inventory.slurm_group(selector)
    if slurm is not None:
        from orchestrator.slurm.doctor import slurm_doctor

        return await slurm_doctor(inventory, slurm, opts, probe_nodes=opts.probe_nodes)
    hosts = inventory.select(selector)
    resolver = SshResolver()
    if any(h.connection == "ssh" for h in hosts):
        ssh_binary()  # no OpenSSH client: one error for the run (ToolMissingError), not one per host
    if opts.local_agent_sha is None:
        from orchestrator.agent_build import agent_source_sha256

        opts = DoctorOptions(opts.timeout_s, opts.concurrency, agent_source_sha256())
    deadline = opts.timeout_s * 10 + 5
    outcomes = await fanout(
        hosts, lambda h: check_host(h, opts, resolver), concurrency=opts.concurrency, deadline_s=deadline
    )
    reports = []
    for o in outcomes:
        if o.value is not None:
            reports.append(o.value)
        else:
            reports.append(_failed_report(o.host, o.error))
    return DoctorReport(reports, resolver.warnings())


def _failed_report(host: Host, error: OrchError | None) -> HostReport:
    """A host whose doctor did not finish (deadline, a bug): the failure is filed under the first check that
    applies to the host — ``dns`` over SSH, ``python`` (the facts probe) for a local host, whose connection
    steps are skipped."""
    msg = error.message if error else "unknown failure"
    data = {"hint": error.hint} if error is not None and error.hint else {}
    first = "python" if host.connection == "local" else "dns"
    checks = []
    for name in CHECK_NAMES:
        if host.connection == "local" and name in ("dns", "tcp", "banner", "hostkey", "auth"):
            checks.append(Check(name, "skipped", "connection: local"))
        elif name == first:
            checks.append(Check(name, "fail", msg, dict(data)))
        else:
            checks.append(Check(name, "skipped", "doctor failed for this host"))
    return HostReport(host.name, host.address, host.port, checks)


def run_doctor_sync(inventory: Inventory, selector: str | None, opts: DoctorOptions) -> DoctorReport:
    return asyncio.run(run_doctor(inventory, selector, opts))
