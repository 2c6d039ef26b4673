"""How orch talks to the agent about one run on one host — the parts beyond starting and following it.

- :func:`run_opts`: ``--host NAME [--orch-home DIR]``, given to every run command of the agent, so the run's
  files are ``<orch_home>/runs/<run_id>/<host>/`` (per host: two hosts sharing an NFS home never share a spool).
- :func:`dead_worker_error`: a worker that died without ``done`` becomes the host's error, with the reason the
  worker recorded (e.g. ``cannot write .../events.jsonl: No space left on device (ENOSPC)``) when it could.
- :func:`start_run`: ``agent start --spec -`` with the spec on stdin (never argv: ``ps`` would show env values,
  and Linux caps one argument at 128 KiB); GPUs leased by another run become a host error naming the holder.
- :func:`with_full_outputs`: a ``command`` result whose outputs were too large to travel in the line
  (``info.outputs_complete`` false, see the agent's ``benches/command.py``) gets them fetched from the host
  (``agent logs --parsed``) before orch parses it, so parsing is correct for outputs of any size.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.errors import HostError, RemoteCommandError
from orchestrator.inventory import Host
from orchestrator.protocol import Event
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


async def start_run(t: Transport, agent: list[str], host: Host, spec: dict[str, Any], *, wait_s: float = 0.0) -> None:
    """Start the run's worker on the host. ``spec`` is sent as is, plus ``lease_wait_s`` (``wait_s``: how long
    the agent waits for GPUs another run holds). Raises HostError (GPUs busy, naming the holder; the run dir
    cannot be written) or RemoteCommandError."""
    argv = [*agent, "start", "--spec", "-", *run_opts(host)]
    doc_in = json.dumps({**spec, "lease_wait_s": wait_s})
    res = await t.run(argv, timeout_s=START_TIMEOUT_S + wait_s, check=False, input=doc_in)
    try:
        res.json_object()
        return
    except ValueError as why:
        lines = res.stdout.strip().splitlines()
        doc = agent_error_doc(lines[-1]) if lines else {}
        if doc.get("code") == "gpu_busy":
            waited = f"waited {wait_s:g} s; " if wait_s else ""
            raise HostError(
                host.name,
                str(doc.get("error")),
                f"{waited}wait for it with orch run ... --wait SECONDS, or see the leases with orch doctor",
            ) from None
        if doc.get("code") == "write_failed":
            raise HostError(
                host.name, str(doc.get("error")), "free space on the host or point its orch_home: at other storage"
            ) from None
        raise RemoteCommandError(host.name, argv[1:3], res.exit_status, str(why)) from None


def agent_error_doc(stderr: str) -> dict[str, Any]:
    """The agent's JSON error document (last line of its stderr for ``follow``), or ``{}``."""
    for line in reversed(stderr.strip().splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        return doc if isinstance(doc, dict) else {}
    return {}


def dead_worker_error(host: Host, run_id: str, exc: RemoteCommandError) -> HostError:
    """The host's error for ``follow``'s exit 3 (the worker exited without writing ``done``)."""
    reason = agent_error_doc(exc.stderr).get("reason")
    where = run_dir_text(host, run_id)
    if isinstance(reason, str) and reason:
        hint = (
            "free space or fix the device on the host (or point the host's orch_home: in the inventory at other "
            "storage), then rerun the suite"
            if "cannot write" in reason
            else f"see {where}worker.log on the host; rerun the suite"
        )
        return HostError(host.name, f"{reason} (run state in {where} on the host)", hint)
    return HostError(
        host.name,
        f"the agent worker exited without finishing and recorded no reason (see {where}worker.log on the host)",
        "it was killed from outside (the OOM killer, a kill -9): check the host's memory and dmesg; rerun the suite",
    )


async def with_full_outputs(t: Transport, agent: list[str], host: Host, run_id: str, ev: Event) -> Event:
    """``ev`` with ``info.outputs`` (the whole parsed text, one per timed run) fetched from the host when the
    agent left it there; other events unchanged. Raises RemoteCommandError / ConnectError from the transport."""
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
    data["info"] = {**info, "outputs": outputs}
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)
