"""Run a suite through Slurm: submit one job, follow its nodes' spools from the login node, judge by ``sacct``.

For ``orch run SUITE --hosts GROUP`` on a Slurm group (``slurm/config.py``):

1. connect to the login node (``login: HOST`` over SSH through the usual transport, or ``local``), make sure it
   holds this orch's agent (``deploy_host``: in the login user's home, which the nodes share);
2. create the run (no hosts yet), resolve the suite's spec, write ``spec.json`` and the job script
   (``jobs.batch_script``) into ``<orch_home>/runs/<run_id>/_slurm/`` (0700/0600: the spec may hold secrets),
   ``sbatch --parsable`` it; the job id is stored in the run's ``info.slurm`` with the job's state and reason;
3. poll ``squeue --json`` every :data:`POLL_S` seconds: while PENDING the scheduler's reason is shown and stored;
   once nodes are allocated (``scontrol show hostnames``) each node becomes a host of the run (named as Slurm
   names it) and is followed like an SSH host — ``agent follow --no-worker-check`` on the login node, the same
   ingest, seq and reconciliation rules (``runner._HostRun``);
4. at a terminal state (from ``sacct --json``; squeue's own until accounting has it) the followers get
   :data:`GRACE_S` to read the last lines; a node without its ``done`` line is judged by the job's state
   (``jobs.node_outcome``: TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED → failed, CANCELLED → cancelled, with the
   scheduler's words as the error).

Ctrl-C and ``orch cancel RUN_ID`` run ``scancel``; ``orch run --resume RUN_ID`` reattaches to the job (pending,
running or ended) and collects every node's lines after the stored ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.deploy import HostDeploy, deploy_host
from orchestrator.errors import CommandTimeout, ConnectError, HostError, OrchError, UsageError, exit_text
from orchestrator.inventory import Host, Inventory
from orchestrator.slurm import jobs
from orchestrator.slurm.config import SlurmGroup
from orchestrator.slurm.multinode import across_allocation, spans_nodes
from orchestrator.store.compute import short_run_id
from orchestrator.suites.registry import resolve
from orchestrator.suites.secrets import redact_spec
from orchestrator.transport import open_transport
from orchestrator.transport.base import Transport
from orchestrator.version import version_info

if TYPE_CHECKING:
    from orchestrator.runner import HostOutcome, Runner, RunOutcome
    from orchestrator.store.repo import Store

POLL_S = 2.0  # seconds between squeue polls of one job (one cheap RPC to slurmctld)
GRACE_S = 15.0  # after the job ended: how long the followers may take to read the spools' last lines, s
VANISHED_S = 120.0  # a job neither squeue nor sacct knows for this long is lost (accounting off and MinJobAge past)
LOGIN_RETRIES = 8  # squeue polls in a row that may fail to reach the login node before the run gives up
SLURM_TIMEOUT_S = 60.0  # deadline of one Slurm command on the login node, s

#: Writes the job directory's files (JSON {name: text} on stdin) under argv[1], 0700 directories and 0600 files,
#: each through a temporary name; prints {"dir": ...}. A constant program: the paths travel as argv, never as code.
_WRITE_FILES = r"""
import json, os, sys
d = sys.argv[1]
os.umask(0o077)
os.makedirs(d, mode=0o700, exist_ok=True)
for name, text in json.load(sys.stdin).items():
    path = os.path.join(d, name)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o700 if name.endswith(".sh") else 0o600)
    os.replace(tmp, path)
print(json.dumps({"dir": d}))
"""


#: Prints {"tail": the last 2000 bytes of the file argv[1]} ("" when it cannot be read).
_TAIL = r"""
import json, os, sys
try:
    with open(sys.argv[1], "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 2000))
        tail = f.read().decode("utf-8", "replace")
except OSError:
    tail = ""
print(json.dumps({"tail": tail}))
"""
OUTPUT_LINES = 5  # lines of a failed job's Slurm output put into its nodes' errors


def login_host(inventory: Inventory, group: SlurmGroup) -> Host:
    """The Host orch reaches the cluster through: the inventory host ``login`` names, or this machine."""
    if group.login == "local":
        return Host(name=f"{group.name}-login", group=group.name, connection="local")
    return inventory.host(group.login)


def shared_home(home: str, orch_home: str | None) -> str:
    """The absolute orch home on the login node: ``orch_home`` (``~/...`` and relative paths under the login
    user's ``home``), default ``<home>/.orch``."""
    raw = (orch_home or "~/.orch").rstrip("/") or "/"
    if raw == "~" or raw.startswith("~/"):
        return home.rstrip("/") + raw[1:]
    return raw if raw.startswith("/") else f"{home.rstrip('/')}/{raw}"


@dataclass
class SlurmJob:
    """A run's job and the way to it: the login transport, the agent there, the shared orch home."""

    group: SlurmGroup
    login: Host
    run_id: str
    timeout_s: float
    t: Transport | None = None
    dep: HostDeploy | None = None
    home: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # what run.info["slurm"] holds

    @property
    def job_id(self) -> str:
        return str(self.info.get("job_id") or "")

    async def connect(self) -> Transport:
        if self.t is None:
            self.t = await open_transport(self.login, timeout_s=self.timeout_s)
        return self.t

    async def reset(self, t: Transport) -> None:
        """A follower lost ``t``: close it if it is still the job's connection (the next ``connect`` reopens)."""
        if self.t is t:
            await self.close()

    async def close(self) -> None:
        if self.t is not None:
            t, self.t = self.t, None
            with contextlib.suppress(Exception):
                await t.close()

    async def prepare(self) -> HostDeploy:
        t = await self.connect()
        self.dep = await deploy_host(t, self.login)
        self.home = shared_home(self.dep.home, self.group.orch_home)
        return self.dep

    async def slurm(self, argv: list[str], *, what: str) -> str:
        """Run a Slurm command on the login node; its stdout. Raises HostError naming the command, its exit
        status and stderr, with a hint."""
        t = await self.connect()
        res = await t.run(argv, timeout_s=SLURM_TIMEOUT_S, check=False)
        if res.exit_status != 0:
            err = (res.stderr.strip() or res.stdout.strip()).splitlines()
            tail = err[-1] if err else exit_text(res.exit_status)
            hint = (
                f"install Slurm's client commands on {self.login.name} (or put them on its PATH)"
                if res.exit_status == 127
                else f"run `{' '.join(argv)}` on {self.login.name} to see why"
            )
            raise HostError(self.login.name, f"{what} failed (exit {res.exit_status}): {tail}", hint)
        return res.stdout

    async def state(self) -> jobs.JobState | None:
        """The job's state: squeue while it lists the job; at a terminal state (or once squeue forgot it) sacct's
        record when accounting has it. None when neither knows the job."""
        try:
            sq = jobs.parse_squeue(await self.slurm(jobs.squeue_argv(self.job_id), what="squeue"), self.job_id)
        except HostError:
            sq = None  # squeue refuses a job id it no longer knows (exit 1, "Invalid job id specified")
        except jobs.SlurmParseError as exc:
            raise HostError(self.login.name, str(exc), "check the cluster's Slurm version (22.05 or later)") from None
        if sq is not None and not sq.terminal:
            return sq
        try:
            sa = jobs.parse_sacct(await self.slurm(jobs.sacct_argv(self.job_id), what="sacct"), self.job_id)
        except (HostError, jobs.SlurmParseError):
            sa = None  # accounting off or behind: squeue's terminal state stands
        return sa if sa is not None and sa.terminal else sq

    async def write_files(self, job_dir: str, files: dict[str, str]) -> None:
        t = await self.connect()
        res = await t.run([self.login.interpreter, "-c", _WRITE_FILES, job_dir], input=json.dumps(files),
                          timeout_s=SLURM_TIMEOUT_S, check=False)  # fmt: skip
        try:
            res.json_object()
        except ValueError as why:
            raise HostError(self.login.name, f"cannot write the job files to {job_dir}: {why}",
                            "check that the orch home is writable on the login node") from None  # fmt: skip

    async def cancel(self) -> None:
        if self.job_id:
            await self.slurm(jobs.scancel_argv(self.job_id), what="scancel")


class SlurmDriver:
    """One Slurm run of a Runner (which holds the store writer, the request, the observer)."""

    def __init__(self, runner: Runner, group: SlurmGroup) -> None:
        self.r = runner
        self.group = group
        self.job = SlurmJob(group, login_host(runner.inventory, group), "", runner.req.timeout_s)
        self.nodes: dict[str, Any] = {}  # node name -> SlurmNode (one, the batch host's, when cases span nodes)
        self.spans = False  # the suite's cases span the allocation (multinode.py)
        self.tasks: dict[str, asyncio.Task[HostOutcome]] = {}

    @property
    def label(self) -> str:
        """The progress row of the job itself (its nodes get their own rows once allocated)."""
        return self.group.name

    async def _save(self, **changes: Any) -> None:
        self.job.info.update(changes)
        await self.r.writer.call(self.r.store.set_run_info, self.r.run_id, {"slurm": dict(self.job.info)})

    async def run(self) -> RunOutcome:
        from orchestrator.runner import validate_request

        req = self.r.req
        validate_request(req, self.r.registry)
        self.r.observer.host_state(self.label, "connecting", self.job.login.name)
        try:
            dep = await self.job.prepare()
            params = {"sets": dict(req.sets), "repeat": req.repeat, "seed": req.seed}
            self.r.run_id = await self.r.writer.call(
                self.r.store.create_run, suite=req.suite, params=params, preset=req.preset, label=req.label,
                hosts=[], started_by=f"{getpass.getuser()}@{socket.gethostname()}",
                started_on=socket.gethostname(),
            )  # fmt: skip
            self.job.run_id = self.r.run_id
            await self.r.writer.call(self.r.store.set_run_info, self.r.run_id, {"orch": version_info().as_dict()})
            spec: dict[str, Any] = dict(resolve(
                req.suite, req.sets, preset=req.preset, repeat=req.repeat, cuda=bool(self.group.options.gpus_per_node),
                run_id=self.r.run_id, seed=req.seed, registry=self.r.registry,
            ))  # fmt: skip
            self.spans = spans_nodes(self.r.registry, req.suite)
            if self.spans:  # one case across the allocation, from one agent on the batch host
                spec = across_allocation(spec, self.group)
            job_dir = f"{self.job.home}/runs/{self.r.run_id}/{jobs.JOB_DIR}"
            node_agent = (
                f"{self.group.agent_dir.rstrip('/')}/agent-{dep.agent_sha[:16]}.pyz" if self.group.agent_dir else None
            )
            script = jobs.batch_script(
                self.group, agent=dep.pyz_path, spec=f"{job_dir}/spec.json", orch_home=self.job.home,
                run_id=self.r.run_id, node_agent=node_agent, spans=self.spans,
            )  # fmt: skip
            # no "facts": each node's worker reads its own and sends them in its hello line
            full = {**spec, "started_by": f"{getpass.getuser()}@{socket.gethostname()}",
                    "telemetry_ms": req.telemetry_ms}  # fmt: skip
            await self.job.write_files(job_dir, {"spec.json": json.dumps(full), "job.sh": script})
            from orchestrator.runner import _public_env

            self.job.info = {
                "group": self.group.name, "login": self.job.login.name, "job_id": None, "state": None,
                "reason": None, "nodes": [], "orch_home": self.job.home, "job_dir": job_dir,
                "agent": dep.pyz_path, "agent_sha": dep.agent_sha,
                "spec": redact_spec(spec, _public_env(self.r.registry, req.suite)), "spans_nodes": self.spans,
            }  # fmt: skip
            out = await self.job.slurm(jobs.sbatch_argv(self.group, job_dir, f"{job_dir}/job.sh", self.r.run_id),
                                       what="sbatch")  # fmt: skip
            try:
                job_id = jobs.parse_sbatch(out)
            except jobs.SlurmParseError as exc:
                raise HostError(self.job.login.name, str(exc), "run sbatch by hand on the login node") from None
            await self._save(job_id=job_id, state="PENDING", submitted_at=time.time())
            self.r.observer.host_state(self.label, "submitted", f"job {job_id}")
        except OrchError:
            if self.r.run_id:
                await self._fail_run()
            await self.job.close()
            raise
        return await self._watch()

    async def _fail_run(self) -> None:
        await self.r.writer.call(self.r.store.finish_run, self.r.run_id, "failed")

    async def resume(self, info: dict[str, Any]) -> RunOutcome:
        self.job.run_id = self.r.run_id
        self.job.info = dict(info)
        self.spans = bool(info.get("spans_nodes"))
        self.r.observer.host_state(self.label, "connecting", self.job.login.name)
        await self.job.prepare()
        if info.get("orch_home"):
            self.job.home = str(info["orch_home"])
        return await self._watch(resume=True)

    async def _watch(self, *, resume: bool = False) -> RunOutcome:
        try:
            return await self._follow(resume=resume)
        except asyncio.CancelledError:
            await asyncio.shield(self._interrupted())
            raise
        finally:
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            for node in self.nodes.values():
                await node.drop()
            await self.job.close()

    async def _interrupted(self) -> None:
        """Ctrl-C: scancel the job (the nodes' workers get SIGTERM and write done), mark the run cancelled."""
        with contextlib.suppress(OrchError, asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(self.job.cancel(), SLURM_TIMEOUT_S)
        for name in self.nodes:
            await self.r.writer.call(self.r.store.finish_host_run, self.r.run_id, name, "cancelled",
                                     "cancelled by the user (scancel)")  # fmt: skip
        await self._save(state="CANCELLED", reason="cancelled by the user (Ctrl-C)")
        await self.r.writer.call(self.r.store.finish_run, self.r.run_id, "cancelled")
        await self.r.close_store()

    async def _follow(self, *, resume: bool) -> RunOutcome:
        ended_at: float | None = None
        unknown_since: float | None = None
        js: jobs.JobState | None = None
        lost = 0
        while True:
            try:
                current = await self.job.state()
                lost = 0
            except (ConnectError, CommandTimeout) as exc:
                await self.job.close()
                lost += 1
                if lost > LOGIN_RETRIES:
                    raise HostError(
                        self.job.login.name, f"lost the login node: {exc.message}",
                        f"the job goes on; collect it later with orch run --resume {short_run_id(self.r.run_id)}",
                    ) from None  # fmt: skip
                self.r.observer.host_state(self.label, "reconnecting", exc.message)
                await asyncio.sleep(POLL_S * lost)
                continue
            now = time.monotonic()
            if current is None:
                unknown_since = unknown_since or now
                if now - unknown_since > VANISHED_S:
                    raise HostError(self.job.login.name, f"Slurm job {self.job.job_id} is known to neither squeue "
                                    "nor sacct", "turn on job accounting (sacct) on the cluster")  # fmt: skip
                await asyncio.sleep(POLL_S)
                continue
            unknown_since = None
            if js is None or (current.state, current.reason, current.nodes) != (js.state, js.reason, js.nodes):
                await self._save(state=current.state, reason=current.reason, nodes_expr=current.nodes,
                                 time_limit_min=current.time_limit_min)  # fmt: skip
                detail = f"job {self.job.job_id}" + (f", reason {current.reason}" if current.reason else "")
                self.r.observer.host_state(self.label, current.state.lower(), detail)
            js = current
            if js.nodes and not self.nodes and not js.pending:
                await self._start_nodes(js, resume=resume)
            if js.terminal:
                ended_at = ended_at or now
                if all(t.done() for t in self.tasks.values()) or now - ended_at > GRACE_S:
                    break
            await asyncio.sleep(POLL_S)
        return await self._finish(js)

    async def _start_nodes(self, js: jobs.JobState, *, resume: bool) -> None:
        from orchestrator.slurm.node import SlurmNode

        try:
            names = jobs.parse_hostnames(await self.job.slurm(jobs.hostnames_argv(js.nodes), what="scontrol"))
        except jobs.SlurmParseError as exc:
            raise HostError(self.job.login.name, str(exc), "check the node names in slurm.conf") from None
        await self._save(nodes=names)
        agents = names[:1] if self.spans else names  # spanning cases: one agent, on the batch host (first node)
        for name in agents:
            await self.r.writer.call(self.r.store.upsert_host, name, address=None, group=self.group.name,
                                     labels={"slurm_job": self.job.job_id})  # fmt: skip
        await self.r.writer.call(self.r.store.add_host_runs, self.r.run_id, agents)
        states = {s.host: s for s in await self.r.writer.call(self.r.store.host_run_states, self.r.run_id)}
        assert self.job.dep is not None
        for name in agents:
            node = SlurmNode(self.r, self._node_host(name), self.job, nodes=names if self.spans else None)
            self.nodes[name] = node
            st = states.get(name)
            if st is not None and st.done:
                self.tasks[name] = asyncio.create_task(self._judge_stored(node))
                continue
            if st is None or not st.started:
                await self.r.writer.call(self.r.store.start_host_run, self.r.run_id, name, facts={},
                                         agent_version=self.job.dep.agent_sha, build_sha=None)  # fmt: skip
                await self.r.writer.call(self.r.store.set_host_run_info, self.r.run_id, name,
                                         {"slurm_job": self.job.job_id, "spec": self.job.info.get("spec"),
                                          "nodes": names if self.spans else [name]})  # fmt: skip
            from_seq = (st.last_seq + 1) if st is not None else 0
            self.r.observer.host_state(name, "reattached" if resume else "started", f"job {self.job.job_id}")
            self.tasks[name] = asyncio.create_task(node.run_from(from_seq))

    async def _judge_stored(self, node: Any) -> HostOutcome:
        from orchestrator.runner import HostOutcome

        verdict, results, errors = await self.r.stored_verdict(node.host.name)
        return HostOutcome(node.host.name, verdict.status, results, errors, verdict.error)

    def _node_host(self, name: str) -> Host:
        """A node as a Host whose run commands (follow, logs) run on the login node: the login's interpreter, the
        shared orch home, the node's name."""
        login = self.job.login
        return Host(name=name, group=self.group.name, connection=login.connection, python=login.interpreter,
                    orch_home=self.job.home)  # fmt: skip

    async def _job_output(self, js: jobs.JobState) -> str:
        """``"; its output ends: ..."`` — the last lines of Slurm's output file of a job that did not complete
        (srun's and the agents' own words: an interpreter not found, a refused start), or "" (COMPLETED,
        CANCELLED, an empty or unreadable file)."""
        job_dir = self.job.info.get("job_dir")
        if js.state in ("COMPLETED", "CANCELLED") or not job_dir or not self.job.job_id:
            return ""
        path = f"{job_dir}/slurm-{self.job.job_id}.out"
        try:
            t = await self.job.connect()
            res = await t.run([self.job.login.interpreter, "-c", _TAIL, path], timeout_s=SLURM_TIMEOUT_S, check=False)
            tail = str(res.json_object().get("tail") or "")
        except (OrchError, ValueError):
            return ""
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()][-OUTPUT_LINES:]
        return f"; its output ({path}) ends: " + " | ".join(lines) if lines else ""

    async def _finish(self, js: jobs.JobState) -> RunOutcome:
        from orchestrator.runner import HostOutcome, RunOutcome, run_status

        outcomes: list[HostOutcome] = []
        told = await self._job_output(js)
        for name, task in self.tasks.items():
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                verdict, results, errors = await self.r.stored_verdict(name)
                out = HostOutcome(name, verdict.status, results, errors, verdict.error)
            elif task.cancelled() or task.exception() is not None:
                exc = None if task.cancelled() else task.exception()
                msg = exc.message if isinstance(exc, OrchError) else str(exc or "follow cancelled")
                hint = exc.hint if isinstance(exc, OrchError) else None
                out = HostOutcome(name, "failed", error=msg, hint=hint or None)
            else:
                out = task.result()
            status, error = jobs.node_outcome(js, out.status)
            if error is not None or out.status == "failed":
                out.status, out.error = status, (error + told if error else out.error)
                await self.r.writer.call(self.r.store.finish_host_run, self.r.run_id, name, status, out.error)
            outcomes.append(out)
        stored = await self.r.writer.call(self.r.store.get_run, self.r.run_id)
        for out in outcomes:
            rec = stored.host_run(out.host)
            out.results, out.errors = (rec.results, rec.errors) if rec is not None else (0, 0)
            out.state_dir = f"{self.job.home}/runs/{self.r.run_id}/{out.host}/"
        if outcomes:
            status = run_status(outcomes)
        else:  # the job ended before any node ran (cancelled while pending, refused at start)
            status = "cancelled" if js.state == "CANCELLED" else "failed"
            outcomes = [HostOutcome(self.group.name, jobs.TERMINAL.get(js.state, ("failed", ""))[0], 0, 0,
                                    js.describe() + told)]  # fmt: skip
        await self._save(state=js.state, reason=js.reason, ended=js.describe())
        await self.r.writer.call(self.r.store.finish_run, self.r.run_id, status)
        await self.r.close_store()
        return RunOutcome(self.r.run_id, self.r.req.suite, status, outcomes)


async def cancel_slurm_run(inventory: Inventory, store: Store, run_id: str, info: dict[str, Any], *,
                           timeout_s: float = 10.0) -> RunOutcome:  # fmt: skip
    """``orch cancel`` of a Slurm run: ``scancel`` the job on the login node; every host run not final becomes
    cancelled and the run cancelled (an ``orch run`` still following it sees CANCELLED and stops too)."""
    from orchestrator.runner import HostOutcome, RunOutcome

    group = slurm_group_of(inventory, info)
    job = SlurmJob(group, login_host(inventory, group), run_id, timeout_s, info=dict(info))
    if not job.job_id:
        raise UsageError(f"run {short_run_id(run_id)} has no Slurm job id stored (sbatch did not answer)",
                         f"orch runs show {short_run_id(run_id)}")  # fmt: skip
    try:
        js = await job.state()  # scancel of an ended job says nothing: tell the user, and how to collect it
        if js is not None and js.terminal:
            raise UsageError(
                f"Slurm job {job.job_id} of run {short_run_id(run_id)} already ended ({js.state}); there is "
                "nothing to cancel",
                f"collect what it left with orch run --resume {short_run_id(run_id)}",
            )
        await job.cancel()
    finally:
        await job.close()
    detail = store.get_run(run_id)
    outs = []
    for rec in detail.host_runs:
        if rec.status not in ("completed", "failed", "cancelled"):
            store.finish_host_run(run_id, rec.host, "cancelled", f"Slurm job {job.job_id} cancelled (orch cancel)")
        outs.append(HostOutcome(rec.host, "cancelled" if rec.status not in ("completed", "failed") else rec.status))
    store.set_run_info(run_id, {"slurm": {**info, "cancelled_by": "orch cancel"}})
    store.finish_run(run_id, "cancelled")
    return RunOutcome(run_id, detail.suite, "cancelled", outs)


def slurm_group_of(inventory: Inventory, info: dict[str, Any]) -> SlurmGroup:
    """The inventory's Slurm group a stored run was submitted through. Raises UsageError when it is gone."""
    name = str(info.get("group") or "")
    group = inventory.slurm.get(name)
    if group is None:
        raise UsageError(
            f"the run was submitted through Slurm group {name!r}, which {inventory.path} no longer defines",
            "restore the group (its login: names the cluster) in the inventory",
        )
    return group

