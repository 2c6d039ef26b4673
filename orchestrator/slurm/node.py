"""One allocated node of a Slurm run, followed from the login node like an SSH host (``runner._HostRun``): the
same reader, ingest, reconnect and verdict; only the connection (the login node's), the follow command
(``--no-worker-check``: only the node itself could tell whether its worker lives; orch watches the job instead)
and the start (the job's ``srun`` starts the worker, not orch) differ."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from orchestrator.errors import RemoteCommandError
from orchestrator.facts import host_facts_summary
from orchestrator.inventory import Host
from orchestrator.protocol import Event
from orchestrator.runner import (
    AGENT_EXIT_NO_RUN,
    HostOutcome,
    Runner,
    _HostRun,
    _Start,
    _StreamEnd,
    gpu_spec_for,
)
from orchestrator.spool_check import StoredPrefix
from orchestrator.transport.base import Transport

if TYPE_CHECKING:
    from orchestrator.slurm.service import SlurmJob

NO_RUN_RETRY_S = 1.0  # the node's run directory does not exist yet (its task is starting): look again after, s


class SlurmNode(_HostRun):
    def __init__(self, runner: Runner, host: Host, job: SlurmJob, *, nodes: list[str] | None = None) -> None:
        """``nodes``: every node of the allocation when this node's cases span them (stored with each result)."""
        super().__init__(runner, host)
        self.job = job
        self.span_nodes = nodes
        self._facts_task: asyncio.Task[None] | None = None
        self.dep = job.dep
        self.started = True  # srun started it; cancel goes through scancel

    async def connect(self) -> Transport:
        # one connection to the login node for the whole job (channels multiplex over SSH): a login node's sshd
        # throttles a thousand nodes' worth of new connections (MaxStartups)
        if self.t is None:
            self.t = await self.job.connect()
        return self.t

    async def drop(self) -> None:
        if self.t is not None:
            t, self.t = self.t, None
            await self.job.reset(t)

    async def _read(
        self, t: Transport, argv: list[str], seq: int, queue: asyncio.Queue[Event | _StreamEnd], start: _Start | None,
        prefix: StoredPrefix | None = None,
    ) -> None:  # fmt: skip
        await super()._read(t, [*argv, "--no-worker-check"], seq, queue, start, prefix)  # start: None (srun starts it)

    async def enrich(self, ev: Event) -> Event:
        if ev.type == "hello" and isinstance(ev.data.get("facts"), dict) and self._facts_task is None:
            # the node's facts come with its hello (the worker read them there): the GPU spec for the roofline
            # figures of the results that follow, and the stored facts of the host run
            summary = host_facts_summary(ev.data["facts"])
            device = str((self.job.info.get("spec") or {}).get("device") or "auto")
            self.gpu = gpu_spec_for(self.host, summary, device)
            self._facts_task = asyncio.create_task(
                self.r.writer.call(self.r.store.set_host_run_facts, self.r.run_id, self.host.name, summary)
            )
        ev = await super().enrich(ev)
        if self.span_nodes is None or ev.type != "result":
            return ev
        data = dict(ev.data)
        raw = data.get("info")
        info: dict[str, Any] = raw if isinstance(raw, dict) else {}
        data["info"] = {**info, "nodes": list(self.span_nodes)}  # one case, run on every node of the allocation
        return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)

    async def run_from(self, from_seq: int) -> HostOutcome:
        """Follow the node's spool from ``from_seq`` until its ``done`` line, then judge it from the store. Until
        the node's task has created its run directory the agent answers "no such run": wait and look again (the
        driver cancels this when the job ends first)."""
        if from_seq > 0:
            rec = (await self.r.writer.call(self.r.store.get_run, self.r.run_id)).host_run(self.host.name)
            if rec is not None:
                self.results, self.errors, self.total = rec.results, rec.errors, rec.cases_total
        while True:
            try:
                await self.follow(from_seq)
                break
            except RemoteCommandError as exc:
                if exc.exit_status != AGENT_EXIT_NO_RUN:
                    raise
            await asyncio.sleep(NO_RUN_RETRY_S)
            from_seq = await self.r.writer.call(self.r.store.last_seq, self.r.run_id, self.host.name) + 1
        if self._facts_task is not None:
            await self._facts_task
        return await self.finish()

    async def cancel_remote(self) -> None:
        return None  # the job is cancelled as a whole (scancel), never node by node
