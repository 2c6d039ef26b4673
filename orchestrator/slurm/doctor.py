"""``orch doctor --hosts GROUP`` for a Slurm group: the login node, the partition's nodes, and (``--probe-nodes``)
the usual facts from a short job on each usable node. Returns a DoctorReport; never prints.

Rows: the login node first, with the usual checks of a host (``doctor.check_host``: dns ... agent over SSH, or the
facts of this machine for ``login: local``) plus ``slurm`` (``sinfo --version`` answers) and ``partition``
(``sinfo --json``: the partition's nodes by state; fail when fewer usable nodes than the group's ``nodes``); then
one row per node of the partition with ``node`` (Slurm's state, flags and reason: idle, allocated, mixed, down,
DRAIN ... with the administrator's reason) and, with ``--probe-nodes``, ``python`` and ``gpus`` from the facts
that node's task printed (``srun --nodelist=... --immediate`` of orch's facts probe, one task per usable node,
each writing ``probe-<node>.json`` on the shared orch home).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

from orchestrator.doctor import Check, DoctorOptions, DoctorReport, HostReport, check_host, gpus_check, python_check
from orchestrator.errors import OrchError, exit_text
from orchestrator.inventory import Host, Inventory
from orchestrator.slurm import jobs
from orchestrator.slurm.config import SlurmGroup
from orchestrator.slurm.service import SlurmJob, login_host, shared_home

COLUMNS = ("dns", "tcp", "banner", "hostkey", "auth", "python", "gpus", "disk", "agent", "slurm", "partition", "node")
PROBE_WAIT_S = 60  # srun --immediate: how long the probe waits for its nodes before giving up, s
PROBE_LIMIT = "5"  # the probe job's time limit (sbatch/srun --time), minutes

#: Prints {node: text} of the probe's files in argv[1] (probe-<node>.json) and removes them and the directory.
_READ_PROBES = r"""
import json, os, sys
d = sys.argv[1]
out = {}
for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
    p = os.path.join(d, name)
    if name.startswith("probe-") and name.endswith(".json"):  # the .err files of the tasks are dropped
        with open(p, errors="replace") as f:
            out[name[len("probe-"):-len(".json")]] = f.read()
    os.unlink(p)
if os.path.isdir(d):
    os.rmdir(d)
print(json.dumps({"files": out}))
"""


def node_check(node: jobs.NodeInfo) -> Check:
    """ok: the node can take jobs (idle, allocated, mixed); fail: down, drained/draining, failing — with Slurm's
    reason (``scontrol update nodename=... state=resume`` once fixed)."""
    flags = "+".join(node.flags)
    state = node.state + (f"+{flags}" if flags else "")
    detail = state + (f": {node.reason}" if node.reason else "")
    if node.usable:
        return Check("node", "ok", detail, node.to_dict())
    data = {**node.to_dict(), "hint": f"the node is out of service; an administrator resumes it with "
                                      f"scontrol update nodename={node.name} state=resume"}  # fmt: skip
    return Check("node", "fail", detail, data)


def partition_check(group: SlurmGroup, nodes: list[jobs.NodeInfo]) -> Check:
    """The partition's nodes counted by state; fail when fewer usable nodes than the group asks for."""
    where = group.options.partition or "the default partition"
    counts: dict[str, int] = {}
    for n in nodes:
        key = n.state + ("+" + "+".join(n.flags) if n.flags else "")
        counts[key] = counts.get(key, 0) + 1
    usable = sum(1 for n in nodes if n.usable)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    detail = f"{where}: {len(nodes)} node(s): {summary or 'none'}; {usable} usable, the group asks for " \
             f"{group.options.nodes}"  # fmt: skip
    data: dict[str, Any] = {"partition": group.options.partition, "nodes": len(nodes), "usable": usable}
    if usable < group.options.nodes:
        data["hint"] = (
            "jobs of this group would stay pending: lower slurm.nodes in the inventory, pick another partition, "
            "or have the drained/down nodes resumed"
        )
        return Check("partition", "fail", detail, data)
    return Check("partition", "warn" if usable < len(nodes) else "ok", detail, data)


async def slurm_doctor(inventory: Inventory, group: SlurmGroup, opts: DoctorOptions, *,
                       probe_nodes: bool = False) -> DoctorReport:  # fmt: skip
    """The report for one Slurm group (module docstring). Never raises for a cluster problem: it is a check."""
    if opts.local_agent_sha is None:
        from orchestrator.agent_build import agent_source_sha256

        opts = replace(opts, local_agent_sha=agent_source_sha256())
    login = login_host(inventory, group)
    report = await check_host(login, opts)
    rows = [report]
    job = SlurmJob(group, login, "", opts.timeout_s)
    try:
        try:
            version = (await job.slurm(["sinfo", "--version"], what="sinfo --version")).strip()
        except OrchError as exc:
            report.checks.append(Check("slurm", "fail", exc.message, {"hint": exc.hint} if exc.hint else {}))
            report.checks.append(Check("partition", "skipped", "Slurm's commands did not answer"))
            return DoctorReport(rows, columns=COLUMNS)
        report.checks.append(Check("slurm", "ok", version, {"version": version}))
        try:
            nodes = jobs.parse_sinfo(await job.slurm(jobs.sinfo_argv(group), what="sinfo"), group.options.partition)
        except (OrchError, jobs.SlurmParseError) as exc:
            msg = exc.message if isinstance(exc, OrchError) else str(exc)
            report.checks.append(Check("partition", "fail", msg))
            return DoctorReport(rows, columns=COLUMNS)
        report.checks.append(partition_check(group, nodes))
        node_rows = {n.name: HostReport(n.name, None, None, [node_check(n)]) for n in nodes}
        rows += list(node_rows.values())
        if probe_nodes:
            await _probe(job, group, [n for n in nodes if n.usable], node_rows, opts)
    finally:
        await job.close()
    return DoctorReport(rows, columns=COLUMNS)


async def _probe(job: SlurmJob, group: SlurmGroup, nodes: list[jobs.NodeInfo], rows: dict[str, HostReport],
                 opts: DoctorOptions) -> None:  # fmt: skip
    from orchestrator.doctor import probe_argv

    if not nodes:
        return
    t = await job.connect()
    login = job.login
    home_res = await t.run([login.interpreter, "-c", "import os; print(os.path.expanduser('~'))"], timeout_s=60,
                           check=False)  # fmt: skip
    home = shared_home(home_res.stdout.strip() or "~", group.orch_home)
    out_dir = f"{home}/doctor/{uuid.uuid4().hex[:12]}"
    await job.write_files(out_dir, {})
    node_host = Host(name="probe", group=group.name, python=group.node_python)
    argv = jobs.probe_argv(group, [n.name for n in nodes], f"{out_dir}/probe-%N.json", probe_argv(node_host),
                           immediate_s=PROBE_WAIT_S, time_limit=PROBE_LIMIT)  # fmt: skip
    res = await t.run(argv, timeout_s=PROBE_WAIT_S + opts.timeout_s * 6 + 60, check=False)
    read = await t.run([login.interpreter, "-c", _READ_PROBES, out_dir], timeout_s=60, check=False)
    try:
        files = read.json_object().get("files") or {}
    except ValueError:
        files = {}
    err = (res.stderr.strip().splitlines() or [exit_text(res.exit_status)])[-1]
    for n in nodes:
        row = rows[n.name]
        text = files.get(n.name)
        try:
            facts = json.loads(text) if text else None
        except ValueError:
            facts = None
        if not isinstance(facts, dict):
            why = f"the probe job printed no facts for {n.name} (srun: {err})"
            row.checks.append(Check("python", "fail", why, {"hint": "run the probe by hand: srun --nodelist="
                                                                     f"{n.name} --nodes=1 {group.node_python} -V"}))
            continue
        row.facts = facts
        row.checks += [python_check(facts, group.node_python), gpus_check(facts)]
