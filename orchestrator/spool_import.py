"""``orch runs import SPOOL [--host NAME]``: ingest a host's ``events.jsonl`` copied off a machine orch cannot reach
(an air-gapped node, or a spool kept from an earlier run) through the same path as a live run.

The same steps as the runner's follow loop: whole lines (``transport.lines.LineSplitter`` over the file, so a line
longer than the cap is one error row and memory stays bounded), each line an event at its position
(``ingest.line_event``), the runner's enrichment (command suites' parsers, roofline figures), ``Store.ingest``
(idempotent on (run, host, position): importing twice, or a spool orch already followed in part, stores each line
once), and at the ``done`` line the same reconciliation (``ingest.host_verdict``) and run status. Lines at positions
already stored are compared with the stored rows first (``spool_check.StoredPrefix``, the comparison a resumed run
makes too): a spool that conflicts is refused before anything of it is stored; lines after ``done`` are never
stored, on both paths (``spool_check.past_done_note``).

The run is the one named by the spool's ``hello`` (its ``run_id``); it is created when the store does not hold it,
started at the hello's ``ts`` — which must lie in the range every line's ts is held to (``protocol.TS_MIN`` ..
orch's clock + ``protocol.TS_AHEAD_S``): a hello outside it is refused (exit 2, naming ``PATH:1`` and the range),
any other line outside it is one error row, as on the live path.

A last line without its newline is never imported, even when its bytes are a whole JSON ``done`` line. The agent
writes every line whole with its newline in one write (``agents/orch_agent/spool.py``; a failed write is truncated
back), so a line without one is a copy made while the agent wrote it, or a copy that was cut: whether the bytes
are all of the line is not known. The live path does the same (``transport.lines``: an unfinished last line is
never yielded). The import says so — "the last line (N bytes) has no newline: the spool was copied while the agent
wrote it, or cut" — never that the file is empty, and leaves the host ``running`` (not ended: a fuller copy,
imported again, stores the rest). When those bytes read as a done line, it adds how to finish a copy that only
lost its final newline.
"""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator import heap, parsepool
from orchestrator.analysis.gpus import GpuSpec
from orchestrator.analysis.telemetry import mark as mark_telemetry
from orchestrator.errors import OrchError, StoreError, SuiteError, UsageError
from orchestrator.facts import host_facts_summary
from orchestrator.ingest import UNFINISHED_KEY, CaseList, HostVerdict, SpoolLines, host_verdict, is_done_line
from orchestrator.inventory import HOST_NAME_RE, Host, Inventory
from orchestrator.protocol import Event
from orchestrator.runner import INGEST_BATCH_MAX, HostOutcome, enrich_event, gpu_spec_for, run_status
from orchestrator.spool_check import StoredPrefix, hello_record_conflicts, past_done_note, shown
from orchestrator.store.records import HostRunRecord
from orchestrator.store.refusals import ingest_keeping
from orchestrator.store.repo import RUN_ID_RE, Store
from orchestrator.suites.command import command_result, parse_inputs
from orchestrator.suites.registry import Registry, SuiteDef, get_suite
from orchestrator.suites.secrets import scrub_event, secret_values
from orchestrator.transport.lines import MAX_LINE_BYTES, STREAM_CHUNK_BYTES, Line, LineSplitter
from orchestrator.wording import counted


@dataclass
class ImportOutcome:
    """What an import did. ``lines``: whole lines in the file; ``new_lines``: of those, the ones this process's
    transactions stored (the others were already stored, or another import of the same spool stored them first:
    the counts of concurrent imports add up to the lines); ``status``: the host's verdict (completed | partial |
    failed | cancelled), or ``unfinished`` when the spool has no ``done`` line; ``results``/``errors``: the
    store's counts for the host."""

    path: str
    run_id: str
    suite: str
    host: str
    created_run: bool
    lines: int
    new_lines: int
    status: str
    run_status: str
    results: int
    errors: int
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _lines(path: Path, splitter: LineSplitter) -> Iterator[Line]:
    """Whole lines of the file as the transports cut them; an unfinished last line stays in ``splitter``."""
    with open(path, "rb") as f:
        while chunk := f.read(STREAM_CHUNK_BYTES):
            yield from splitter.feed(chunk)


def _no_newline(path: Path, pending: int) -> str:
    """The sentence for ``pending`` bytes after the file's last newline (a last line without its newline), with
    how to finish the copy when those bytes read as a whole ``done`` line that only lost its newline."""
    says = (f"the last line ({pending:,} bytes) has no newline: the spool was copied while the agent wrote it, or "
            "cut; that line was not imported (the agent writes every line whole, with its newline)")  # fmt: skip
    if pending <= _DONE_LINE_MAX:
        try:
            with open(path, "rb") as f:
                f.seek(-pending, 2)
                doc = json.loads(f.read())
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict) and doc.get("type") == "done":
            says += ("; it reads as the done line: copy the spool again once the agent has ended, or, if this copy "
                     "is known whole but for its final newline, add it "
                     f"(printf '\\n' >> {shlex.quote(str(path))}) and import again")  # fmt: skip
    return says


_DONE_LINE_MAX = 64 * 1024  # a done line is ~150 bytes; a longer unfinished last line is not read back to look


def _hello(path: Path, first: Line | None, pending: int) -> Event:
    where = f"{path}:1"
    if first is None:
        if pending:
            raise UsageError(
                f"{path}: {_no_newline(path, pending)}; the file holds no whole line, nothing was imported",
                "copy the spool again once the agent has written its first line whole (its hello)",
            )
        raise UsageError(f"{path} is empty (0 bytes): not an orch agent spool", "pass a host's events.jsonl")
    ev = SpoolLines(0).event(first)
    if ev.type == "error" and ev.data.get("line_type") == "hello":  # a hello, refused for a field: say which
        message = str(ev.data.get("message"))
        clock = "(hello): ts " in message  # the host's clock, not the file: only then is the clock the fix
        raise UsageError(
            f"{where}: the hello line is refused: {message}; nothing was imported",
            "import the spool as the agent wrote it; " + ("a hello's ts is the host's clock when the run started (set "
            "the host's clock, e.g. with NTP, for later runs)" if clock else "the agent writes each line once, "
            "whole, and never edits it"),
        )
    if ev.type != "hello":
        raise UsageError(
            f"{where}: not an orch agent spool (the first line is not a hello event: "
            f"{ev.data.get('message', ev.type)})",
            "pass a host's events.jsonl, as the agent writes it under <orch_home>/runs/<run_id>/",
        )
    return ev


def import_spool(
    store: Store,
    path: Path,
    *,
    host: str | None,
    registry: Registry,
    inventory: Inventory | None = None,
    cap: int = MAX_LINE_BYTES,
) -> ImportOutcome:
    """Import one host's spool file into ``store``. Raises UsageError for a missing or foreign file, a run id
    that is not orch's, an unknown suite, or a host that cannot be told (give ``host``)."""
    if not path.is_file():
        raise UsageError(f"no spool file at {path}", "pass the path of a host's events.jsonl copied off the host")
    splitter = LineSplitter(cap)
    lines = _lines(path, splitter)
    first = next(lines, None)
    hello = _hello(path, first, splitter.pending)
    run_id, suite = hello.data.get("run_id"), hello.data.get("suite")
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise UsageError(f"{path}:1: the hello names run {run_id!r}, not an orch run id",
                         "import spools written by orch's agent (a run id is a UUID)")  # fmt: skip
    if not isinstance(suite, str):
        raise UsageError(f"{path}:1: the hello names no suite", "import a spool of a run that started its suite")
    try:
        suite_def = get_suite(suite, registry)
    except SuiteError as exc:  # a user suite is known only with --suite-dir: its hint says so
        raise SuiteError(f"{path}:1: the hello names suite {suite!r}, unknown to orch here", exc.hint) from None
    existing = _existing_hosts(store, run_id)
    name = _host_name(path, host, existing, run_id, hello)
    inv_host = next((h for h in inventory.hosts if h.name == name), None) if inventory is not None else None
    host_obj = inv_host or Host(name=name, group=_stored_group(store, name))
    raw_facts = hello.data.get("facts")
    facts: dict[str, Any] = raw_facts if isinstance(raw_facts, dict) else {}
    summary = host_facts_summary(facts)
    created = False
    if existing is None:
        created = _create_run(store, path, run_id, suite, name, hello)
        existing = None if created else _existing_hosts(store, run_id)  # another import made it meanwhile
    if existing is not None:
        _check_run(store, path, run_id, name, hello)
        if name not in existing:  # another host of a run already stored: a run's spools come one by one
            _add_host(store, run_id, name)
    if not {s.host: s for s in store.host_run_states(run_id)}[name].started:
        agent_version = hello.data.get("agent_version")
        store.start_host_run(run_id, name, facts=summary, build_sha=None, started_ts=hello.ts,
                             agent_version=agent_version if isinstance(agent_version, str) else "unknown")  # fmt: skip
    torch = facts.get("torch")
    device = "cuda" if isinstance(torch, dict) and torch.get("cuda_available") else "cpu"
    gpu = gpu_spec_for(host_obj, summary, device)
    try:
        return _ingest(store, path, run_id, name, suite_def, host_obj, gpu, hello, lines, splitter, cap, created)
    except UsageError:
        raise  # refused before anything of this spool was stored (a conflicting spool): the run is as it was
    except OrchError as exc:
        _end_failed_import(store, path, run_id, name, exc)
        raise


def _end_failed_import(store: Store, path: Path, run_id: str, host: str, exc: OrchError) -> None:
    """An import that stopped (the store refused a write, the file could not be read) leaves no run ``running``:
    the host run of an imported run is ``failed`` with why and what is kept, and the run's status recomputed.
    A live run's host (started by ``orch run``) is left to its runner."""
    with contextlib.suppress(OrchError):  # the store may be what failed: the original error is what to show
        detail = store.get_run(run_id)
        rec = detail.host_run(host)
        if detail.started_by != "orch runs import" or rec is None or rec.status not in ("pending", "running"):
            return
        kept = rec.results + rec.errors
        why = (f"the import of {path} stopped: {exc.message}; kept what was stored ({counted(kept, 'row')}); "
               f"rerun orch runs import {path} --host {host} to continue")  # fmt: skip
        store.finish_host_run(run_id, host, "failed", why)
        _run_status(store, run_id)


def _ingest(store: Store, path: Path, run_id: str, name: str, suite_def: SuiteDef, host_obj: Host,
            gpu: GpuSpec | None, hello: Event, lines: Iterator[Line], splitter: LineSplitter, cap: int,
            created: bool) -> ImportOutcome:  # fmt: skip
    suite = suite_def.name

    def enrich(ev: Event) -> Event:
        if suite_def.command is not None:  # the case's secret env values stay in the host's spool (secrets.py)
            cases = [ev.case or {}, *(u.get("case") for u in ev.data.get(UNFINISHED_KEY) or [] if isinstance(u, dict))]
            secrets = secret_values({"cases": cases}, suite_def.command.public_env)
            inputs = parse_inputs(ev)  # parsed in a worker process, bounded in time and memory (parsepool.py)
            parsed = parsepool.shared().parse(suite_def.command, *inputs) if inputs is not None else None
            ev = scrub_event(command_result(suite_def.command, ev, host_obj.group, parsed), secrets)
        return mark_telemetry(enrich_event(suite, ev, gpu))  # as the runner stores it: throttled/shared flags

    last = store.last_seq(run_id, name)
    stored = StoredPrefix.load(store, run_id, name) if last > 0 else None
    if stored is not None:
        stored.compare(hello, hello)
    batch: list[Event] = [hello] if last < 0 else []
    count, after_done, done_at, done_ts = 1, 0, None, None
    stored_lines: list[int] = []  # what this process's transactions stored: another import may store lines first
    # the case list the run sent (a live run's host_runs.info.spec; a run made by imports has none: not checked)
    started = store.get_host_run(run_id, name)
    spool = SpoolLines(1, cap=cap, cases=CaseList.from_info(started.info if started is not None else None))
    heap.settle()  # the store is open: ingest's collections no longer walk what the process has loaded
    for raw in lines:
        pos = count
        count += 1
        if done_at is not None:
            after_done += 1  # never stored: the agent writes nothing after done (spool_check.past_done_note)
            continue
        ev = spool.event(raw)
        if is_done_line(ev):
            done_at, done_ts = pos, ev.ts
        if pos <= last:
            if stored is not None:
                stored.compare(ev, enrich(ev))
            continue
        if stored is not None:
            _refuse(path, run_id, name, stored.problems)  # before anything of this spool is stored
            stored = None
        batch.append(enrich(ev))
        if len(batch) >= INGEST_BATCH_MAX:
            ingest_keeping(store, run_id, name, batch, lines_out=stored_lines)
            batch = []
    if stored is not None:
        _refuse(path, run_id, name, stored.problems)
    if batch:
        ingest_keeping(store, run_id, name, batch, lines_out=stored_lines)
    new = sum(stored_lines)
    detail = store.get_run(run_id)
    rec = detail.host_run(name)
    assert rec is not None
    past_done = past_done_note(after_done, done_at) if after_done and done_at is not None else None
    notes = [past_done] if past_done else []
    cut = _no_newline(path, splitter.pending) if splitter.pending else None
    if cut and done_at is not None:
        notes.append(cut)
    if rec.done_counts is None:
        why = cut or "the spool has no done line: the run had not finished on the host when it was copied"
        if done_at is not None:  # the spool is finished: end the host and the run as the live path does
            why = f"the done line (line {done_at}) was not stored; the host's end of the run is unknown"
            store.finish_host_run(run_id, name, "failed", why)
            rec = store.get_run(run_id).host_run(name)
            assert rec is not None
            status = _run_status(store, run_id)
            return ImportOutcome(str(path), run_id, suite, name, created, count, new, "failed", status,
                                 rec.results, rec.errors, "; ".join([why, *notes]))  # fmt: skip
        return ImportOutcome(str(path), run_id, suite, name, created, count, new, "unfinished", detail.status,
                             rec.results, rec.errors, "; ".join([why, *notes]))  # fmt: skip
    verdict = _verdict(store, run_id, rec)
    error = "; ".join([verdict.error, *notes] if verdict.error else notes) or None
    status, stored_status = verdict.status, verdict.stored_status
    if past_done:  # lines the store cannot hold at their place: the host's account is not whole, say so in it
        status = stored_status = "failed"
    if rec.status != stored_status or (error and error not in (rec.error or "")):
        store.finish_host_run(run_id, name, stored_status, error if past_done else verdict.error, ended_ts=done_ts)
    return ImportOutcome(str(path), run_id, suite, name, created, count, new, status,
                         _run_status(store, run_id), rec.results, rec.errors, error)  # fmt: skip


def _existing_hosts(store: Store, run_id: str) -> list[str] | None:
    from orchestrator.errors import NotFoundError

    try:
        return store.get_run(run_id).hosts
    except NotFoundError:
        return None


def _create_run(store: Store, path: Path, run_id: str, suite: str, host: str, hello: Event) -> bool:
    """Create the spool's run unless another writer (a concurrent import of a spool of the same run) just did:
    insert-or-get, so concurrent imports into a new store give one run and no error. True when this call made it.
    The run started when the agent wrote its hello (not at the import); its preset is the one in the run
    directory's ``spec.json`` beside the spool when that was copied too."""
    started = datetime.fromtimestamp(hello.ts, timezone.utc) if hello.ts is not None else None
    try:
        store.create_run(suite=suite, params={"imported_from": str(path)}, preset=_spec_preset(path), label=None,
                         hosts=[host], started_by="orch runs import", started_on=str(path), run_id=run_id,
                         started_at=started)  # fmt: skip
    except StoreError:  # a unique key taken meanwhile (runs.id, hosts.name): the run is there now, or this is real
        if _existing_hosts(store, run_id) is None:
            raise
        return False
    return True


def _spec_preset(path: Path) -> str | None:
    """The preset named by ``spec.json`` in the spool's directory (the agent's run directory), if it was copied
    with it and names one; None otherwise (the import does not need it)."""
    try:
        spec = json.loads((path.parent / "spec.json").read_text())
    except (OSError, ValueError):
        return None
    preset = spec.get("preset") if isinstance(spec, dict) else None
    return preset if isinstance(preset, str) and preset else None


def _add_host(store: Store, run_id: str, host: str) -> None:
    """Add ``host`` to the stored run (idempotent; a concurrent import adding the same host is no error)."""
    try:
        store.add_host_runs(run_id, [host])
    except StoreError:
        if host not in (_existing_hosts(store, run_id) or []):
            raise


def _host_name(path: Path, host: str | None, existing: list[str] | None, run_id: str, hello: Event) -> str:
    """The host whose spool ``path`` is: the one its hello names (agents since the hello's ``host``), which a
    ``--host`` that differs cannot override (a tester's import of one host's spool under another host's name stored
    its results twice, under both); else ``--host``, the run directory's name, or the run's only host. Raises
    UsageError when the hello and ``--host`` disagree, or when nothing tells the host."""
    written_for = hello.data.get("host")
    for name, where in ((written_for, f"{path}:1: the hello names host"), (host, "--host")):
        if isinstance(name, str) and name and not HOST_NAME_RE.fullmatch(name):
            raise UsageError(f"{where} {name!r}, which is not a host name; nothing was imported",
                             "a host name is 1-128 letters, digits and '._-', as in the inventory")  # fmt: skip
    if isinstance(written_for, str) and written_for:
        if host and host != written_for:
            raise UsageError(
                f"{path}:1: the spool was written for host {written_for!r} (its hello says so), not {host!r}; "
                "nothing was imported",
                f"orch runs import {path} --host {written_for} (or leave --host out): a host's results are stored "
                "under the host that measured them",
            )
        return written_for
    if host:
        return host
    spool = path.resolve()
    if spool.parent.parent.name == run_id and spool.parent.name:  # <orch_home>/runs/<run_id>/<host>/events.jsonl
        return spool.parent.name
    if existing is not None and len(existing) == 1:
        return existing[0]
    raise UsageError(
        f"which host wrote {path}? " + (f"run has hosts {', '.join(existing)}" if existing else "the run is new"),
        f"orch runs import {path} --host NAME",
    )


def _stored_group(store: Store, name: str) -> str:
    for rec in store.list_hosts():
        if rec.name == name:
            return rec.group or ""
    return ""


def _verdict(store: Store, run_id: str, rec: HostRunRecord) -> HostVerdict:
    """The host's verdict as the runner gives it (``Runner.stored_verdict``): judged errors counted as the agent's
    results, the first error's text shown with the count of failed cases."""
    cases = store.case_indices(run_id, rec.host)
    if not rec.errors:
        return host_verdict(rec.done_counts, results=rec.results, errors=0, cases_total=rec.cases_total,
                            case_indices=cases)  # fmt: skip
    first = store.results(run_id, host=rec.host, status="error", limit=1).items
    judged = store.judged_errors(run_id, rec.host)
    return host_verdict(rec.done_counts, results=rec.results, errors=rec.errors, judged=judged,
                        first_error=first[0].error if first else None, cases_total=rec.cases_total,
                        case_indices=cases)  # fmt: skip


def _run_status(store: Store, run_id: str) -> str:
    """Recompute the run's status when every host run has ended (done stored, or failed/cancelled); else keep it."""
    detail = store.get_run(run_id)
    outcomes: list[HostOutcome] = []
    for rec in detail.host_runs:
        if rec.done_counts is not None:  # a stored failure stands (lines after its done line, say)
            v = _verdict(store, run_id, rec)
            status = "failed" if rec.status == "failed" else v.status
            outcomes.append(HostOutcome(rec.host, status, rec.results, rec.errors))
        elif rec.status in ("failed", "cancelled"):
            outcomes.append(HostOutcome(rec.host, rec.status, rec.results, rec.errors))
        else:
            return detail.status
    run = run_status(outcomes)
    if run != detail.status:
        store.finish_run(run_id, run)
    return run


def _check_run(store: Store, path: Path, run_id: str, host: str, hello: Event) -> None:
    """Refuse (UsageError, exit 2) a spool whose hello conflicts with the stored run: a host that is not one of a
    live run's hosts (``orch run`` fixed them; only a run made by imports takes new hosts), another suite, or an
    agent version, case count or host facts (hostname, GPU names/UUIDs, driver) that differ from the host run's
    (``spool_check.hello_record_conflicts``, the comparison a resume makes)."""
    detail = store.get_run(run_id)
    if detail.started_by != "orch runs import" and host not in detail.hosts:
        raise UsageError(
            f"{path}: run {run_id} was started by orch run on {', '.join(detail.hosts)}; {host} is not one of its "
            "hosts; nothing was imported",
            "import the spool with --host naming the host that wrote it (one of the run's hosts); a spool of "
            "another run needs its own run",
        )
    _refuse(path, run_id, host, hello_record_conflicts(hello, suite=detail.suite, rec=detail.host_run(host)))


def _refuse(path: Path, run_id: str, host: str, problems: list[str]) -> None:
    if problems:
        raise UsageError(
            f"{path} conflicts with the stored run {run_id} (host {host}): {shown(problems)}; nothing was imported",
            "import the spool of this run and host (check the path and --host); a spool of another run needs "
            "its own run",
        )
