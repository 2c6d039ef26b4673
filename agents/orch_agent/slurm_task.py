"""``slurm-task --spec FILE``: one node's agent inside a Slurm job step (the job script ``srun``s one per node).

Unlike ``start`` it does not detach: Slurm tracks and signals the step's processes (``scancel``, the time limit,
a node failure), so the worker must stay inside the step. It creates the node's run directory
``<orch_home>/runs/<run_id>/<node>/`` — the node named by ``SLURMD_NODENAME`` (the name Slurm gives the node,
which orch stores as the host name; the hostname when unset) — writes ``spec.json``, reserves the ``reason`` file,
then becomes the worker by ``exec`` after ``setsid`` (a session leader, as ``start`` makes it: the worker's
guardian kills what is left of its session at its end, which must not be the job step's own processes); when
``setsid`` is refused (the task already leads a process group) the worker runs in a forked child that is one, and
this process hands Slurm's signals on to it. ``pid`` names the worker either way.
No GPU leases are taken: the scheduler hands the job its GPUs.

A run directory that already holds a spool is refused (exit 2): the job was requeued or started twice, and a
second worker appending after the first one's lines would break "a line's seq is its position".
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from typing import Any

from . import fatal
from .meta import self_argv, self_env
from .runs import RunDir, default_host, spec_as_written, valid_run_id
from .spec import validate


def node_name() -> str:
    """This node's name as Slurm knows it (``SLURMD_NODENAME``, set in every job step), else the hostname."""
    name = os.environ.get("SLURMD_NODENAME", "").strip()
    if name:
        return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")[:128] or default_host()
    return default_host()


def _write(path: str, data: bytes) -> None:
    fatal.write_synced(path, data)


def prepare(spec: dict[str, Any], orch_home: str | None, host: str) -> RunDir:
    """Create the node's run directory with its spec; raise ValueError when it already holds a spool."""
    if not valid_run_id(host):
        raise ValueError(f"node name {host!r} is not a valid run directory name")
    rd = RunDir.for_run(spec["run_id"], orch_home, host)
    os.umask(0o077)
    os.makedirs(rd.path, mode=0o700, exist_ok=True)
    if os.path.exists(rd.spool):
        raise ValueError(f"{rd.spool} exists: this node's part of run {spec['run_id']} was started before")
    fatal.reserve(rd.reason_path)
    # Inside a job step SIGTERM is Slurm's stop (scancel, orch cancel, the time limit, preemption), which orch
    # reads from sacct: the worker reports it as a cancel, not as a SIGTERM from outside orch (runs.cancel_path).
    rd.mark_cancel("slurm-task: Slurm's SIGTERM")
    _write(rd.spec_path, spec_as_written(spec, rd.host))
    return rd


def main(spec_path: str, orch_home: str | None) -> int:
    """Prepare this node's run directory and exec the worker; prints ``{"error", "code"}`` and returns 2 on a bad
    spec or a used directory, 5 when the directory cannot be written."""
    try:
        with open(spec_path, "rb") as f:
            spec = validate(json.loads(f.read().decode("utf-8")))
    except (OSError, ValueError) as exc:
        return _fail(f"bad spec {spec_path}: {exc}", "bad_spec", 2)
    try:
        rd = prepare(spec, orch_home, node_name())
    except ValueError as exc:
        return _fail(str(exc), "already_started", 2)
    except OSError as exc:
        return _fail(f"cannot write the run directory: {exc.strerror or exc}", "write_failed", 5)
    sys.stdout.flush()
    os.chdir(rd.path)
    try:
        os.setsid()
    except OSError:  # already a process group leader (as slurmstepd may start a task): a child can be one
        return _forked_worker(rd)
    _exec_worker(rd)
    return 1  # not reached


def _exec_worker(rd: RunDir) -> None:
    """Record this pid as the worker's and become the worker (a session leader: at its end the worker's guardian
    kills what is left of its session, which must not be the job step's own processes)."""
    _write(rd.pid_path, f"{os.getpid()}\n".encode())
    argv = self_argv("_worker", rd.path)
    os.execve(argv[0], argv, self_env())


def _forked_worker(rd: RunDir) -> int:
    """The worker in a child of its own session; this process stays in the step, hands Slurm's signals (SIGTERM
    at scancel and at the time limit, SIGINT, SIGHUP, SIGUSR1/2 of ``scancel --signal``) on to it and exits with
    its status."""
    child = os.fork()
    if child == 0:
        try:
            os.setsid()
            _exec_worker(rd)
        finally:
            os._exit(127)

    def forward(signum: int, frame: Any) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def _fail(message: str, code: str, exit_code: int) -> int:
    sys.stdout.write(json.dumps({"error": message, "code": code, "host": node_name()}, sort_keys=True) + "\n")
    sys.stdout.flush()
    return exit_code
