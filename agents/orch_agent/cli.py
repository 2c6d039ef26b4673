"""The agent's command line. Every command prints one JSON document on stdout (``follow`` prints spool lines).

Exit codes: 0 ok; 2 usage error, bad spec, or ``start`` refused (the run already has a live worker, or a
different spec); 3 the worker died without writing ``done`` (``follow``, ``start`` of such a run); 4 no such
run; 1 anything unexpected. Errors are ``{"error": message, "code": short_name}`` — on stdout, except for
``follow``, whose stdout is the event stream, where they go to stderr.

- ``facts [--orch-home DIR]``: host facts (``sysinfo.collect``).
- ``start (--spec FILE | --spec-json JSON) [--orch-home DIR]``: create ``<home>/runs/<run_id>/``, write
  ``spec.json``, launch the worker detached (own session), write ``pid``; prints ``{"run_id", "pid", "spool",
  "started": true}`` and exits at once. Starting a run whose spool already has ``done`` prints its status with
  ``"started": false`` (idempotent, for resume).
- ``follow RUN_ID --from SEQ [--poll-s 0.02]``: spool lines from line SEQ on, raw and flushed per line, until
  the ``done`` line.
- ``cancel RUN_ID``: SIGTERM the worker's process group, SIGKILL after 10 s, write ``done`` (cancelled) if the
  worker could not; prints ``{"run_id", "was_running", "killed"}``.
- ``status RUN_ID``: ``{"run_id", "state": running|finished|dead|unknown, "pid", "lines", "done"}``.
- ``version``: ``{"agent_version", "python", "protocol"}``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import signal
import subprocess
import sys
import time
from typing import Any

from . import PROTOCOL_VERSION, sysinfo
from .meta import agent_version, self_argv, self_env
from .runs import RunDir, group_alive, is_worker
from .spec import validate
from .spool import Spool, find_done, iter_new_lines, line_type, read_lines

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DEAD, EXIT_NO_RUN = 0, 1, 2, 3, 4
CANCEL_GRACE_S = 10.0


class CliError(Exception):
    def __init__(self, message: str, code: str, exit_code: int, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code
        self.extra = extra or {}

    def doc(self) -> dict[str, Any]:
        return {"error": str(self), "code": self.code, **self.extra}


def _print(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def _existing_run(run_id: str, orch_home: str | None) -> RunDir:
    rd = RunDir.for_run(run_id, orch_home)
    if not rd.exists():
        raise CliError(f"no run {run_id!r} under {os.path.dirname(rd.path)}", "no_such_run", EXIT_NO_RUN)
    return rd


def cmd_facts(args: argparse.Namespace) -> int:
    _print(sysinfo.collect(args.orch_home))
    return EXIT_OK


def cmd_version(args: argparse.Namespace) -> int:
    _print(
        {"agent_version": agent_version(), "python": platform.python_version(), "protocol": PROTOCOL_VERSION}
    )
    return EXIT_OK


def _load_spec(args: argparse.Namespace) -> dict[str, Any]:
    try:
        if args.spec_json is not None:
            raw = json.loads(args.spec_json)
        else:
            with open(args.spec) as f:
                raw = json.load(f)
        return validate(raw)
    except (OSError, ValueError) as exc:
        raise CliError(f"bad spec: {exc}", "bad_spec", EXIT_USAGE) from exc


def cmd_start(args: argparse.Namespace) -> int:
    spec = _load_spec(args)
    rd = RunDir.for_run(spec["run_id"], args.orch_home)
    os.makedirs(rd.path, exist_ok=True)
    # One start at a time per run: two racing starts must not launch two workers.
    with open(os.path.join(rd.path, "start.lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if os.path.exists(rd.spec_path):
            return _start_existing(rd, spec)
        return _launch(rd, spec)


def _start_existing(rd: RunDir, spec: dict[str, Any]) -> int:
    st = rd.status()
    try:
        with open(rd.spec_path) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = None
    if old != spec:
        raise CliError(
            "run {!r} exists with a different spec".format(spec["run_id"]), "spec_mismatch", EXIT_USAGE, st
        )
    if st["state"] == "finished":
        _print({**st, "spool": rd.spool, "started": False})
        return EXIT_OK
    if st["state"] == "running":
        raise CliError(
            "run {!r} already has a live worker (pid {})".format(spec["run_id"], st["pid"]),
            "already_running",
            EXIT_USAGE,
            st,
        )
    if st["state"] == "dead":
        raise CliError(
            "run {!r}: agent worker exited without finishing".format(spec["run_id"]),
            "worker_dead",
            EXIT_DEAD,
            st,
        )
    # "unknown": spec written but no pid recorded (a start that died before launching); launch now.
    return _launch(rd, spec)


def _launch(rd: RunDir, spec: dict[str, Any]) -> int:
    tmp = rd.spec_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(spec, f, sort_keys=True)
    os.replace(tmp, rd.spec_path)
    with open(os.devnull, "rb") as stdin, open(os.path.join(rd.path, "worker.log"), "ab") as log:
        # Detached: its own session (survives the SSH session's SIGHUP), no inherited fds. Never waited on
        # here; once this process exits the worker is reparented and reaped by init.
        proc = subprocess.Popen(
            self_argv("_worker", rd.path),
            stdin=stdin,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
            cwd=rd.path,
            env=self_env(),
        )
    tmp = rd.pid_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{proc.pid}\n")
    os.replace(tmp, rd.pid_path)
    _print({"run_id": spec["run_id"], "pid": proc.pid, "spool": rd.spool, "started": True})
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import run

    return run(args.run_dir)


def cmd_follow(args: argparse.Namespace) -> int:
    rd = _existing_run(args.run_id, args.orch_home)
    out = sys.stdout.buffer
    pos = {"offset": 0, "line": 0}

    def pump() -> bool:
        """Copy new complete lines at or after --from to stdout; True once the done line has gone by."""
        done = False
        for raw, n, end in iter_new_lines(rd.spool, pos["offset"], pos["line"]):
            pos["offset"], pos["line"] = end, n + 1
            if n >= args.from_seq:
                out.write(raw)
                out.flush()
            if b'"done"' in raw and line_type(raw) == "done":
                done = True
        return done

    while True:
        if pump():
            return EXIT_OK
        if not rd.worker_alive():
            # The worker may have written its last lines just before exiting: read once more before judging.
            if pump():
                return EXIT_OK
            # `start` may not have written the pid file yet.
            starting = rd.pid() is None and time.time() - os.stat(rd.path).st_mtime < 5.0
            if not starting:
                raise CliError(
                    "agent worker exited without finishing",
                    "worker_dead",
                    EXIT_DEAD,
                    {"run_id": rd.run_id, "pid": rd.pid(), "lines": pos["line"]},
                )
        time.sleep(args.poll_s)


def cmd_cancel(args: argparse.Namespace) -> int:
    rd = _existing_run(args.run_id, args.orch_home)
    pid = rd.pid()
    was_running = pid is not None and is_worker(pid, rd.path)
    killed = False
    if pid is not None and (was_running or group_alive(pid)):
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + args.grace_s
        while group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5.0
            while group_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
    if find_done(read_lines(rd.spool)) is None:
        with Spool(rd.spool) as spool:
            if find_done(read_lines(rd.spool)) is None:
                spool.append(
                    "done",
                    fsync=True,
                    status="cancelled",
                    counts=_counts(read_lines(rd.spool)),
                    note="written by cancel",
                )
    _print({"run_id": rd.run_id, "was_running": was_running, "killed": killed})
    return EXIT_OK


def _counts(lines: list[bytes]) -> dict[str, int]:
    types = [line_type(raw) for raw in lines]
    return {"lines": len(lines), "results": types.count("result"), "errors": types.count("error")}


def cmd_status(args: argparse.Namespace) -> int:
    rd = RunDir.for_run(args.run_id, args.orch_home)
    st = rd.status()
    _print(st)
    return EXIT_OK if rd.exists() else EXIT_NO_RUN


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="orch-agent", description="orch's host agent (prints JSON)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def home(p: argparse.ArgumentParser) -> None:
        p.add_argument("--orch-home", default=None, help="orch home directory (default ~/.orch)")

    p = sub.add_parser("facts", help="host facts as JSON")
    home(p)
    p.set_defaults(fn=cmd_facts)
    p = sub.add_parser("version", help="agent version, Python version, protocol version")
    home(p)  # accepted (and ignored) so every command takes the same common options
    p.set_defaults(fn=cmd_version)
    p = sub.add_parser("start", help="start a run detached; prints run_id, pid, spool")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--spec", help="spec JSON file")
    g.add_argument("--spec-json", help="spec as a JSON string")
    home(p)
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("_worker", help=argparse.SUPPRESS)
    p.add_argument("run_dir")
    p.set_defaults(fn=cmd_worker)
    p = sub.add_parser("follow", help="stream spool lines from --from SEQ until done")
    p.add_argument("run_id")
    p.add_argument(
        "--from", dest="from_seq", type=int, default=0, help="first line (seq) to print, default 0"
    )
    p.add_argument(
        "--poll-s", type=float, default=0.02, help="seconds between polls of the spool, default 0.02"
    )
    home(p)
    p.set_defaults(fn=cmd_follow)
    p = sub.add_parser("cancel", help="stop a run's process group")
    p.add_argument("run_id")
    p.add_argument("--grace-s", type=float, default=CANCEL_GRACE_S, help="SIGTERM grace before SIGKILL, s")
    home(p)
    p.set_defaults(fn=cmd_cancel)
    p = sub.add_parser("status", help="state of a run")
    p.add_argument("run_id")
    home(p)
    p.set_defaults(fn=cmd_status)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except CliError as exc:
        stream = sys.stderr if args.command == "follow" else sys.stdout
        stream.write(json.dumps(exc.doc(), sort_keys=True) + "\n")
        stream.flush()
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (SSH dropped while following): nothing to report to.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_ERROR
