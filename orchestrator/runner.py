"""Run a suite on hosts: deploy-check, start the detached agents, follow their events, hand them to the store.

Per host (all hosts in parallel, a failed host is a value):

1. connect; ``deploy_host`` with the host facts (one round trip when the agent is already there: the deploy
   helper reads them through the verified agent; else the agent is uploaded and ``agent facts`` asked);
2. resolve the suite's spec for that host (CUDA or not picks the default preset); check torch imports;
3. ``agent start`` (detached on the host: it survives SSH dropping) and ``agent follow --from SEQ``;
4. every whole line (``transport.lines``) → an event at its position (``ingest.line_event``: a seq that is not the
   position, or a line past the cap, is one error event) → results enriched with roofline figures →
   ``Store.ingest`` (idempotent on (run, host, position)); a dropped connection reconnects with backoff and follows
   from the last stored position;
5. at ``done``: the host's verdict from the store (``ingest.host_verdict``: the agent's done counts reconciled with
   the stored rows), plateau, and the run's status (completed / partial / failed / cancelled) from the store's counts.

Ctrl-C (task cancellation) and ``orch cancel RUN_ID`` stop the remote process groups (``agent cancel``) and mark
the run cancelled, keeping what was ingested. ``resume`` reattaches to every host whose done line is not stored
(also in a run already ended partial or failed because a host was lost) from its last stored position.

Store calls go through one worker thread (:class:`StoreWriter`): one writer, so SQLite never reports "database is
locked" to the runner while the API reads. Events go there through one queue for all hosts
(``store_writer.IngestWriter``): each transaction holds the batches every host has waiting, and a host looks at
its events (progress, ``done``) only once they are committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import getpass
import random
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from orchestrator import controller, heap, parsepool
from orchestrator.agentctl import (
    START_TIMEOUT_S,
    agent_error_doc,
    dead_worker_error,
    run_dir_text,
    run_opts,
    spool_changed_error,
    spool_io_error,
    start_answer,
    start_argv,
    start_input,
    start_refused,
    stopped_worker_error,
    with_full_outputs,
)
from orchestrator.analysis.enrich import DERIVING_SUITES, enrich_result
from orchestrator.analysis.gpus import GpuSpec, match_gpu
from orchestrator.analysis.plateau import moe_points, sweep_plateau
from orchestrator.analysis.telemetry import mark as mark_telemetry
from orchestrator.deploy import HostDeploy, agent_artifact, deploy_host
from orchestrator.errors import (
    CommandSilent,
    CommandTimeout,
    ConnectError,
    DriftError,
    HostError,
    OrchError,
    RemoteCommandError,
    StoreError,
    SuiteError,
    UsageError,
)
from orchestrator.facts import host_facts_summary
from orchestrator.fanout import fanout
from orchestrator.fleet import FleetView, describe, fleet_view, gate
from orchestrator.fleet import check_fields as check_drift_fields
from orchestrator.ingest import CaseList, HostVerdict, SpoolLines, host_verdict, is_done_line
from orchestrator.inventory import Host, Inventory
from orchestrator.protocol import Event
from orchestrator.resume import (
    AGENT_UNKNOWN_RUN,
    CANCELLED_BY_USER,
    HOST_ENDED_STATUSES,
    Lost,
    Reattach,
    cancel_refusal,
    cancel_verdict,
    dropped_error,
    host_step,
    interrupted_host_error,
    lost_connection_error,
    needs_remote_stop,
    reattach_plan,
    resume_fields,
    resume_refusal,
    stop_unconfirmed,
)
from orchestrator.resume import run_status as run_status  # re-exported: spool_import and slurm import it here
from orchestrator.spool_check import (
    StoredPrefix,
    changed_spool_error,
    hello_conflicts,
    past_done_note,
    replaced_spool_error,
)
from orchestrator.store.compute import short_run_id
from orchestrator.store_writer import IngestWriter
from orchestrator.suites.command import command_result, parse_inputs
from orchestrator.suites.origin import require_suite, suite_origin
from orchestrator.suites.registry import Registry, RunSpec, builtin_registry, get_suite, resolve
from orchestrator.suites.secrets import redact_spec, scrub_event, secret_values
from orchestrator.transport import open_transport
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.lines import Line
from orchestrator.transport.liveness import heartbeat_interval_s
from orchestrator.version import version_info

if TYPE_CHECKING:
    from orchestrator.store.repo import Store  # SQLAlchemy: imported by whoever opens the store (maybe a thread)
    from orchestrator.transport.sshconfig import SshResolver  # asyncssh: imported when an SSH host connects

T = TypeVar("T")

BENCHES_NEEDING_TORCH = frozenset({"moe_gemm", "hbm", "allreduce", "decode"})
RECONNECT_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0)  # ~40 s of retries, jittered
GATHER_RETRIES = 3  # a session dropped under the deploy check or the facts read: asked again up to 3 times (~3.5 s)
AGENT_EXIT_DEAD = 3
AGENT_EXIT_SPOOL_CHANGED = 6  # agents/orch_agent/cli.py: follow's spool was truncated, replaced or rewritten
AGENT_EXIT_NO_RUN = 4
AGENT_EXIT_WRITE = 5  # agents/orch_agent/cli.py: the run's files cannot be written, or its spool read (EIO ...)
AGENT_EXIT_STOPPED = 7  # agents/orch_agent/cli.py: follow found the worker stopped for --stopped-limit-s
PAST_DONE_WAIT_S = 30.0  # s: after done, how long orch waits for the follow stream's end to count lines past done
INGEST_BATCH_MAX = 2_000  # events per store call (one transaction) when lines arrive faster than they are stored
INGEST_QUEUE_MAX = 10_000  # parsed events waiting for the store; beyond, the reader stops reading the stream
STOP_FOLLOWER_TIMEOUT_S = 60.0  # ``agent stop-follower`` (one Python start on the host, slow under load)
CANCEL_WAIT_S = 40.0  # how long a Ctrl-C waits for one host's ``agent cancel`` (connect included) before giving up


class Observer(Protocol):
    """Progress callbacks (the CLI draws them; tests may record them). Called from the event loop."""

    def host_state(self, host: str, state: str, detail: str = "") -> None: ...

    def case_progress(self, host: str, done: int, total: int | None, case: dict[str, Any] | None) -> None: ...


class NullObserver:
    def host_state(self, host: str, state: str, detail: str = "") -> None:
        return None

    def case_progress(self, host: str, done: int, total: int | None, case: dict[str, Any] | None) -> None:
        return None


@dataclass(frozen=True)
class RunRequest:
    """What ``orch run`` was asked. ``sets`` are raw ``--set KEY=VALUE`` strings."""

    suite: str
    selector: str | None
    sets: dict[str, str] = field(default_factory=dict)
    preset: str | None = None
    repeat: int | None = None
    label: str | None = None
    seed: int | None = None
    timeout_s: float = 10.0
    concurrency: int = 64
    wait_s: float = 0.0  # how long a host's start waits for GPUs leased by another run (0: refuse at once)
    require_uniform: bool = False  # refuse to start when the hosts differ (also per group in the inventory)
    allow_drift: tuple[str, ...] = ()  # fleet fields let through by --require-uniform
    telemetry_ms: int = 100  # GPU telemetry interval per case, ms (the agent's nvidia-smi -lms); 0 = off
    replays: str | None = None  # orch runs rerun: the run this one replays (stored in the run's info)
    only_cases: tuple[dict[str, Any], ...] = ()  # rerun only the spec cases that hold one of these (stored) cases
    builds: tuple[tuple[str, str], ...] = ()  # (host, build sha) a replay needs as the host's current build
    stopped_limit_s: float = 300.0  # a host whose worker has been stopped this long fails (Settings.worker_stopped_s)
    silent_limit_s: float = 60.0  # a follower silent this long is killed and followed again (follower_silent_s)


@dataclass
class HostOutcome:
    host: str
    status: str  # completed | partial | failed | cancelled
    results: int = 0
    errors: int = 0
    error: str | None = None
    hint: str | None = None
    state_dir: str | None = None  # where the host keeps the run (spool, spec, outputs), as the user would type it

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "status": self.status,
            "results": self.results,
            "errors": self.errors,
            "error": self.error,
            "state_dir": self.state_dir,
        }


@dataclass
class RunOutcome:
    run_id: str
    suite: str
    status: str
    hosts: list[HostOutcome]
    stop_failed: tuple[str, ...] = ()  # ``orch cancel``: the hosts whose agent could not stop the run (exit 1)

    @property
    def stored(self) -> bool:
        """False when every host failed before starting and no run was stored (``run_id`` is empty)."""
        return bool(self.run_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id or None,
            "suite": self.suite,
            "status": self.status,
            "hosts": [h.to_dict() for h in self.hosts],
        }


class StoreWriter:
    """Runs every store call on one thread, in order: the orchestrator's single writer.

    ``store`` may be a Future of the store still being opened on another thread (``AppContext.store_in_background``:
    SQLAlchemy's import and the schema check, ~0.3-0.6 s, overlap the hosts' connect and facts round trip);
    :meth:`ready` waits for it and raises what opening it raised (a bad URL, a newer schema)."""

    def __init__(self, store: Store | Future[Store]) -> None:
        self._opening = store if isinstance(store, Future) else None
        self._store = None if isinstance(store, Future) else store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orch-store")

    async def ready(self) -> Store:
        """The store, once open. Raises what opening it raised."""
        if self._store is None:
            assert self._opening is not None
            self._store = await asyncio.wrap_future(self._opening)
        return self._store

    @property
    def store(self) -> Store:
        """The store; blocks until it is open (callers in the event loop await :meth:`ready` first)."""
        if self._store is None:
            assert self._opening is not None
            self._store = self._opening.result()
        return self._store

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def validate_request(req: RunRequest, registry: Registry | None = None) -> None:
    """Reject an unknown suite, preset or parameter before anything starts (for CPU and CUDA hosts alike)."""
    get_suite(req.suite, registry)
    errors: list[SuiteError] = []
    for cuda in (False, True):
        try:
            resolve(
                req.suite, req.sets, preset=req.preset, repeat=req.repeat, cuda=cuda, run_id="check", seed=req.seed,
                registry=registry,
            )  # fmt: skip
        except SuiteError as exc:
            errors.append(exc)
    if len(errors) == 2:  # invalid whatever the host: a real input error
        raise errors[0]
    for problem in errors:  # valid only on one kind of host (device=cuda): said per host when it runs
        if "device=cuda" not in problem.message:
            raise problem


def replay_info(req: RunRequest) -> dict[str, Any]:
    """What a replayed run stores in its ``info``: ``{"replays": RUN_ID, "replayed_cases": [case, ...]}``."""
    if req.replays is None:
        return {}
    return {"replays": req.replays, "replayed_cases": [dict(c) for c in req.only_cases]}


def select_cases(cases: list[dict[str, Any]], wanted: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spec cases that hold every parameter of one of the ``wanted`` stored cases (a stored case may carry
    fewer keys than the spec's case, never other values), in spec order."""
    return [c for c in cases if any(all(k in c and c[k] == v for k, v in w.items()) for w in wanted)]


def enrich_event(suite: str, ev: Event, gpu: GpuSpec | None) -> Event:
    """A result event with the suite's derived metrics added (analysis.enrich) and the GPU spec named in
    ``info``; a result whose metrics are malformed becomes an error event for its case. Other events pass."""
    if ev.type != "result" or ev.case is None:
        return ev
    if gpu is None and suite not in DERIVING_SUITES:
        return ev  # nothing to add (the store validates the metrics: a malformed one makes an error row)
    try:
        metrics = ev.metrics()
    except ValueError as exc:
        return Event(seq=ev.seq, type="error", ts=ev.ts,
                     data={"message": f"bad result line: {exc}", "case": ev.case, "kind": "protocol"})
    enriched = enrich_result(suite, ev.case, metrics, gpu)
    data = dict(ev.data)
    data["metrics"] = {k: v.to_dict() for k, v in enriched.items()}
    if gpu is not None and isinstance(data.get("info", {}), dict):
        data["info"] = {**data.get("info", {}), "gpu_spec": gpu.key, "peak_mem_gbps": gpu.mem_bw_gbps}
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)


def gpu_spec_for(host: Host, facts_summary: dict[str, Any], device: str) -> GpuSpec | None:
    """The host's GPU spec for % of peak: the catalog entry for the name nvidia-smi reports, with the
    inventory's ``gpu:`` override applied; None on CPU or for an unknown SKU without an override."""
    if device != "cuda":
        return None
    override = host.gpu.model_dump(exclude_none=True) if host.gpu else None
    if facts_summary.get("gpu_name"):
        return match_gpu(str(facts_summary["gpu_name"]), override)
    if override and override.get("peak_mem_gbps"):
        return match_gpu("custom", override)
    return None


def agent_argv(host: Host, dep: HostDeploy) -> list[str]:
    return [host.interpreter, dep.agent_path]


async def agent_json(t: Transport, argv: list[str], *, timeout_s: float = 120) -> dict[str, Any]:
    return res_json(t, await t.run(argv, timeout_s=timeout_s, check=False))


def res_json(t: Transport, res: CommandResult) -> dict[str, Any]:
    """The agent's JSON answer; RemoteCommandError naming the agent command when there is none."""
    try:
        return res.json_object()
    except ValueError as why:
        raise RemoteCommandError(t.host, list(res.argv[1:3]), res.exit_status, str(why)) from None


@dataclass(frozen=True)
class _Start:
    """``agent start --spec - --follow``: its argv, the spec on stdin, and the GPU lease wait (s)."""

    argv: list[str]
    input: bytes
    wait_s: float


class _Reattach(Exception):  # noqa: N818 - a signal to follow(), not an error
    """A start sent again after a dropped connection found the run's worker alive: follow it instead."""


@dataclass(frozen=True)
class _StreamEnd:
    """The follow stream ended: cleanly (``error`` None) or with the error the transport raised."""

    error: Exception | None


def _drain(
    first: Event | _StreamEnd, queue: asyncio.Queue[Event | _StreamEnd]
) -> tuple[list[Event], _StreamEnd | None]:
    """``first`` and the events already queued behind it (up to ``INGEST_BATCH_MAX``), and the end if reached."""
    batch: list[Event] = []
    item = first
    while True:
        if isinstance(item, _StreamEnd):
            return batch, item
        batch.append(item)
        if len(batch) >= INGEST_BATCH_MAX:
            return batch, None
        try:
            item = queue.get_nowait()
        except asyncio.QueueEmpty:
            return batch, None


def _cut_at_done(batch: list[Event]) -> tuple[list[Event], int | None]:
    """``batch`` up to its done line (a done at the wrong position included), and how many lines followed it
    (None: no done line in the batch)."""
    for i, ev in enumerate(batch):
        if is_done_line(ev):
            return batch[: i + 1], len(batch) - i - 1
    return batch, None


async def _count_rest(queue: asyncio.Queue[Event | _StreamEnd]) -> int:
    """The lines still coming after the done line until the follow stream ends (the agent prints the lines it
    read with done and exits), within ``PAST_DONE_WAIT_S``: what came by then is counted."""
    n = 0

    async def count() -> None:
        nonlocal n
        while not isinstance(await queue.get(), _StreamEnd):
            n += 1

    with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
        await asyncio.wait_for(count(), PAST_DONE_WAIT_S)
    return n


class _HostRun:
    """One host's part of a run."""

    def __init__(self, runner: Runner, host: Host) -> None:
        self.r = runner
        self.host = host
        self.t: Transport | None = None
        self.dep: HostDeploy | None = None
        self.gpu: GpuSpec | None = None
        self.results = 0
        self.errors = 0
        self.total: int | None = None
        self.started = False
        self.start_answered = False  # agent start --follow answered that the worker runs (or the run is finished)
        self.reconnects = 0
        self.first_drop: str | None = None  # why the connection first dropped (info.first_drop: history, not error)
        self.facts: dict[str, Any] = {}
        self.secrets: tuple[str, ...] = ()  # the suite's secret env values: scrubbed from every event
        self.past_done: tuple[int, int] | None = None  # lines found after the done line, and the done line's seq
        self.done_ts: float | None = None  # when the agent wrote its done line (unix s): the host run's end
        # the case list the run sent to the agent (host_runs.info.spec), read once before the first follow: each
        # case line's parameters are checked against it (ingest.CaseList)
        self.case_list: CaseList | None = None
        self.case_list_read = False

    async def connect(self) -> Transport:
        if self.t is None:
            resolver = None if self.host.connection == "local" else self.r.resolver
            self.t = await open_transport(self.host, timeout_s=self.r.req.timeout_s, resolver=resolver)
        return self.t

    async def drop(self) -> None:
        if self.t is not None:
            t, self.t = self.t, None
            try:
                await t.close()
            except Exception:  # noqa: BLE001 - the connection is already gone
                pass

    async def gather(self) -> dict[str, Any]:
        """Connect, deploy-check and read the host's facts (the fleet view is built from them before any host
        starts). Sets and returns ``self.facts``."""
        obs, name = self.r.observer, self.host.name
        attempt = 0
        while True:
            obs.host_state(name, "connecting")
            t = await self.connect()
            obs.host_state(name, "deploying")
            try:
                self.dep = await deploy_host(t, self.host, facts=True)  # one round trip when the agent is there
                if self.dep.facts is not None:
                    self.facts = self.dep.facts
                else:
                    self.facts = await agent_json(t, [*agent_argv(self.host, self.dep), "facts", *self._home_opts()])
                return self.facts
            except ConnectError as exc:
                # The session dropped under the deploy check or the facts read (both idempotent: the agent is
                # content-addressed, its tree unpacked under a unique name and renamed): reconnect and ask again,
                # as follow does; a host that cannot be reached again fails as before.
                if exc.kind != "closed":
                    raise
                if attempt >= GATHER_RETRIES:
                    raise ConnectError(
                        name,
                        "closed",
                        f"{exc.reason} — the session dropped on each of {attempt + 1} attempts, each on a new "
                        "connection",
                        exc.hint or "something on the host ends SSH sessions: look in its sshd log (journalctl -u "
                        "ssh; MaxSessions, MaxStartups, an OOM kill, sshd restarting) and run again",
                    ) from None
                await self.drop()
                attempt += 1
                await self._pause_before_retry(attempt, exc)

    async def _pause_before_retry(self, attempt: int, err: OrchError) -> None:
        """Note a dropped connection (``reconnects``; ``first_drop``: history, never the host's error), say so,
        and wait the jittered backoff of retry ``attempt`` (from 1) before the caller connects again."""
        delay = RECONNECT_BACKOFF_S[attempt - 1] * random.uniform(0.8, 1.2)
        self.reconnects += 1
        self.first_drop = self.first_drop or err.message
        self.r.observer.host_state(self.host.name, "reconnecting", f"{err.message}; retry {attempt} in {delay:.1f} s")
        await asyncio.sleep(delay)

    def _home_opts(self) -> list[str]:
        return ["--orch-home", self.host.orch_home] if self.host.orch_home else []

    async def prepare(self) -> tuple[RunSpec, dict[str, Any]]:
        """Gather the facts (unless done already), resolve the spec. Sets ``self.facts``."""
        name = self.host.name
        if self.dep is None or not self.facts:
            await self.gather()
        await self.connect()  # dropped after the facts read when the run has more hosts than its concurrency
        facts = self.facts
        summary = host_facts_summary(facts)
        torch = facts.get("torch") or {}
        spec = resolve(
            self.r.req.suite,
            self.r.req.sets,
            preset=self.r.req.preset,
            repeat=self.r.req.repeat,
            cuda=bool(torch.get("cuda_available")),
            run_id=self.r.run_id,
            seed=self.r.req.seed,
            registry=self.r.registry,
        )
        if spec["bench"] in BENCHES_NEEDING_TORCH and not torch.get("ok"):
            python = self.host.interpreter
            raise HostError(
                name,
                f"{python} cannot import torch: {torch.get('error') or 'import failed'}",
                f"set `python:` for {name} in the inventory to the interpreter that has torch "
                "(e.g. python: /opt/torch/.venv/bin/python3)",
            )
        if self.r.req.only_cases:
            spec["cases"] = select_cases(spec["cases"], self.r.req.only_cases)
        want = dict(self.r.req.builds).get(name)
        if want is not None and self.dep is not None and self.dep.current_build != want:
            have = (self.dep.current_build or "no build")[:12]
            raise HostError(
                name,
                f"run {self.r.req.replays} ran build {want[:12]} on {name}; its current build is {have}",
                f"deploy that build first (orch deploy --hosts {name} --build DIR whose sha256 is {want[:12]}...)",
            )
        self.gpu = gpu_spec_for(self.host, summary, spec["device"])
        command = self.r.registry.get(self.r.req.suite).command
        self.secrets = secret_values(spec, command.public_env) if command is not None else ()
        return spec, summary

    async def enrich(self, ev: Event) -> Event:
        """Parse a command suite's output into metrics and references; add the roofline figures to a result (the
        measured-roof % is computed by the store at query time). The parse runs in a worker process bounded in
        time and memory (parsepool.py): a parser that never ends makes its case an error, not the run a hang."""
        command = self.r.registry.get(self.r.req.suite).command
        if command is not None:
            inputs = parse_inputs(ev)
            parsed = await parsepool.shared().parse_async(command, *inputs) if inputs is not None else None
            ev = scrub_event(command_result(command, ev, self.host.group, parsed), self.secrets)
        return mark_telemetry(enrich_event(self.r.req.suite, ev, self.gpu))

    async def follow(self, from_seq: int, start: _Start | None = None) -> str:
        """Follow the spool from ``from_seq`` until ``done``; reconnect on drops. Returns the done status.

        ``start``: the first exec starts the worker and follows on the same channel (``agent start --follow``:
        one SSH session and one Python start on the host instead of two); a reconnect follows with ``agent
        follow --from SEQ`` as ever, once the start has answered (before that, its error is the host's).

        A reader task parses lines into a queue; this loop takes one event, drains whatever else is already
        queued, and ingests them in one store call: no added latency when lines are sparse, batches of up to
        ``INGEST_BATCH_MAX`` when they come faster than the store writes them."""
        from orchestrator.store.refusals import ingest_keeping, refused_value  # SQLAlchemy: the store loaded it

        assert self.dep is not None
        name, w = self.host.name, self.r.writer
        next_seq = from_seq
        attempt = 0
        silent_pid: int | None = None  # a follower that went silent, still to be killed on the host
        if not self.case_list_read:
            rec = await w.call(self.r.store.get_host_run, self.r.run_id, name)
            self.case_list, self.case_list_read = CaseList.from_info(rec.info if rec is not None else None), True
        while True:
            try:
                t = await self.connect()
                if silent_pid is not None:
                    await self._stop_follower(t, silent_pid)
                    silent_pid = None
                argv = [
                    *agent_argv(self.host, self.dep), "follow", self.r.run_id, "--from", str(next_seq),
                    "--stopped-limit-s", f"{self.r.req.stopped_limit_s:g}",
                    "--heartbeat-s", f"{heartbeat_interval_s(self.r.req.silent_limit_s):g}", *run_opts(self.host),
                ]  # fmt: skip
                starting = start if start is not None and not self.start_answered else None
                prefix = None
                if starting is None and next_seq > 0:  # resume or reconnect: prove the spool is the stored one
                    prefix = await w.call(StoredPrefix.load, self.r.store, self.r.run_id, name)
                    at = argv.index("--from") + 1
                    argv[at : at + 1] = ["0", "--stored", str(prefix.last_seq + 1)]  # the agent's cut check
                queue: asyncio.Queue[Event | _StreamEnd] = asyncio.Queue(maxsize=INGEST_QUEUE_MAX)
                reader = asyncio.create_task(self._read(t, starting.argv if starting else argv, next_seq, queue,
                                                        starting, prefix))  # fmt: skip
                try:
                    while True:
                        batch, end = _drain(await queue.get(), queue)
                        batch, after = _cut_at_done(batch)
                        if after is not None:  # lines after done: never stored (spool_check.past_done_note)
                            # the stream's end already drained with this batch: nothing more comes (counting the
                            # queue then waited PAST_DONE_WAIT_S for an end that had come: a 30 s stall before the
                            # done was stored, which lost a Slurm node's done to the job's 15 s grace)
                            past = after + (await _count_rest(queue) if end is None else 0)
                            self.past_done = (past, batch[-1].seq) if past else None
                        if batch:
                            attempt = 0
                            try:
                                await self.r.ingest.write(self.r.run_id, name, batch)  # returns once committed
                            except StoreError as exc:  # a value refused: store line by line, never lose the host
                                if not refused_value(exc):
                                    raise
                                await w.call(ingest_keeping, self.r.store, self.r.run_id, name, batch)
                            next_seq = batch[-1].seq + 1
                            for ev in batch:
                                status = self.observe(ev)
                                if status is not None:
                                    return status
                        if end is not None:
                            if end.error is not None:
                                raise end.error
                            raise ConnectError(name, "closed", "agent follow ended without a done event")
                finally:
                    reader.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
            except RemoteCommandError as exc:
                if exc.exit_status == AGENT_EXIT_DEAD:
                    raise dead_worker_error(self.host, self.r.run_id, exc) from None
                if exc.exit_status == AGENT_EXIT_STOPPED:
                    raise stopped_worker_error(self.host, self.r.run_id, exc) from None
                if exc.exit_status == AGENT_EXIT_WRITE:  # the spool cannot be read (EIO ...): the agent's message
                    raise spool_io_error(self.host, agent_error_doc(exc.stderr), str(exc)) from None
                if exc.exit_status == AGENT_EXIT_SPOOL_CHANGED:  # one error naming it, not a cascade of bad lines
                    stored = await w.call(self.r.store.last_seq, self.r.run_id, name) + 1
                    raise spool_changed_error(self.host, exc, stored) from None
                if exc.exit_status is not None:
                    raise
                err: OrchError = exc
            except _Reattach:
                continue  # a start sent again after a drop found its worker running: follow it
            except (ConnectError, CommandTimeout) as exc:
                if isinstance(exc, CommandSilent):  # stopped or wedged: killed on the host, then followed again
                    silent_pid = exc.pid
                if start is not None and not self.start_answered and isinstance(exc, CommandTimeout):
                    raise  # the start did not answer in time: whether the worker started is not known
                # A drop before the start's answer: reconnect and send the same start again. The agent's start is
                # idempotent per run id and spec (one start at a time under a lock; a finished run is followed,
                # a live worker answers already_running, which _started turns into following it).
                err = exc
            await self.drop()
            if attempt >= len(RECONNECT_BACKOFF_S):
                raise lost_connection_error(err.message, host=name, start_answered=self.start_answered,
                                            run_id=self.r.run_id)  # fmt: skip
            attempt += 1
            await self._pause_before_retry(attempt, err)
            next_seq = await w.call(self.r.store.last_seq, self.r.run_id, name) + 1

    async def _stop_follower(self, t: Transport, pid: int) -> None:
        """Kill the follower ``pid`` that went silent (``agent stop-follower``: only a follower of this run, never
        its worker). Over SSH, closing its channel does not end a stopped process, and sshd refuses signal
        requests on root logins. Best effort: a failure here leaves the host run as it was (ConnectError goes on
        to the reconnect, as any drop)."""
        assert self.dep is not None
        argv = [*agent_argv(self.host, self.dep), "stop-follower", self.r.run_id, "--pid", str(pid),
                *run_opts(self.host)]  # fmt: skip
        with contextlib.suppress(RemoteCommandError, CommandTimeout):
            await t.run(argv, timeout_s=STOP_FOLLOWER_TIMEOUT_S, check=False)

    async def _read(
        self, t: Transport, argv: list[str], seq: int, queue: asyncio.Queue[Event | _StreamEnd], start: _Start | None,
        prefix: StoredPrefix | None = None,
    ) -> None:  # fmt: skip
        """Parse the follow stream into ``queue``; always ends with a ``_StreamEnd`` (carrying the error, if any).
        With ``start``, the stream's first line is the start's answer (:meth:`_started`), not a spool line.
        With ``prefix`` (the stream starts at line 0), the lines up to its ``last_seq`` are compared with the stored
        rows (``spool_check``) and not queued; a spool that differs ends the stream with the host's error before
        any later line is queued."""
        lines = t.stream(argv, input=start.input if start is not None else None, silent_s=self.r.req.silent_limit_s)
        agent = argv[:2]
        # field types, case order and the case list checked as for import
        spool = SpoolLines(0 if prefix is not None else seq, cases=self.case_list)
        try:
            if start is not None:
                await self._started(lines, start)
            async for line in lines:  # whole lines; the n-th is at position n whatever seq it claims
                raw = spool.event(line)
                if prefix is not None and raw.seq <= prefix.last_seq:
                    await self._compare(prefix, raw)
                    continue
                if prefix is not None:
                    self._refuse_changed(prefix)
                    prefix = None
                if raw.seq == 0 and raw.type == "hello" and hello_conflicts(raw, run_id=self.r.run_id,
                                                                            host=self.host.name):  # fmt: skip
                    # another host's (or run's) spool in this one's place, none of it stored yet: not one line of
                    # it is stored as this host's
                    raise replaced_spool_error(self.host.name, self._spool_text(), self.r.run_id, raw)
                ev = await with_full_outputs(t, agent, self.host, self.r.run_id, raw)
                await queue.put(await self.enrich(ev))
        except Exception as exc:  # noqa: BLE001 - handed to follow(), which decides (reconnect or fail)
            ended: Exception = exc
            if prefix is not None and prefix.problems:  # a changed spool explains a follow that ends short
                ended = changed_spool_error(self.host.name, self._spool_text(), self.r.run_id, prefix.problems)
            await queue.put(_StreamEnd(ended))
        else:
            try:
                if prefix is not None:
                    self._refuse_changed(prefix)
            except HostError as exc:
                await queue.put(_StreamEnd(exc))
            else:
                await queue.put(_StreamEnd(None))
        finally:
            if isinstance(lines, AsyncGenerator):  # cancelled while waiting on a full queue: close the channel now
                await lines.aclose()

    async def _compare(self, prefix: StoredPrefix, raw: Event) -> None:
        """Compare the spool's line ``raw`` (at a stored position) with the store, prepared as the ingest prepared
        it. Raises the host's error at once for a hello of another run or host (the spool was replaced)."""
        if raw.seq == 0:
            if hello_conflicts(raw, run_id=self.r.run_id, host=self.host.name):
                raise replaced_spool_error(self.host.name, self._spool_text(), self.r.run_id, raw)
            prefix.compare(raw, raw)  # this run and host, but another agent, machine or case count than stored
            return
        # prepared as the ingest prepared it (a log line's text scrubbed of the suite's secrets, as stored), but a
        # result's outputs left on the host are not fetched again: the digests its line holds of them (info.files)
        # are compared with the stored ones (spool_check)
        ev = await self.enrich(raw)
        prefix.compare(raw, ev)

    def _refuse_changed(self, prefix: StoredPrefix) -> None:
        if prefix.problems:
            raise changed_spool_error(self.host.name, self._spool_text(), self.r.run_id, prefix.problems)

    def _spool_text(self) -> str:
        return run_dir_text(self.host, self.r.run_id) + "events.jsonl"

    async def _started(self, lines: AsyncIterator[Line], start: _Start) -> None:
        """Read the start's answer (within ``START_TIMEOUT_S`` plus the lease wait). Raises the host's error when
        the run did not start (GPUs busy, the run dir not writable, the agent's own message with its exit
        status), CommandTimeout, or what the stream raised."""
        try:
            first = await asyncio.wait_for(lines.__anext__(), START_TIMEOUT_S + start.wait_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise CommandTimeout(self.host.name, start.argv[1:3], START_TIMEOUT_S + start.wait_s) from None
        except StopAsyncIteration:
            first = b""
        doc = start_answer(first) if isinstance(first, bytes) else {}
        if "started" in doc and "error" not in doc:
            self.start_answered = True
            self.r.observer.host_state(self.host.name, "started")
            return
        status: int | None = 0
        try:  # the refusal's exit status: the agent exits right after its answer
            async for _ in lines:
                pass
        except RemoteCommandError as exc:
            if exc.exit_status is None:
                raise  # killed by a signal: the error names it
            status = exc.exit_status
        if doc.get("code") == "already_running" and self.reconnects > 0:
            # sent again after a drop: the worker the first start launched runs (same run id, same spec)
            self.start_answered = True
            self.r.observer.host_state(self.host.name, "started", "the first start launched it before the drop")
            raise _Reattach()
        raise start_refused(self.host, start.argv, doc, status, wait_s=start.wait_s)

    def observe(self, ev: Event) -> str | None:
        obs, name = self.r.observer, self.host.name
        if ev.type == "hello":
            total = ev.data.get("cases_total")
            self.total = total if isinstance(total, int) else self.total
            obs.host_state(name, "running")
            obs.case_progress(name, self.results + self.errors, self.total, None)
        elif ev.type == "case_start":
            obs.case_progress(name, self.results + self.errors, self.total, ev.case)
        elif ev.type == "result":
            self.results += 1
            obs.case_progress(name, self.results + self.errors, self.total, ev.case)
        elif ev.type == "error" and ev.data.get("line_type") == "done":
            return "failed"  # a done line at the wrong position: the end, untrusted (no counts are stored)
        elif ev.type == "error":
            if ev.case is not None:
                self.errors += 1
                obs.case_progress(name, self.results + self.errors, self.total, ev.case)
            obs.host_state(name, "error", str(ev.data.get("message", ""))[:200])
        elif ev.type == "done":
            self.done_ts = ev.ts
            return str(ev.data.get("status", "completed"))
        return None

    async def finish(self) -> HostOutcome:
        """Judge the host from the store (``ingest.host_verdict``: the agent's done counts against the stored
        rows), record the verdict and the analysis, and return the outcome with the store's counts."""
        name, w = self.host.name, self.r.writer
        info: dict[str, Any] = {"reconnects": self.reconnects}
        if self.first_drop is not None:
            info["first_drop"] = self.first_drop
        # any sweep over M with time_ms, from every stored result of the host (also those before a resume)
        page = await w.call(self.r.store.results, self.r.run_id, host=name, status="ok", limit=100_000)
        points = moe_points((r.case, r.metrics) for r in page.items)
        if points:
            info["plateau"] = sweep_plateau(points).to_dict()
        verdict, results, errors = await self.r.stored_verdict(name)  # reads counts and rows: info plays no part
        if self.past_done is not None:  # as orch runs import judges the same spool: the account is not whole
            verdict = HostVerdict("failed", "; ".join(x for x in (verdict.error, past_done_note(*self.past_done)) if x))
        await w.call(self.r.store.finish_host_run, self.r.run_id, name, verdict.stored_status, verdict.error,
                     info=info, ended_ts=self.done_ts)  # fmt: skip
        self.r.observer.host_state(name, verdict.status, verdict.error or "")
        return HostOutcome(name, verdict.status, results, errors, verdict.error, verdict.hint)

    async def cancel_remote(self) -> None:
        """``agent cancel`` where the agent was started. The run's ``ssh -G`` answers are reused: a Ctrl-C hits
        orch's whole process group, so an ``ssh -G`` started now could die of the next one."""
        if not needs_remote_stop(deployed=self.dep is not None, started=self.started):
            return
        resolver = None if self.host.connection == "local" else self.r.resolver
        # the lines of the host's spool in the store, as orch cancel passes them: a spool cut on the host below
        # them gets no done line (the agent's exit 6), on this path too (_cancel_all drained the ingest first)
        stored = await self.r.writer.call(self.r.store.last_seq, self.r.run_id, self.host.name) + 1
        await _cancel_on_host(self.host, self.r.run_id, dep=self.dep, timeout_s=self.r.req.timeout_s,
                              resolver=resolver, stored=stored)  # fmt: skip


def _dropped(exc: OrchError, hr: _HostRun, run_id: str) -> OrchError:
    """``exc``, or the host's error for a dropped connection (``resume.dropped_error``)."""
    return dropped_error(exc, host=hr.host.name, started=hr.started, run_id=run_id)


def _public_env(registry: Registry, suite: str) -> frozenset[str]:
    command = registry.get(suite).command
    return command.public_env if command is not None else frozenset()


class Runner:
    def __init__(
        self,
        inventory: Inventory,
        store: Store | Future[Store],
        req: RunRequest,
        observer: Observer | None = None,
        registry: Registry | None = None,
    ) -> None:
        """``registry``: the suites to run from (default: the built-ins; the CLI adds the user suite files).
        ``store``: the store, or a Future of it still opening (``run`` needs it only once the facts are read)."""
        self.inventory = inventory
        self.req = req
        self.registry = registry or builtin_registry()
        self.observer: Observer = observer or NullObserver()
        self.writer = StoreWriter(store)
        self.ingest = IngestWriter(  # the store is taken on its thread: it may still be opening (StoreWriter)
            lambda batches: self.writer.call(lambda: self.writer.store.ingest_many(batches)),
            batch_max=INGEST_BATCH_MAX, queue_max=INGEST_QUEUE_MAX,
        )  # fmt: skip
        self.run_id = ""
        self._resolver: SshResolver | None = None  # one per run()/resume(): ssh -G and known_hosts read once
        self._abandon = asyncio.Event()  # a third Ctrl-C: stop waiting for the remote stops (abandon_cancel)
        self._concluded = False  # the run's final status is stored: a late Ctrl-C changes nothing
        self._collect_only = False  # orch cancel's collection: follow the stopped agents' spools, never start one
        self._noted_presets: set[Any] = set()  # presets already passed to Store.note_chosen_preset by this process

    @property
    def store(self) -> Store:
        return self.writer.store

    def abandon_cancel(self) -> None:
        """Stop waiting for the hosts' remote stops (a third Ctrl-C): the cancel stores the run ``cancelled`` at
        once, each host whose stop was not confirmed naming it (``resume.interrupted_host_error``). Call it from
        the event loop's thread (a signal handler added with ``loop.add_signal_handler``)."""
        self._abandon.set()

    @property
    def resolver(self) -> SshResolver:
        """The run's ``ssh -G`` answers and known_hosts files, built when the first SSH host connects."""
        if self._resolver is None:
            from orchestrator.transport.sshconfig import SshResolver

            self._resolver = SshResolver()
        return self._resolver


    async def run(self) -> RunOutcome:
        """Create the run and run it on every selected host. Raises SelectionError/SuiteError before starting, and
        ConfigError when the local agent cache cannot be written (once, not as every host's failure)."""
        self._resolver = None
        agent_artifact()
        slurm = self.inventory.slurm_group(self.req.selector)
        if slurm is not None:  # one sbatch job whose nodes become the hosts (orchestrator/slurm/)
            from orchestrator.slurm.service import SlurmDriver

            await self.writer.ready()
            heap.settle()  # the imports are done: ingest's collections no longer walk them
            return await SlurmDriver(self, slurm).run()
        validate_request(self.req, self.registry)
        hosts = self.inventory.select(self.req.selector)
        try:
            allowed = check_drift_fields(self.req.allow_drift)
        except ValueError as exc:
            raise UsageError(f"--allow-drift: {exc}", "name a field from orch fleet's table") from None
        runs = {h.name: _HostRun(self, h) for h in hosts}
        view, failed = await self._preflight(hosts, runs, allowed)
        await self.writer.ready()  # opened meanwhile on its own thread (a bad URL or schema raises here)
        heap.settle()  # the imports are done and the hosts reached: ingest's collections no longer walk them
        if hosts and len(failed) == len(hosts):  # no host got past connect/facts: no run to store or to be latest
            return await self._nothing_started(hosts, runs, failed)
        params = {"sets": dict(self.req.sets), "repeat": self.req.repeat, "seed": self.req.seed,
                  "preset": self.req.preset}  # fmt: skip
        await self.writer.call(self.store.upsert_hosts, [(h.name, h.address, h.group, dict(h.labels)) for h in hosts])
        creating = asyncio.ensure_future(self.writer.call(
            self.store.create_run,
            suite=self.req.suite,
            params=params,
            preset=self.req.preset,
            label=self.req.label,
            hosts=[h.name for h in hosts],
            started_by=f"{getpass.getuser()}@{socket.gethostname()}",
            started_on=socket.gethostname(),
        ))
        try:
            self.run_id = await asyncio.shield(creating)
        except asyncio.CancelledError:  # Ctrl-C: the store thread creates the run anyway; it is stored cancelled
            self.run_id = await creating
            await asyncio.shield(self._cancel_all(list(runs.values())))
            raise
        return await self._cancelling(list(runs.values()), self._started_run(hosts, runs, failed, view))

    async def _started_run(
        self, hosts: list[Host], runs: dict[str, _HostRun], failed: dict[str, OrchError], view: FleetView
    ) -> RunOutcome:
        await self.writer.call(
            self.store.set_run_info,
            self.run_id,
            {"orch": version_info().as_dict(), "fleet": view.to_dict(), **replay_info(self.req),
             **suite_origin(self.registry, self.req.suite), "controller": controller.this_process()},  # fmt: skip
        )
        return await self._drive(hosts, resume=False, runs=runs, failed=failed)

    async def _nothing_started(
        self, hosts: list[Host], runs: dict[str, _HostRun], failed: dict[str, OrchError]
    ) -> RunOutcome:
        """Every host failed before starting (connect, host key, facts): nothing is stored — no run that
        ``latest`` would pick, with 0 results — and no host directory is named. ``run_id`` is empty."""
        outs = []
        for h in hosts:
            await runs[h.name].drop()
            exc = failed[h.name]
            msg = exc.message.removeprefix(f"{h.name}: ")
            self.observer.host_state(h.name, "failed", msg)
            outs.append(HostOutcome(h.name, "failed", error=msg, hint=exc.hint or None))
        await self.close_store()
        return RunOutcome("", self.req.suite, "failed", outs)

    async def _preflight(
        self, hosts: list[Host], runs: dict[str, _HostRun], allowed: tuple[str, ...]
    ) -> tuple[FleetView, dict[str, OrchError]]:
        """Every host's facts, read before any host starts; the fleet view they make; and the gate: raises
        DriftError when ``--require-uniform`` (or a group's ``require_uniform:``) meets a difference outside
        ``allowed``. A host whose facts could not be read is returned in the failures (it fails as a value)."""
        many = len(hosts) > self.req.concurrency

        async def gather(h: Host) -> dict[str, Any]:
            facts = await runs[h.name].gather()
            if many:  # hold at most `concurrency` connections (memory and open files stay flat per host)
                await runs[h.name].drop()
            return facts

        outcomes = await fanout(hosts, gather, concurrency=self.req.concurrency)
        failed = {o.host.name: o.error for o in outcomes if o.error is not None}
        view = fleet_view(
            [(o.host.name, o.host.group, o.value) for o in outcomes if o.error is None],
            [(name, runs[name].host.group, err.message) for name, err in failed.items()],
        )
        gated = None if self.req.require_uniform else {h.group for h in hosts if h.require_uniform}
        if self.req.require_uniform or gated:
            diffs = gate(view, allowed, gated)
            if diffs:
                for hr in runs.values():
                    await hr.drop()
                raise DriftError(diffs, describe(diffs))
        return view, failed

    async def stored_verdict(self, host: str) -> tuple[HostVerdict, int, int]:
        """The host's verdict from what the store holds, and its stored result and error counts."""
        rec = await self.writer.call(self.store.get_host_run, self.run_id, host)
        if rec is None:
            return HostVerdict("failed", "no host run stored"), 0, 0
        judged = await self.writer.call(self.store.judged_errors, self.run_id, host) if rec.errors else 0
        # the first error row's message; the host run's error count is the number of its error rows (Store.ingest
        # keeps it so), so a host without one is not asked for it (a read per host at the end of every run)
        first = (
            (await self.writer.call(self.store.results, self.run_id, host=host, status="error", limit=1)).items
            if rec.errors
            else []
        )
        cases = await self.writer.call(self.store.case_indices, self.run_id, host)  # every case's one outcome
        verdict = host_verdict(rec.done_counts, results=rec.results, errors=rec.errors, judged=judged,
                               first_error=first[0].error if first else None, cases_total=rec.cases_total,
                               case_indices=cases)  # fmt: skip
        return verdict, rec.results, rec.errors

    async def collect_stopped(self, run_id: str, hosts: Sequence[str]) -> RunOutcome:
        """``orch cancel``, once ``hosts``' agents answered ``agent cancel``: collect what their spools hold beyond
        the stored ``last_seq``, up to each agent's ``done`` line, as :meth:`resume` does — a host whose agent had
        finished ends with its own verdict and results, a stopped one ``cancelled`` — and never start an agent.
        Raises what :meth:`resume` raises (SuiteError when the run's suite is not known here)."""
        self._collect_only = True
        return await self.resume(run_id, only=hosts)

    async def resume(self, run_id: str, *, only: Sequence[str] | None = None) -> RunOutcome:
        """Reattach to a run: follow every host whose ``done`` line is not stored from its last stored position —
        also in a run already marked partial or failed because a connection was lost, or cancelled (then only
        collecting: no agent is started) — then recompute the run's status. Raises UsageError for a run whose
        every host's done line is stored. ``only``: these hosts of the run (orch cancel's collection)."""
        self._resolver = None
        agent_artifact()
        await self.writer.ready()
        heap.settle()  # the imports are done: ingest's collections no longer walk them
        detail = await self.writer.call(self.store.get_run, run_id)
        states = await self.writer.call(self.store.host_run_states, run_id)
        refused = resume_refusal(detail.id, detail.status, [st.host for st in states if not st.done])
        if refused is not None:
            raise UsageError(refused.message, refused.hint)
        if detail.status == "cancelled":  # its agents were stopped: collect what their spools hold, start nothing
            self._collect_only = True
        self.run_id = detail.id
        require_suite(self.registry, detail.suite, detail.id, detail.info)  # before any host: exit 2, --suite-dir
        self.req = RunRequest(
            suite=detail.suite,
            selector=",".join(detail.hosts),
            preset=detail.preset,
            label=detail.label,
            timeout_s=self.req.timeout_s,
            concurrency=self.req.concurrency,
            wait_s=self.req.wait_s,
            stopped_limit_s=self.req.stopped_limit_s,  # this invocation's (ORCH_WORKER_STOPPED_S), not the default
            silent_limit_s=self.req.silent_limit_s,
            **resume_fields(detail.params, detail.info),
        )
        # this process drives the run now (`orch runs show` tells a run left by a dead controller from this one)
        await self.writer.call(self.store.set_run_info, run_id, {"controller": controller.this_process()})
        if isinstance(detail.info.get("slurm"), dict):  # reattach to the Slurm job and its nodes' spools
            from orchestrator.slurm.service import SlurmDriver, slurm_group_of

            group = slurm_group_of(self.inventory, detail.info["slurm"])
            return await SlurmDriver(self, group).resume(detail.info["slurm"])
        hosts = [self.inventory.host(h) for h in detail.hosts if only is None or h in only]
        runs = {h.name: _HostRun(self, h) for h in hosts}
        return await self._cancelling(list(runs.values()), self._drive(hosts, resume=True, runs=runs))

    async def _cancelling(self, runs: list[_HostRun], work: Coroutine[Any, Any, RunOutcome]) -> RunOutcome:
        """``work`` (a stored run driven on its hosts); on task cancellation (Ctrl-C) before the run's final status
        is stored, :meth:`_cancel_all` runs to its end, shielded from further cancellation, then the
        cancellation goes on."""
        try:
            return await work
        except asyncio.CancelledError:
            if not self._concluded:
                await asyncio.shield(self._cancel_all(runs))
            raise

    async def _drive(
        self,
        hosts: list[Host],
        *,
        resume: bool,
        runs: dict[str, _HostRun] | None = None,
        failed: dict[str, OrchError] | None = None,
    ) -> RunOutcome:
        runs = runs or {h.name: _HostRun(self, h) for h in hosts}
        preflight_failed = failed or {}
        states = {s.host: s for s in await self.writer.call(self.store.host_run_states, self.run_id)}

        async def one(host: Host) -> HostOutcome:
            hr = runs[host.name]
            if host.name in preflight_failed:
                raise preflight_failed[host.name]
            st = states.get(host.name)
            step = host_step(st, resume=resume)
            if step == "finish":  # orch stopped between storing done and judging the host
                return await hr.finish()
            if step == "judge":  # nothing left to collect: judged again from the store
                verdict, results, errors = await self.stored_verdict(host.name)
                return HostOutcome(host.name, verdict.status, results, errors, verdict.error)
            if resume:  # an ended host run tried again: its old error is history before this attempt can fail too
                await self.writer.call(self.store.reopen_host_run, self.run_id, host.name)
            try:
                return await self._host(hr, resume=resume, started=st is not None and st.started)
            except OrchError as failure:
                exc = _dropped(failure, hr, self.run_id)
                msg = exc.message.removeprefix(f"{host.name}: ")
                ended = "cancelled" if self._collect_only else "failed"  # a cancelled run stays cancelled
                await self.writer.call(self.store.finish_host_run, self.run_id, host.name, ended, msg)
                self.observer.host_state(host.name, ended, msg)
                return HostOutcome(host.name, ended, hr.results, hr.errors, msg, exc.hint or None)
            finally:
                await hr.drop()

        outcomes = await fanout(hosts, one, concurrency=self.req.concurrency)
        results = []
        for o in outcomes:
            if o.value is not None:
                results.append(o.value)
            else:
                msg = o.error.message if o.error else "unknown failure"
                await self.writer.call(self.store.finish_host_run, self.run_id, o.host.name, "failed", msg)
                self.observer.host_state(o.host.name, "failed", msg)  # e.g. its facts could not be read
                hint = o.error.hint if o.error is not None and o.error.hint else None
                results.append(HostOutcome(o.host.name, "failed", error=msg, hint=hint))
        stored = await self.writer.call(self.store.get_run, self.run_id)
        for out in results:  # counts always come from the store, never from what the follower saw go by
            rec = stored.host_run(out.host)
            out.results, out.errors = (rec.results, rec.errors) if rec is not None else (0, 0)
        by_name = {h.name: h for h in hosts}
        for out in results:  # named only where the agent was started: never a directory that was not made
            st, hr = states.get(out.host), runs.get(out.host)
            made = (hr is not None and hr.started) or (st is not None and st.started)
            out.state_dir = run_dir_text(by_name[out.host], self.run_id) if made and out.host in by_name else None
        status = run_status(results)
        await self.writer.call(self.store.finish_run, self.run_id, status)
        self._concluded = True
        await self.close_store()
        return RunOutcome(self.run_id, self.req.suite, status, results)

    async def _host(self, hr: _HostRun, *, resume: bool, started: bool = False) -> HostOutcome:
        """One host's run; with ``resume``, reattach to its agent (``started``: the store says the agent was
        started there, so a missing spool is an error rather than a run to start now)."""
        name = hr.host.name
        spec, summary = await hr.prepare()
        assert hr.dep is not None and hr.t is not None
        agent = agent_argv(hr.host, hr.dep)
        from_seq = 0
        if resume:  # (an ended host run was reopened by the caller: its old error is history)
            res = await hr.t.run([*agent, "status", self.run_id, *run_opts(hr.host)], timeout_s=120, check=False)
            # exit 4: no such run on the host; anything else unexpected is the agent's error
            status = {"state": AGENT_UNKNOWN_RUN} if res.exit_status == AGENT_EXIT_NO_RUN else res_json(hr.t, res)
            if res.exit_status == AGENT_EXIT_WRITE:  # the spool cannot be read (EIO, a FIFO ...): never resumed
                raise spool_io_error(hr.host, status, "agent status: the run's spool cannot be read")
            last_seq = await self.writer.call(self.store.last_seq, self.run_id, name)
            plan = reattach_plan(str(status.get("state")), started=started, last_seq=last_seq, run_id=self.run_id,
                                 host=name, spool=run_dir_text(hr.host, self.run_id) + "events.jsonl")  # fmt: skip
            if isinstance(plan, Lost):
                raise plan.error(name)
            if isinstance(plan, Reattach):
                hr.started = True
                self.observer.host_state(name, "reattached", plan.detail)
                await self._follow_counted(hr, plan.from_seq)
                return await hr.finish()
            if self._collect_only:  # orch cancel: an agent never started there is not started now
                await self.writer.call(self.store.finish_host_run, self.run_id, name, "cancelled", CANCELLED_BY_USER)
                return HostOutcome(name, "cancelled", error=CANCELLED_BY_USER)
            from_seq = plan.from_seq
        await self.writer.call(
            self.store.start_host_run, self.run_id, name, facts=summary, agent_version=hr.dep.agent_sha,
            build_sha=hr.dep.current_build,
            info={"spec": redact_spec(spec, _public_env(self.registry, self.req.suite)),
                  "preset": spec.get("preset"), "gpu_spec": hr.gpu.key if hr.gpu else None},
        )  # fmt: skip
        if self.req.preset is None and spec.get("preset") not in self._noted_presets:
            # the run records the preset its hosts chose (when they agree). Store.note_chosen_preset reads every
            # host run's info (quadratic over a fleet); a host choosing a preset that an earlier call of this
            # process already saw stored cannot change its answer, so it is asked once per distinct preset
            self._noted_presets.add(spec.get("preset"))
            await self.writer.call(self.store.note_chosen_preset, self.run_id)
        if self.req.wait_s:
            self.observer.host_state(name, "starting", f"waits up to {self.req.wait_s:g} s for its GPUs")
        started_by = f"{getpass.getuser()}@{socket.gethostname()}"
        doc = {**spec, "facts": hr.facts, "started_by": started_by, "telemetry_ms": self.req.telemetry_ms}
        argv = start_argv(agent, hr.host, self.run_id, stopped_limit_s=self.req.stopped_limit_s,
                          heartbeat_s=heartbeat_interval_s(self.req.silent_limit_s))  # fmt: skip
        start = _Start(argv, start_input(doc, wait_s=self.req.wait_s), self.req.wait_s)
        hr.started = True  # from here a Ctrl-C or cancel stops whatever the start launches on the host
        await hr.follow(from_seq, start)
        return await hr.finish()

    async def _follow_counted(self, hr: _HostRun, from_seq: int) -> str:
        if from_seq > 0:
            detail = await self.writer.call(self.store.get_run, self.run_id)
            rec = detail.host_run(hr.host.name)
            if rec is not None:
                hr.results, hr.errors, hr.total = rec.results, rec.errors, rec.cases_total
        return await hr.follow(from_seq)

    async def close_store(self) -> None:
        """Commit what the hosts queued, then stop the store writers (the end of a run, cancelled or not)."""
        await self.ingest.close()
        self.writer.close()

    async def _cancel_all(self, runs: list[_HostRun]) -> None:
        """Ctrl-C: stop every host's agent (``agent cancel``, each within ``CANCEL_WAIT_S``, all at once), then
        store each host run that had not ended ``cancelled`` (its error says whether the stop was confirmed) and
        the run ``cancelled``. :meth:`abandon_cancel` stops the waiting early; the store is written either way."""
        await self.ingest.drain()  # the batches of the cancelled follow loops are committed before the verdicts
        stops = {hr.host.name: asyncio.ensure_future(asyncio.wait_for(hr.cancel_remote(), CANCEL_WAIT_S))
                 for hr in runs}  # fmt: skip
        abandoned = asyncio.ensure_future(self._abandon.wait())
        pending: set[asyncio.Future[Any]] = set(stops.values())
        while pending and not abandoned.done():
            _, pending = await asyncio.wait(pending | {abandoned}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(abandoned)
        abandoned.cancel()
        states = {st.host: st.status for st in await self.writer.call(self.store.host_run_states, self.run_id)}
        for name, stop in stops.items():
            failure = _stop_failure(stop)
            if states.get(name) in HOST_ENDED_STATUSES:  # it finished before the Ctrl-C: its verdict stands
                continue
            status, said = "cancelled", interrupted_host_error(self.run_id, failure)
            if failure is not None and _spool_cut(stop):  # stopped, but no done written: as orch cancel does
                v = cancel_verdict(states.get(name), failure, self.run_id, spool_cut=True)
                status, said = v.stored_status, v.stored_error or said
            if name in states:
                await self.writer.call(self.store.finish_host_run, self.run_id, name, status, said)
            if failure is not None:
                self.observer.host_state(name, status, said)
        await self.writer.call(self.store.finish_run, self.run_id, "cancelled")
        self._concluded = True
        await self.close_store()


def _spool_cut(stop: asyncio.Future[Any]) -> bool:
    """Whether a host's finished ``agent cancel`` answered exit 6: the worker was stopped, but the spool has fewer
    lines than orch stored (cut or rewritten on the host), so no done line was written."""
    if not stop.done() or stop.cancelled():
        return False
    exc = stop.exception()
    return isinstance(exc, RemoteCommandError) and exc.exit_status == AGENT_EXIT_SPOOL_CHANGED


def _stop_failure(stop: asyncio.Future[Any]) -> str | None:
    """Why a host's ``agent cancel`` is not confirmed (None: it answered); a stop still waited on is cancelled."""
    if not stop.done():
        stop.cancel()
        return "Ctrl-C was pressed again before it answered"
    if stop.cancelled():
        return "it was cancelled"
    exc = stop.exception()
    if exc is None:
        return None
    if isinstance(exc, OrchError):
        return exc.message
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {CANCEL_WAIT_S:g} s"
    return f"{type(exc).__name__}: {exc}"


async def _cancel_on_host(
    host: Host, run_id: str, *, dep: HostDeploy | None, timeout_s: float, resolver: SshResolver | None = None,
    stored: int | None = None,
) -> None:
    """On a new connection, ``agent cancel RUN_ID`` (the whole remote process group). Without ``dep`` (another
    orch process started the run) the deploy check finds the agent first. ``stored``: lines of the host's spool
    in the store; the agent writes no ``done`` into a spool with fewer (cut on the host: exit 6, named). Raises
    OrchError."""
    t = await open_transport(host, timeout_s=timeout_s, resolver=resolver)
    try:
        if dep is None:
            dep = await deploy_host(t, host)
        position = ["--stored", str(stored)] if stored else []
        await agent_json(t, [*agent_argv(host, dep), "cancel", run_id, *position, *run_opts(host)], timeout_s=30)
    finally:
        await t.close()


async def cancel_run(
    inventory: Inventory, store: Store, run_id: str, *, timeout_s: float = 10.0, registry: Registry | None = None
) -> RunOutcome:
    """``orch cancel RUN_ID``: stop the agents of every host of the run, then collect what each stopped host's spool
    holds beyond the stored lines (``Runner.collect_stopped``: a host whose agent had already written ``done`` ends
    with its own verdict and results, not ``cancelled``), and store the run's status from its host runs.

    The collection needs the run's suite (``registry``: the built-ins by default; a user suite through
    ``--suite-dir`` or ``ORCH_SUITE_DIR``); without it, and for a host whose ``agent cancel`` failed, nothing is
    collected: the host run is stored ``cancelled`` (with the failure), as are the lines left on the host."""
    detail = store.get_run(store.resolve_run_id(run_id))
    refused = cancel_refusal(detail.id, detail.status,
                             unconfirmed=stop_unconfirmed([h.error for h in detail.host_runs]))  # fmt: skip
    if refused is not None:
        raise UsageError(refused.message, refused.hint)
    if isinstance(detail.info.get("slurm"), dict):  # scancel the job
        from orchestrator.slurm.service import cancel_slurm_run

        return await cancel_slurm_run(inventory, store, detail.id, detail.info["slurm"], timeout_s=timeout_s)

    positions = {h.host: h.last_seq + 1 for h in store.host_run_states(detail.id)}

    async def one(host: Host) -> HostOutcome:
        await _cancel_on_host(host, detail.id, dep=None, timeout_s=timeout_s, stored=positions.get(host.name))
        return HostOutcome(host.name, "cancelled")

    hosts = [inventory.host(h) for h in detail.hosts]
    outs = await fanout(hosts, one, deadline_s=timeout_s * 6)
    collected: dict[str, HostOutcome] = {}
    registry = registry or builtin_registry()
    stopped = [o.host.name for o in outs if o.ok]
    # a second cancel (its run stored cancelled, some stop not confirmed) collects too: a host that finished while
    # it could not be reached keeps its done's verdict and results (the retried stop collected none of them)
    collectable = detail.status in ("running", "cancelled")
    known = detail.suite in registry.names()
    if stopped and collectable and known:
        runner = Runner(inventory, store, RunRequest(suite=detail.suite, selector=None, timeout_s=timeout_s),
                        registry=registry)  # fmt: skip
        collected = {h.host: h for h in (await runner.collect_stopped(detail.id, stopped)).hosts}
    res = []
    for o in outs:
        if o.host.name in collected:
            res.append(dataclasses.replace(collected[o.host.name], state_dir=None, hint=None))
            continue
        rec = detail.host_run(o.host.name)
        failure = None if o.ok else (o.error.message if o.error else "?")
        cut = isinstance(o.error, RemoteCommandError) and o.error.exit_status == AGENT_EXIT_SPOOL_CHANGED
        v = cancel_verdict(rec.status if rec is not None else None, failure, detail.id, spool_cut=cut)
        if v.store:
            if failure is None and rec is not None and stop_unconfirmed([rec.error]):
                # this cancel stopped a host an earlier one could not: that note becomes history (earlier_errors)
                store.reopen_host_run(detail.id, o.host.name)
                store.finish_host_run(detail.id, o.host.name, "cancelled", CANCELLED_BY_USER)
            else:
                store.finish_host_run(detail.id, o.host.name, v.stored_status, v.stored_error)
        uncollected = None  # a stopped host whose spool may hold what no store row has: say how to collect it
        if o.ok and collectable and not known:
            uncollected = (f"what its spool holds beyond the stored lines was not collected: the run's suite "
                           f"{detail.suite!r} is not known here; collect it with orch run --resume "
                           f"{short_run_id(detail.id)} --suite-dir DIR (the suite's folder)")  # fmt: skip
        res.append(HostOutcome(o.host.name, v.status, error=v.error, hint=uncollected))
    final = store.get_run(detail.id)
    status = run_status(final.host_runs) if collected else "cancelled"
    store.finish_run(detail.id, status)
    # the counts are the store's (as runs show --json gives them), not this process's: it saw none of the lines
    # ingested by the orch that started the run
    stored = {h.host: h for h in final.host_runs}
    res = [dataclasses.replace(h, results=stored[h.host].results, errors=stored[h.host].errors)
           if h.host in stored else h for h in res]  # fmt: skip
    return RunOutcome(detail.id, detail.suite, status, res, stop_failed=tuple(o.host.name for o in outs if not o.ok))
