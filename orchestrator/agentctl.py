"""How orch talks to the agent about one run on one host — the parts beyond starting and following it.

- :func:`run_opts`: ``--host NAME [--orch-home DIR]``, given to every run command of the agent, so the run's
  files are ``<orch_home>/runs/<run_id>/<host>/`` (per host: two hosts sharing an NFS home never share a spool).
- :func:`dead_worker_error`: a worker that died without ``done`` becomes the host's error, with the reason the
  worker recorded (e.g. ``cannot write .../events.jsonl: No space left on device (ENOSPC)``) when it could.
- :func:`start_argv` / :func:`start_input` / :func:`start_answer`: ``agent start --spec - --follow`` with the spec
  on stdin (never argv: ``ps`` would show env values, and Linux caps one argument at 128 KiB); its first stdout
  line is the start's answer, the rest is the spool as ``follow`` prints it (one SSH session and one remote
  Python start for both); GPUs leased by another run become a host error naming the holder.
- :func:`with_full_outputs`: a ``command`` result whose outputs were too large to travel in the line
  (``info.outputs_complete`` false, see the agent's ``benches/command.py``) gets them fetched from the host
  (``agent logs --parsed``) before orch parses it, so parsing is correct for outputs of any size.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.errors import HostError, OrchError, RemoteCommandError, exit_text
from orchestrator.inventory import Host
from orchestrator.protocol import Event
from orchestrator.store.compute import short_run_id
from orchestrator.textlines import output_lines
from orchestrator.transport.base import Transport

FETCH_TIMEOUT_S = 600.0
DEFAULT_ORCH_HOME = "~/.orch"


def run_opts(host: Host) -> list[str]:
    """The agent options naming the host's run directory."""
    return ["--host", host.name, *(["--orch-home", host.orch_home] if host.orch_home else [])]


def run_dir_text(host: Host, run_id: str) -> str:
    """Where the host keeps this run, as a user would type it: ``~/.orch/runs/<run_id>/<host>/``."""
    return f"{(host.orch_home or DEFAULT_ORCH_HOME).rstrip('/')}/runs/{run_id}/{host.name}/"


START_TIMEOUT_S = 120.0


def start_argv(agent: list[str], host: Host, run_id: str, *, stopped_limit_s: float, heartbeat_s: float) -> list[str]:
    """``agent start --spec - --follow --run-id RUN_ID``: start the run's worker, then follow its spool on the same
    channel. The run id is there for the process table: the worker is forked from ``start`` and keeps its command
    line, so ``ps``/``pgrep RUN_ID`` find a run's processes on the host (the agent refuses one that differs from the
    spec's). ``stopped_limit_s``: the follow ends (exit 7) once the worker has been stopped that long (s).
    ``heartbeat_s``: the follower's heartbeat on stderr every that many s (``transport.liveness``)."""
    return [*agent, "start", "--spec", "-", "--follow", "--stopped-limit-s", f"{stopped_limit_s:g}",
            "--heartbeat-s", f"{heartbeat_s:g}", "--run-id", run_id, *run_opts(host)]  # fmt: skip


def start_input(spec: dict[str, Any], *, wait_s: float = 0.0) -> bytes:
    """The spec as the agent reads it on stdin, plus ``lease_wait_s`` (``wait_s``: how long the agent waits for
    GPUs another run holds)."""
    return json.dumps({**spec, "lease_wait_s": wait_s}).encode("utf-8")


def start_answer(line: bytes) -> dict[str, Any]:
    """The start's answer (the first stdout line of ``start --follow``): ``{"run_id", "pid", "spool", "started"}``
    when it started (or found the run finished), else the agent's error document ``{"error", "code", ...}``;
    ``{}`` for a line that is neither."""
    try:
        doc = json.loads(line)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def start_refused(host: Host, argv: list[str], doc: dict[str, Any], exit_status: int | None, *,
                  wait_s: float = 0.0) -> OrchError:  # fmt: skip
    """The host's error for a start that did not start: GPUs busy (naming the holder), the run dir cannot be
    written, else the agent's own message as a RemoteCommandError."""
    if doc.get("code") == "gpu_busy":
        waited = f"waited {wait_s:g} s; " if wait_s else ""
        return HostError(
            host.name,
            str(doc.get("error")),
            f"{waited}wait for it with orch run ... --wait SECONDS, or see the leases with orch doctor",
        )
    if doc.get("code") in ("write_failed", "read_failed"):
        return HostError(host.name, str(doc.get("error")), write_hint(str(doc.get("error"))))
    why = str(doc.get("error") or f"no start answer ({exit_text(exit_status)})")
    return RemoteCommandError(host.name, argv[1:3], exit_status, why)


SPOOL_TAMPERED_HINT = "something on the host wrote to the run's events.jsonl (only the agent may append to it)"

_WRITE_HINTS = (  # the strerror(3) texts the agent's "cannot write PATH: ..." carries (glibc's wording)
    # not an errno: the agent's Spool found its file truncated, removed or replaced under it (agent spool.py)
    ("by something other than the agent", SPOOL_TAMPERED_HINT),
    # not an errno: the agent's open_spool found a FIFO, a device ... at the spool's path (agent spool.py)
    ("not a regular file", SPOOL_TAMPERED_HINT),
    ("No space left on device", "free space on the host, or point its orch_home: in the inventory at other storage"),
    ("Disk quota exceeded", "free space in the user's quota on the host, or point its orch_home: at other storage"),
    ("Read-only file system", "that filesystem is read-only on the host: point its orch_home: in the inventory at "
     "writable storage"),
    ("Permission denied", "the SSH user cannot write there: fix the directory's owner or mode on the host, or point "
     "its orch_home: at a directory the user owns"),
    ("No such file or directory", "a directory on that path does not exist on the host: create it, or point its "
     "orch_home: at an existing directory"),
)


def write_hint(error: str) -> str:
    """The fix for the agent's ``cannot write PATH: <strerror>`` by its cause: a full disk and a read-only or
    missing directory are not fixed the same way."""
    for said, hint in _WRITE_HINTS:
        if said in error:
            return hint
    return "check the device on the host (dmesg), or point its orch_home: in the inventory at other storage"


def spool_io_error(host: Host, doc: dict[str, Any], fallback: str) -> HostError:
    """The host's error for the agent's exit 5 (``write_failed``/``read_failed``): its own message, which names
    the path and the errno (``cannot read .../events.jsonl: Input/output error (EIO)``), with the fix by cause.
    ``fallback``: the text when the agent's document has none."""
    said = doc.get("error")
    error = said if isinstance(said, str) and said else fallback
    return HostError(host.name, error, write_hint(error))


def agent_error_doc(stderr: str) -> dict[str, Any]:
    """The agent's JSON error document (last line of its stderr for ``follow``), or ``{}``."""
    for line in reversed(output_lines(stderr.strip())):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        return doc if isinstance(doc, dict) else {}
    return {}


def spool_changed_error(host: Host, exc: RemoteCommandError, stored: int) -> HostError:
    """The host's error for ``follow``'s exit 6: the spool was truncated, replaced or rewritten on the host while
    orch followed it (the agent's ``SpoolCursor`` says which). ``stored``: the lines orch had stored, all kept.
    One error, not a cascade of half lines and seq mismatches."""
    said = agent_error_doc(exc.stderr).get("error")
    what = said if isinstance(said, str) and said else "the spool was changed on the host while orch followed it"
    if " was removed on the host" in what:  # agent spool.py SpoolCursor: moved or deleted, not written to
        path = agent_error_doc(exc.stderr).get("path")
        return spool_gone_error(host, path if isinstance(path, str) and path else "events.jsonl")
    return HostError(
        host.name,
        f"{what}; the {stored} lines already stored are kept; nothing after them is trusted",
        f"{SPOOL_TAMPERED_HINT}: rerun the suite",
    )


def stopped_worker_error(host: Host, run_id: str, exc: RemoteCommandError) -> HostError:
    """The host's error for ``follow``'s exit 7: the worker is alive but stopped (SIGSTOP, a debugger, a suspended
    job) and has been for the run's limit; it is left as it is, and what orch stored is kept."""
    doc = agent_error_doc(exc.stderr)
    said, pid = doc.get("error"), doc.get("pid")
    what = said if isinstance(said, str) and said else "the agent worker has been stopped and writes nothing"
    cont = f"`kill -CONT {pid}` on the host" if isinstance(pid, int) else "SIGCONT to the worker on the host"
    short = short_run_id(run_id)
    return HostError(
        host.name,
        f"{what}; the lines already stored are kept",
        f"{cont} lets it go on, then `orch run --resume {short}` collects the rest; or `orch cancel {short}`",
    )


def dead_worker_error(host: Host, run_id: str, exc: RemoteCommandError) -> HostError:
    """The host's error for ``follow``'s exit 3 (the worker exited without writing ``done``): its recorded reason;
    the spool moved or deleted on the host (code ``spool_gone``: not a death, the lines are elsewhere); the
    worker's pid file missing or unreadable (code ``pid_unreadable``: the spool is there and was collected, the
    worker's state is unknown); the run directory not this run's own (code ``not_this_run``: a link or a mount of
    another run's directory); else a kill from outside that left no reason."""
    doc = agent_error_doc(exc.stderr)
    reason = doc.get("reason")
    where = run_dir_text(host, run_id)
    if doc.get("code") == "spool_gone":
        return spool_gone_error(host, str(doc.get("path") or f"{where}events.jsonl"))
    if doc.get("code") == "pid_unreadable":  # the spool is there (collected); only the worker's state is unknown
        return HostError(host.name, str(doc.get("error")), PID_UNREADABLE_HINT)
    if doc.get("code") == "not_this_run":  # a link or mount of another run's directory: nothing there was read
        return HostError(host.name, str(doc.get("error")), NOT_THIS_RUN_HINT)
    if isinstance(reason, str) and reason:
        hint = (
            f"{write_hint(reason)}; then rerun the suite"
            if "cannot write" in reason
            else f"see {where}worker.log on the host; rerun the suite"
        )
        return HostError(host.name, f"{reason} (run state in {where} on the host)", hint)
    return HostError(
        host.name,
        f"the agent worker exited without finishing and recorded no reason (see {where}worker.log on the host)",
        "it was killed from outside (the OOM killer, a kill -9): check the host's memory and dmesg; rerun the suite",
    )


NOT_THIS_RUN_HINT = (
    "remove the symbolic link or unmount what is mounted there, put the run's own directory back at that path, "
    "then run orch run --resume again"
)

PID_UNREADABLE_HINT = (
    "the stored lines are kept; look for the run's worker on the host (ps -ef | grep the run id) and stop it, or "
    "put its pid back in that file and run orch run --resume again"
)


def spool_gone_text(path: str) -> str:
    """The one wording for a run's spool that is not on the host any more (``path``: as the host or the user
    names it)."""
    return f"the run's spool {path} is gone from the host (moved or deleted)"


SPOOL_GONE_HINT = (
    "put it back at that path and run orch run --resume again, or import a copy with orch runs import SPOOL --host "
)


def spool_gone_error(host: Host, path: str) -> HostError:
    """The host's error when the run's spool is gone from the host: the lines stored are kept, the rest can be
    collected from the spool where it went (put back, or ``orch runs import``)."""
    return HostError(host.name, f"{spool_gone_text(path)}; the lines already stored are kept",
                     SPOOL_GONE_HINT + host.name)  # fmt: skip


async def with_full_outputs(t: Transport, agent: list[str], host: Host, run_id: str, ev: Event) -> Event:
    """``ev`` with ``info.outputs`` (the whole parsed text, one per timed run) fetched from the host when the
    agent left it there; other events unchanged. Each fetched file must be the one the result line describes
    (``info.files``: its size and sha256 when the agent measured): a file changed on the host since (appended to,
    rewritten) is not what was measured, so nothing is parsed and ``info.outputs_unverified`` says which file
    differs and how (the ingest stores the case as an error naming it). Raises RemoteCommandError /
    ConnectError from the transport."""
    info = ev.data.get("info")
    if ev.type != "result" or not isinstance(info, dict) or info.get("outputs_complete") is not False:
        return ev
    if ev.case_index is None:
        return ev
    argv = [*agent, "logs", run_id, "--case", str(ev.case_index), "--parsed", *run_opts(host)]
    res = await t.run(argv, timeout_s=FETCH_TIMEOUT_S, check=False)
    try:
        doc = res.json_object()
    except ValueError as why:
        raise RemoteCommandError(host.name, argv[1:3], res.exit_status, str(why)) from None
    outputs = doc.get("outputs")
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise RemoteCommandError(host.name, argv[1:3], res.exit_status, "agent logs answered without outputs")
    data = dict(ev.data)
    differs = fetched_outputs_differ(info, doc.get("files"), ev.case_index)
    data["info"] = {**info, "outputs_unverified": differs} if differs else {**info, "outputs": outputs}
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)


def fetched_outputs_differ(info: dict[str, Any], fetched: Any, case_index: int) -> str | None:
    """How the files ``agent logs --parsed`` read (``fetched``: ``[{"run", "bytes", "sha256"}]``, one per timed
    run) differ from the ones a result line's ``info`` describes (``files[k][parsed]``); None when they are the
    same files, byte for byte."""
    parsed = info.get("parsed") if info.get("parsed") in ("stdout", "output") else "stdout"
    files = info.get("files")
    want = [f.get(parsed) if isinstance(f, dict) else None for f in files] if isinstance(files, list) else []
    if not isinstance(fetched, list) or len(fetched) != len(want):
        have = len(fetched) if isinstance(fetched, list) else "no"
        return (f"case {case_index}: the host holds {have} {parsed} file(s) of its timed runs, its result line "
                f"describes {len(want)}: the outputs changed on the host after the result was written; not parsed")
    for k, (w, f) in enumerate(zip(want, fetched, strict=True)):
        w, f = w if isinstance(w, dict) else {}, f if isinstance(f, dict) else {}
        if (f.get("bytes"), f.get("sha256")) != (w.get("bytes"), w.get("sha256")):
            return (f"case {case_index} run {k} {parsed}: the file on the host is {f.get('bytes')} bytes, sha256 "
                    f"{f.get('sha256')}; the result line says {w.get('bytes')} bytes, sha256 {w.get('sha256')}: it "
                    "changed on the host after the result was written, so it is not what was measured; not parsed")
    return None
