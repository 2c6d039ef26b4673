"""Slurm's commands as argv lists, the job script, and the parsers of their answers — pure.

Everything orch asks of a cluster goes through the scheduler's own commands (``sbatch``, ``srun``, ``squeue``,
``sacct``, ``scancel``, ``sinfo``, ``scontrol show hostnames``), never a client library that must match the
cluster's Slurm version; their ``--json`` output is parsed here. Field names are those of Slurm 22.05 (Debian 12's
slurm-wlm), recorded from a real cluster in ``tests/fixtures/slurm/``:

- ``sbatch --parsable``: ``JOBID`` or ``JOBID;CLUSTER`` on stdout.
- ``squeue --json``: ``{"jobs": [{"job_id": int, "job_state": "PENDING"|"RUNNING"|..., "state_reason": str
  ("None" when there is none), "nodes": hostlist str ("" while pending), "node_count": int, "batch_host": str}]}``.
  A job stays listed in its terminal state for ``MinJobAge`` seconds after it ends.
- ``sacct --json``: ``{"jobs": [{"job_id": int, "state": {"current": str, "reason": str}, "nodes": hostlist str
  ("None assigned" when it never ran), "time": {"limit": minutes | null, "elapsed": s}}]}``; a requeued job has
  one record per start, the last is the current one. (22.05's ``exit_code`` object there reads SUCCESS even for a
  failed batch script, so orch goes by ``state``.)
- ``sinfo --json``: ``{"nodes": [{"name", "state": "idle"|"allocated"|"mixed"|"down"|..., "state_flags":
  ["DRAIN", ...], "reason": str, "partitions": [str]}]}``.

States (``man squeue``, JOB STATE CODES): a job is *pending* while PENDING (with the scheduler's reason: Priority,
Resources, PartitionConfig, JobHeldUser ...), *running* while CONFIGURING/RUNNING/COMPLETING/SUSPENDED, and
*terminal* in COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL or DEADLINE.
:data:`TERMINAL` maps each terminal state to the status of a node that did not finish its part (a node whose agent
wrote ``done`` keeps the verdict the store gives it) and to the reason shown.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.slurm.config import SlurmGroup
from orchestrator.textlines import output_lines

PENDING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
ACTIVE = frozenset({"CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT",
                    "RESIZING"})  # fmt: skip
#: terminal state -> (status of a node that did not finish, what happened)
TERMINAL: dict[str, tuple[str, str]] = {
    "COMPLETED": ("failed", "the job completed"),
    "FAILED": ("failed", "the job failed (its script or a node's agent exited non-zero)"),
    "CANCELLED": ("cancelled", "the job was cancelled (scancel, orch cancel or an administrator)"),
    "TIMEOUT": ("failed", "the job was killed at its time limit"),
    "NODE_FAIL": ("failed", "a node of the allocation failed"),
    "OUT_OF_MEMORY": ("failed", "the job was killed for using more memory than it was allocated"),
    "PREEMPTED": ("failed", "the job was preempted by another job"),
    "BOOT_FAIL": ("failed", "a node failed to boot"),
    "DEADLINE": ("failed", "the job reached its deadline before it could run"),
}
JOB_DIR = "_slurm"  # <orch_home>/runs/<run_id>/_slurm/: job script, spec, Slurm's output (not a valid host name)


class SlurmParseError(ValueError):
    """A Slurm command's answer orch cannot read; the text says which command and what was wrong."""


@dataclass(frozen=True)
class JobState:
    """One job as Slurm reports it. ``state``: Slurm's base state (``CANCELLED``, not ``CANCELLED by 0``);
    ``reason``: the scheduler's reason or None; ``nodes``: the hostlist expression (``gpu[01-04]``), "" before the
    allocation; ``time_limit_min``: the job's limit in minutes when reported."""

    job_id: str
    state: str
    reason: str | None = None
    nodes: str = ""
    time_limit_min: int | None = None
    source: str = "squeue"  # squeue | sacct

    @property
    def pending(self) -> bool:
        return self.state in PENDING

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def describe(self) -> str:
        """``Slurm job 12 TIMEOUT: the job was killed at its time limit (1 min)`` — for host errors and tables."""
        what = TERMINAL.get(self.state, ("", ""))[1]
        extra = []
        if self.state == "TIMEOUT" and self.time_limit_min is not None:
            extra.append(f"{self.time_limit_min} min")
        if self.reason:
            extra.append(f"reason {self.reason}")
        tail = f" ({', '.join(extra)})" if extra else ""
        return f"Slurm job {self.job_id} {self.state}" + (f": {what}" if what else "") + tail

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "state": self.state, "reason": self.reason, "nodes": self.nodes,
                "time_limit_min": self.time_limit_min, "source": self.source}  # fmt: skip


def _reason(raw: Any) -> str | None:
    return raw if isinstance(raw, str) and raw and raw != "None" else None


def _base_state(raw: Any) -> str:
    # squeue/sacct may add flags after the state ("CANCELLED by 0" in sacct's text form; keep the first word)
    return str(raw or "").split()[0].upper() if raw else ""


def _load(text: str, command: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SlurmParseError(f"{command} --json printed no JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise SlurmParseError(f"{command} --json printed {type(doc).__name__}, not an object")
    errors = doc.get("errors")
    if isinstance(errors, list) and errors:
        raise SlurmParseError(f"{command} --json reports errors: {json.dumps(errors)[:500]}")
    return doc


def parse_sbatch(stdout: str) -> str:
    """The job id from ``sbatch --parsable`` (``JOBID`` or ``JOBID;CLUSTER``). Raises SlurmParseError."""
    line = output_lines(stdout.strip())[-1] if stdout.strip() else ""
    job = line.split(";", 1)[0].strip()
    if not job.isdigit():
        raise SlurmParseError(f"sbatch --parsable printed {stdout.strip()[:200]!r}, not a job id")
    return job


def parse_squeue(text: str, job_id: str) -> JobState | None:
    """The job from ``squeue --json``, or None when squeue no longer lists it. Raises SlurmParseError."""
    doc = _load(text, "squeue")
    for job in doc.get("jobs") or []:
        if isinstance(job, dict) and str(job.get("job_id")) == job_id:
            limit = job.get("time_limit")
            return JobState(
                job_id,
                _base_state(job.get("job_state")),
                _reason(job.get("state_reason")),
                str(job.get("nodes") or ""),
                limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
                "squeue",
            )
    return None


def parse_sacct(text: str, job_id: str) -> JobState | None:
    """The job's latest record from ``sacct --json`` (a requeued job has several), or None. Raises
    SlurmParseError."""
    doc = _load(text, "sacct")
    found: JobState | None = None
    for job in doc.get("jobs") or []:
        if not isinstance(job, dict) or str(job.get("job_id")) != job_id:
            continue
        raw_state = job.get("state")
        state: dict[str, Any] = raw_state if isinstance(raw_state, dict) else {}
        nodes = str(job.get("nodes") or "")
        limit = (job.get("time") or {}).get("limit") if isinstance(job.get("time"), dict) else None
        found = JobState(
            job_id,
            _base_state(state.get("current")),
            _reason(state.get("reason")),
            "" if nodes == "None assigned" else nodes,
            limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
            "sacct",
        )
    return found


@dataclass(frozen=True)
class NodeInfo:
    """One node from ``sinfo --json``: ``state`` (idle, allocated, mixed, down ...), ``flags`` (DRAIN, ...),
    ``reason`` ("" when none), its partitions."""

    name: str
    state: str
    flags: tuple[str, ...]
    reason: str
    partitions: tuple[str, ...]

    @property
    def usable(self) -> bool:
        """A node a job can be scheduled on: not down, not drained/draining, not failing."""
        bad_flags = {"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "MAINTENANCE"}
        return self.state.lower() not in ("down", "unknown", "future") and not (set(self.flags) & bad_flags)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "flags": list(self.flags), "reason": self.reason,
                "partitions": list(self.partitions)}  # fmt: skip


def parse_sinfo(text: str, partition: str | None = None) -> list[NodeInfo]:
    """The nodes of ``sinfo --json`` (of ``partition`` when given), in sinfo's order. Raises SlurmParseError."""
    doc = _load(text, "sinfo")
    out = []
    for n in doc.get("nodes") or []:
        if not isinstance(n, dict) or not n.get("name"):
            continue
        parts = tuple(str(p) for p in n.get("partitions") or [])
        if partition is not None and partition not in parts:
            continue
        flags = tuple(str(f).upper() for f in n.get("state_flags") or [])
        out.append(NodeInfo(str(n["name"]), str(n.get("state") or ""), flags, str(n.get("reason") or ""), parts))
    return out


def squeue_argv(job_id: str) -> list[str]:
    return ["squeue", "--json", "--jobs", job_id]


def sacct_argv(job_id: str) -> list[str]:
    # --duplicates: every record of a requeued job (the last is the current one)
    return ["sacct", "--json", "--duplicates", "--jobs", job_id]


def scancel_argv(job_id: str) -> list[str]:
    return ["scancel", "--full", job_id]


def hostnames_argv(nodes: str) -> list[str]:
    """``scontrol show hostnames EXPR``: Slurm's own expansion of ``gpu[01-03,07]`` into one name per line."""
    return ["scontrol", "show", "hostnames", nodes]


def sinfo_argv(group: SlurmGroup) -> list[str]:
    return ["sinfo", "--json", *([f"--partition={group.options.partition}"] if group.options.partition else [])]


def allocation_options(group: SlurmGroup, *, nodes: int | None = None) -> list[str]:
    """The group's ``slurm:`` block as sbatch/srun options (one argv element each, never through a shell)."""
    o = group.options
    out = [f"--nodes={nodes or o.nodes}"]
    for flag, value in (("--partition", o.partition), ("--account", o.account), ("--time", o.time),
                        ("--constraint", o.constraint), ("--reservation", o.reservation), ("--qos", o.qos)):
        if value is not None:
            out.append(f"{flag}={value}")
    if o.gpus_per_node:
        out.append(f"--gpus-per-node={o.gpus_per_node}")
    return out


def sbatch_argv(group: SlurmGroup, job_dir: str, script: str, run_id: str) -> list[str]:
    """``sbatch --parsable`` of the run's job script ``script`` (absolute), working in ``job_dir``, its output in
    ``job_dir/slurm-JOBID.out``. ``--no-requeue``: a preempted job ends PREEMPTED instead of starting again over
    spools that already hold lines."""
    return [
        "sbatch", "--parsable", f"--job-name=orch-{run_id[-8:]}", f"--chdir={job_dir}",
        f"--output={job_dir}/slurm-%j.out", "--ntasks-per-node=1", "--no-requeue",
        *allocation_options(group), script,
    ]  # fmt: skip


def batch_script(
    group: SlurmGroup, *, agent: str, spec: str, orch_home: str, run_id: str, node_agent: str | None = None,
    spans: bool = False,
) -> str:
    """The job script: (with ``node_agent``) copy the agent to every node's ``agent_dir`` with ``sbcast``, then
    ``srun`` one agent per node, each ``slurm-task`` spooling to its own run directory under ``orch_home`` — or,
    with ``spans`` (a suite whose cases span the nodes, ``multinode.py``), one agent on the batch host itself,
    whose cases ``srun`` across the allocation.

    ``agent``: the agent on shared storage (as deployed on the login node); ``spec``: the run's spec file there.
    Every line is an argv joined with :func:`shlex.join` — nothing of the inventory or the suite is formatted into
    shell text."""
    n = group.options.nodes
    lines = [
        "#!/bin/sh",
        f"# orch run {run_id}: one agent per allocated node (generated by orch; every command is quoted argv)",
        "set -eu",
    ]
    run_agent = agent
    if node_agent is not None and group.agent_dir is not None:
        lines.append(shlex.join(["srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "mkdir", "-p",
                                 group.agent_dir]))  # fmt: skip
        lines.append(shlex.join(["sbcast", "--force", agent, node_agent]))
        run_agent = node_agent
    if spans:
        lines.append(shlex.join([group.node_python, run_agent, "slurm-task", "--spec", spec, "--orch-home",
                                 orch_home]))  # fmt: skip
    else:
        lines.append(shlex.join(task_argv(group, agent=run_agent, spec=spec, orch_home=orch_home)))
    return "\n".join(lines) + "\n"


def task_argv(group: SlurmGroup, *, agent: str, spec: str, orch_home: str) -> list[str]:
    """``srun`` of one ``agent slurm-task`` per node across the allocation. ``--kill-on-bad-exit=0``: one node's
    agent failing does not kill the others (each reports its own outcome)."""
    n = group.options.nodes
    return [
        "srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "--kill-on-bad-exit=0",
        group.node_python, agent, "slurm-task", "--spec", spec, "--orch-home", orch_home,
    ]  # fmt: skip


def multinode_launcher(nodes: int, tasks_per_node: int, *, mpi: str | None = None) -> list[str]:
    """The prefix that runs one case's command across the allocation (a multi-node collective such as
    nccl-tests with ``nodes > 1``): ``srun --nodes=N --ntasks-per-node=G [--mpi=pmix]``, one rank per GPU; the
    MPI/PMIx plugin is the cluster's (``srun --mpi=list``), unset = its ``MpiDefault``."""
    if nodes < 1 or tasks_per_node < 1:
        raise ValueError(f"nodes ({nodes}) and tasks per node ({tasks_per_node}) must be >= 1")
    return [
        "srun", f"--nodes={nodes}", f"--ntasks={nodes * tasks_per_node}", f"--ntasks-per-node={tasks_per_node}",
        *([f"--mpi={mpi}"] if mpi else []),
    ]  # fmt: skip


def node_outcome(job: JobState, verdict_status: str) -> tuple[str, str | None]:
    """A node's final (status, error) from its store verdict and the job's terminal state: a node that completed
    its part keeps ``completed``; otherwise a job that did not complete decides (TIMEOUT, NODE_FAIL ... →
    failed, CANCELLED → cancelled) with :meth:`JobState.describe` as the error."""
    if verdict_status == "completed" or job.state == "COMPLETED" or job.state not in TERMINAL:
        return verdict_status, None
    return TERMINAL[job.state][0], job.describe()


_HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def parse_hostnames(stdout: str) -> list[str]:
    """``scontrol show hostnames`` output: one node name per line. Raises SlurmParseError on a name that cannot
    be a host (and a run directory) name."""
    names = [ln.strip() for ln in output_lines(stdout) if ln.strip()]
    for name in names:
        if not _HOST_RE.match(name):
            raise SlurmParseError(f"scontrol show hostnames printed {name!r}, not a node name")
    return names



def probe_argv(group: SlurmGroup, nodes: Sequence[str], output: str, command: Sequence[str], *,
               immediate_s: int, time_limit: str) -> list[str]:  # fmt: skip
    """``orch doctor --probe-nodes``: one task of ``command`` on each of ``nodes`` (``--nodelist``), its stdout to
    ``output`` (a pattern with ``%N``, the node's name), its stderr next to it; ``--immediate``: give up after
    ``immediate_s`` seconds instead of waiting in the queue behind other jobs. The group's partition, account,
    qos and reservation apply; its node count and GPUs do not (the probe only reads facts)."""
    o = group.options
    opts = [f"{flag}={value}" for flag, value in (("--partition", o.partition), ("--account", o.account),
            ("--qos", o.qos), ("--reservation", o.reservation)) if value is not None]  # fmt: skip
    n = len(nodes)
    return [
        "srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", f"--nodelist={','.join(nodes)}",
        f"--immediate={immediate_s}", f"--time={time_limit}", f"--output={output}",
        f"--error={output.removesuffix('.json')}.err", "--job-name=orch-doctor", *opts, *command,
    ]  # fmt: skip
