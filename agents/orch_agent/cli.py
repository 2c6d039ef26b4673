"""The agent's command line. Every command prints one JSON document on stdout (``follow`` prints spool lines).

Exit codes: 0 ok; 2 usage error, bad spec, or ``start`` refused (the run already has a live worker, or a different
spec, or its GPUs are leased by another run: code ``gpu_busy`` with the ``holder``, see ``leases.py``); 3 the worker
died without writing ``done`` (``follow``, ``start`` of such a run; code ``spool_gone`` with its ``path`` when the
spool itself is not there: moved or deleted; code ``pid_unreadable`` with the pid file's ``path`` when the spool is
there but the pid file does not name the worker: ``follow``, ``cancel``, ``start``; code ``not_this_run`` with the
directory's ``path`` when the run directory is not this run's own: a symbolic link, or holding another run's spec,
as a bind mount of another run's directory does — nothing in it is signalled, written or followed); 4 no such run;
5 the run's directory cannot be written (disk full, I/O error; the message names the path; code ``write_failed``)
or its spool cannot be read (code ``read_failed``: an I/O error, named by its errno, or the spool is not a regular
file: a FIFO, a device); 6 ``follow``,
``cancel --stored N``: the spool was truncated, replaced or rewritten under it (code ``spool_changed``, naming it);
7 ``follow``: the worker has been stopped (SIGSTOP, a debugger, a suspended job) for ``--stopped-limit-s`` (code
``worker_stopped``, with its ``pid`` and ``stopped_s``; the worker is left as it is); 1 anything unexpected.
Errors are ``{"error": message, "code": short_name}`` — on stdout, except for ``follow``, whose stdout is the event
stream, where they go to stderr.

Every run command takes ``--orch-home DIR`` (default ``~/.orch``) and ``--host NAME`` (the inventory's name for
this host, default the hostname): a run's files are in ``<orch home>/runs/<run_id>/<host>/`` (see ``runs.py``).

- ``facts``: host facts (``sysinfo.collect``); the torch probe is reused from the host's cache (``--fresh``: probe).
- ``start --spec FILE`` (``-``: read it from stdin; never on the command line, where ``ps`` shows it and Linux caps
  one argument at 128 KiB): create the run directory (0700, files 0600), write ``spec.json``, lease the node's GPUs
  (waiting up to the spec's ``lease_wait_s``), fork the worker detached (own session) holding the leases, write
  ``pid.start`` and ``pid`` (see ``runs.py``); prints ``{"run_id", "host", "pid", "spool", "started": true}`` and
  exits at once. Starting a run whose spool already has ``done`` prints its status with ``"started": false``
  (idempotent, for resume). ``start ... --follow``: after that line, on the same stdout, what ``follow RUN_ID --from
  0`` prints (one SSH session and one Python start instead of two; a dropped connection is followed again with
  ``follow --from SEQ``); errors once following are ``follow``'s (stderr, exit 3).
- ``follow RUN_ID --from SEQ [--stored N] [--poll-s 0.02]``: spool lines from line SEQ on, raw and flushed per
  line, until the ``done`` line; ``--stored``: the lines orch holds (default SEQ; orch follows a resumed run from
  0 to compare the stored lines), fewer of them in the spool of a dead worker is exit 6. A dead worker's error
  carries its ``reason`` (``fatal.py``) when it recorded one.
- ``follow ... --heartbeat-s S`` (and ``start --follow --heartbeat-s S``): also write the line ``#orch-heartbeat
  pid=PID`` (its own pid) to stderr when following starts and every S seconds after, so that orch can tell a
  follower that waits for new lines from one that is stopped or wedged (SIGSTOP, a write blocked on a full pipe):
  a live follower is never silent on both streams for long. 0 (the default): none. orch drops these lines from
  any error text.
- ``stop-follower RUN_ID --pid PID``: SIGKILL the process PID if it is a follower of that run (its command line
  names the run and ``follow``/``--follow``) and not the run's worker (which is forked from ``start`` and keeps
  its command line); prints ``{"run_id", "pid", "killed"}``. orch uses it on a follower that went silent: over
  SSH, closing the channel does not end a stopped process, and sshd refuses signal requests on root logins.
- ``slurm-task --spec FILE``: inside a Slurm job step, this node's worker in the foreground (``slurm_task.py``).
- ``follow ... --no-worker-check``: follow until ``done`` without judging the worker's liveness, which only its
  own machine can tell (a Slurm node's spool followed from the login node; orch watches the job instead).
- ``cancel RUN_ID``: leave the run's ``cancel`` marker (a SIGTERM without it is one from outside orch, which the
  worker reports as a failure), SIGTERM the worker's process group, then SIGKILL everything left in its session
  (the benchmark commands' groups included) after 10 s; write ``done`` (cancelled) if the worker could not;
  prints ``{"run_id", "was_running", "killed"}``.
- ``status RUN_ID``: ``{"run_id", "host", "state": running|finished|dead|unknown|unknown_worker, "pid", "lines",
  "done"}``; ``unknown_worker`` (the spool is there, the pid file does not name the worker) adds ``pid_trouble``.
  ``follow``, ``cancel`` and ``start`` answer such a run with exit 3, code ``pid_unreadable``, naming the pid file.
- ``logs RUN_ID [--case N] [--parsed]``: the full outputs a ``command`` run kept on the host
  (``benches/command.py``): ``{"run_id", "host", "cases": [{"case_index", "runs": [{"run", "stdout"|"stderr"|
  "output": {"text", "encoding", "bytes", "sha256"}, "not_read": {stream: what}}]}]}`` (``text`` the file itself
  when it is UTF-8, its base64 when ``encoding`` is ``"base64"``; ``not_read``, only when there is one, names what
  is in a stream's place that is not a regular file: ``"a FIFO"``, ``"a symbolic link"`` ...; a case's own
  ``not_read`` (and no runs) when its directory is not a real directory, a link to one included, and a top-level
  ``not_read`` when ``outputs/`` itself is not; with ``--case N`` that is exit 4, code ``outputs_not_read``); a case
  is an entry named by a decimal number as the worker writes it (``0``, ``12``; not ``01`` or ``²``); with
  ``--parsed --case N``, ``{"run_id", "host", "case_index",
  "outputs": [text, ...]}``: what orch parses, one per timed run.
- ``version``: ``{"agent_version", "python", "protocol"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from . import PROTOCOL_VERSION, fatal
from .runs import (
    RunDir,
    group_alive,
    pid_alive,
    session_members,
    spec_as_sent,
    spec_as_written,
    start_time,
    stopped,
    valid_pid,
    valid_run_id,
    workers_elsewhere,
    workers_in,
)
from .spool import (
    Spool,
    SpoolChanged,
    SpoolCursor,
    SpoolReadError,
    SpoolWriteError,
    find_done,
    line_type,
    read_lines,
)

# Each command imports what only it needs (sysinfo, leases, reaper's ctypes, subprocess, platform, hashlib ...):
# every start of the agent on a host is on the run's critical path, and a run starts it twice.

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DEAD, EXIT_NO_RUN, EXIT_WRITE, EXIT_SPOOL_CHANGED = 0, 1, 2, 3, 4, 5, 6
EXIT_STOPPED = 7
STOPPED_LIMIT_S = 300.0  # follow's default --stopped-limit-s: a worker stopped this long is reported, not waited on
HEARTBEAT = b"#orch-heartbeat"  # follow's sign of life on stderr; orchestrator/transport/liveness.py's HEARTBEAT
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


def _run_dir(run_id: str, args: argparse.Namespace) -> RunDir:
    for what, value in (("run id", run_id), ("--host", args.host)):
        if value is not None and not valid_run_id(value):
            raise CliError(f"{what} {value!r} must be letters, digits, '._-'", "usage", EXIT_USAGE)
    return RunDir.for_run(run_id, args.orch_home, args.host)


def _write_error(path: str, exc: OSError) -> CliError:
    return CliError(f"cannot write {path}: {exc.strerror or exc}", "write_failed", EXIT_WRITE, {"path": path})


def _existing_run(run_id: str, args: argparse.Namespace) -> RunDir:
    rd = _run_dir(run_id, args)
    if not rd.exists():
        raise CliError(f"no run {run_id!r} under {os.path.dirname(rd.path)}", "no_such_run", EXIT_NO_RUN)
    _refuse_foreign(rd)
    return rd


def _refuse_foreign(rd: RunDir) -> None:
    """CliError ``not_this_run`` (exit 3) when the run directory is not this run's own (``RunDir.not_this_run``: a
    symbolic link, another run's spec): nothing in it is signalled, written or followed."""
    foreign = rd.not_this_run()
    if foreign is not None:
        raise CliError(f"{foreign}; nothing was signalled or written", "not_this_run", EXIT_DEAD,
                       {"run_id": rd.run_id, "path": rd.path})  # fmt: skip


def cmd_facts(args: argparse.Namespace) -> int:
    from . import sysinfo

    _print(sysinfo.collect(args.orch_home, torch_cache=not args.fresh))
    return EXIT_OK


def cmd_version(args: argparse.Namespace) -> int:
    import platform

    from .meta import agent_version

    _print({"agent_version": agent_version(), "python": platform.python_version(), "protocol": PROTOCOL_VERSION})
    return EXIT_OK


def _load_spec(args: argparse.Namespace) -> dict[str, Any]:
    from .spec import validate

    try:
        if args.spec == "-":
            raw = json.loads(sys.stdin.buffer.read().decode("utf-8"))
        else:
            with open(args.spec, "rb") as f:
                raw = json.loads(f.read().decode("utf-8"))
        return validate(raw)
    except (OSError, ValueError) as exc:
        raise CliError(f"bad spec: {exc}", "bad_spec", EXIT_USAGE) from exc


def cmd_start(args: argparse.Namespace) -> int:
    import fcntl

    spec = _load_spec(args)
    if args.run_id is not None and args.run_id != spec["run_id"]:
        raise CliError(
            "--run-id {!r} is not the spec's run id {!r}".format(args.run_id, spec["run_id"]), "usage", EXIT_USAGE
        )
    rd = _run_dir(spec["run_id"], args)
    os.umask(0o077)  # the run's files hold the spec (env values may be secrets): 0700 directories, 0600 files
    made = not os.path.isdir(rd.path)  # a start refused before its launch removes the directory it made
    try:
        os.makedirs(rd.path, mode=0o700, exist_ok=True)
        _refuse_foreign(rd)  # before the lock file: nothing is created in another run's directory
        lock = open(os.path.join(rd.path, "start.lock"), "a")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise _write_error(rd.path, exc) from None
    # One start at a time per run: two racing starts must not launch two workers.
    with lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if os.path.exists(rd.spec_path):
            code = _start_existing(rd, spec)
        else:
            try:
                code = _launch(rd, spec)
            except CliError as exc:
                if made and exc.code == "already_running":  # nothing of this run here: leave no empty directory
                    _remove_unlaunched(rd)  # (a cancel there would write a done for a worker it cannot reach)
                raise
    if code != EXIT_OK or not args.follow:
        return code
    args.following = True  # from here on errors are follow's: on stderr, stdout being the event stream
    return _follow(rd, 0, args.poll_s, no_worker_check=False, stopped_limit_s=args.stopped_limit_s,
                   heartbeat_s=args.heartbeat_s)  # fmt: skip


def _remove_unlaunched(rd: RunDir) -> None:
    """Remove the run directory a refused ``start`` made, when it holds nothing but its ``start.lock`` (best
    effort: a file another process put there meanwhile keeps it)."""
    try:
        names = os.listdir(rd.path)
        if names == ["start.lock"]:
            os.unlink(os.path.join(rd.path, "start.lock"))
            os.rmdir(rd.path)
    except OSError:
        pass


def _start_existing(rd: RunDir, spec: dict[str, Any]) -> int:
    st = rd.status()
    try:
        with open(rd.spec_path) as f:
            old = spec_as_sent(json.load(f))
    except (OSError, ValueError):
        old = None
    if old != spec:
        raise CliError("run {!r} exists with a different spec".format(spec["run_id"]), "spec_mismatch", EXIT_USAGE, st)
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
    if st["state"] == "unknown_worker":  # the spool is there: a worker ran; never a second one on its spool
        raise _pid_unreadable(rd, st["lines"], "not starting a second worker")
    # "unknown": spec written but no pid recorded (a start that died before launching); launch now.
    return _launch(rd, spec)


def _write_file(path: str, data: bytes) -> None:
    """``data`` into ``path`` (0600) via a temporary name: whole or not at all. Raises CliError naming the path."""
    tmp = path + ".tmp"
    try:
        fatal.write_synced(tmp, data)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _write_error(path, exc) from None


def _take_leases(rd: RunDir, spec: dict[str, Any]) -> dict[str, int]:
    """Lease the GPUs this run uses (``leases.py``); ``{uuid: locked fd}``. Raises CliError ``gpu_busy``."""
    from . import leases

    uuids = leases.gpu_uuids(spec.get("facts"))
    if not uuids:
        return {}
    import datetime
    import getpass

    def waiting(busy: leases.LeaseBusy) -> None:
        sys.stderr.write(json.dumps({"waiting": str(busy), "holder": busy.holder}, sort_keys=True) + "\n")
        sys.stderr.flush()

    try:
        held = leases.acquire(uuids, float(spec.get("lease_wait_s") or 0.0), on_wait=waiting)
    except leases.LeaseBusy as busy:
        raise CliError(str(busy), "gpu_busy", EXIT_USAGE, {"gpu": busy.gpu, "holder": busy.holder}) from None
    except OSError as exc:
        raise CliError(
            f"cannot use the GPU lease directory {_lease_dir()}: {exc.strerror or exc}", "lease_dir", EXIT_WRITE
        ) from None
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for uuid, fd in held.items():
        leases.write_record(
            fd,
            {"gpu": uuid, "run_id": rd.run_id, "host": rd.host, "user": getpass.getuser(),
             "started_by": spec.get("started_by"), "pid": None, "started": started},
        )  # fmt: skip
    return held


def _lease_dir() -> str:
    from .sysinfo import lease_dir

    return lease_dir()


def _launch(rd: RunDir, spec: dict[str, Any]) -> int:
    # Whatever the files say (a pid file never written by a start that died after its fork, files removed by
    # hand), a live worker of this run working here means no second one: two workers would write one spool. The
    # start lock is held until a forked worker has its session and working directory, so it is seen here.
    live = workers_in(rd.path, rd.run_id)
    if live:
        raise CliError(
            "run {!r} already has a live worker (pid {}) in {}, though its pid file does not name it; not starting "
            "a second one on its spool".format(rd.run_id, ", ".join(map(str, live)), rd.path),
            "already_running",
            EXIT_USAGE,
            {"pid": live[0], "pids": live},
        )
    moved = workers_elsewhere(rd.run_id, rd.host, rd.path, rd.orch_home)
    if moved:  # its directory moved or removed while it ran: a new directory here would get a second worker
        pid, where = moved[0]
        raise CliError(
            f"run {rd.run_id!r} already has a live worker (pid {pid}) for {rd.host}, working in {where}, not in "
            f"{rd.path}: the run directory was moved or removed while it ran; not starting a second worker (stop "
            f"that one, `kill -TERM -- -{pid}` (its process group), or move its directory back)",
            "already_running",
            EXIT_USAGE,
            {"pid": pid, "pids": [p for p, _ in moved], "cwd": where},
        )
    try:
        fatal.reserve(rd.reason_path)
    except OSError as exc:
        raise _write_error(rd.reason_path, exc) from None
    _write_file(rd.spec_path, spec_as_written(spec, rd.host))
    held = _take_leases(rd, spec)
    lease_paths = [os.path.join(_lease_dir(), u + ".lock") for u in sorted(held)]
    _write_file(os.path.join(rd.path, "leases.json"), json.dumps(lease_paths).encode("utf-8"))
    pid = _fork_worker(rd, tuple(held.values()))
    if held:
        from . import leases

        for fd in held.values():
            rec = leases.read_record(fd)
            leases.write_record(fd, {**rec, "pid": pid})
        leases.release(held)  # our copies only: the worker's descriptors keep the locks
    start = start_time(pid)
    if start is not None:  # first: whoever reads ``pid`` finds how to tell this worker from a recycled pid
        _write_file(rd.pid_start_path, f"{pid} {start}\n".encode())
    _write_file(rd.pid_path, f"{pid}\n".encode())
    _print({"run_id": spec["run_id"], "host": rd.host, "pid": pid, "spool": rd.spool, "started": True})
    return EXIT_OK


def _fork_worker(rd: RunDir, lease_fds: tuple[int, ...]) -> int:
    """Fork the worker (no second interpreter start: this process has its modules loaded) and return its pid
    once it is detached: its own session and process group (it survives the SSH session; ``cancel`` signals
    that group), cwd the run directory, stdin /dev/null, stdout and stderr ``worker.log``, no descriptor of
    this process left open but ``lease_fds`` (it holds the GPU leases for as long as it lives; the start lock,
    the SSH channel and the rest are closed). Never waited on: once ``start`` exits, init reaps it. The
    worker never returns into this code: it leaves with ``os._exit``."""
    log_path = os.path.join(rd.path, "worker.log")
    try:
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _write_error(log_path, exc) from None
    ready_r, ready_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = EXIT_ERROR
        try:
            os.setsid()
            os.chdir(rd.path)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            _close_fds_but({0, 1, 2, ready_w, *lease_fds})
            os.close(ready_w)  # detached: the parent may return the pid
            from .worker import run

            code = run(rd.path)
        except BaseException:  # noqa: BLE001 - the worker's last words go to worker.log, never up into start
            import traceback

            traceback.print_exc()
        finally:
            try:
                _exit_handlers()
            finally:
                os._exit(code)
    os.close(log)
    os.close(ready_w)
    try:
        os.read(ready_r, 1)  # EOF once the worker has its own session (or has died trying)
    finally:
        os.close(ready_r)
    return pid


def _exit_handlers() -> None:
    """What a normal interpreter exit runs, for the forked worker that leaves with ``os._exit``: the atexit
    handlers (a multi-GPU bench stops its ranks through one, ``benches/_dist.py``; torch registers its own),
    then the flush of stdout and stderr (``worker.log``)."""
    import atexit

    run = getattr(atexit, "_run_exitfuncs", None)  # CPython's: the function its own shutdown calls
    try:
        if run is not None:
            run()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _close_fds_but(keep: set[int]) -> None:
    """Close every open descriptor of this process not in ``keep`` (the ones /proc/self/fd lists: a high
    RLIMIT_NOFILE makes closing the whole range slow where the kernel has no close_range)."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1 << 16))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the descriptor listdir itself had open


def cmd_worker(args: argparse.Namespace) -> int:
    from .worker import run

    return run(args.run_dir)


def cmd_follow(args: argparse.Namespace) -> int:
    return _follow(_existing_run(args.run_id, args), args.from_seq, args.poll_s, no_worker_check=args.no_worker_check,
                   stopped_limit_s=args.stopped_limit_s, heartbeat_s=args.heartbeat_s,
                   stored=args.stored)  # fmt: skip


def _follow(rd: RunDir, from_seq: int, poll_s: float, *, no_worker_check: bool, stopped_limit_s: float,
            heartbeat_s: float = 0.0, stored: int | None = None) -> int:  # fmt: skip
    """Spool lines from line ``from_seq`` on to stdout until ``done``. Raises CliError ``worker_dead``;
    ``spool_changed`` when the worker is gone without a recorded reason and the spool has fewer lines than
    ``stored`` (default ``from_seq``: the lines orch stored; orch re-reads them from line 0 on resume to compare
    them with its store: the file was cut or rewritten after orch read it, not a death to blame on
    the OOM killer); and
    ``worker_stopped`` once the worker has been stopped for ``stopped_limit_s`` (s) with no new line: a stopped
    worker writes nothing and cannot keep its own deadlines, and orch would wait on it without end.
    ``heartbeat_s`` > 0: ``HEARTBEAT`` on stderr now and every that many seconds (the follower's own liveness,
    which orch watches: a stopped or wedged follower says nothing on either stream)."""
    out = sys.stdout.buffer
    cursor = SpoolCursor(rd.spool)
    stopped_since: float | None = None
    beat_at = time.monotonic()
    heartbeat = HEARTBEAT + b" pid=%d\n" % os.getpid()

    def beat() -> None:
        nonlocal beat_at
        if heartbeat_s > 0 and time.monotonic() >= beat_at:
            sys.stderr.buffer.write(heartbeat)
            sys.stderr.buffer.flush()
            beat_at = time.monotonic() + heartbeat_s

    def pump() -> bool:
        """Copy new complete lines at or after --from to stdout; True once the done line has gone by. A spool
        changed under the follower (truncated, replaced, rewritten) is one error, exit 6, naming it."""
        done = False
        try:
            for raw, n in cursor.new_lines():
                if n >= from_seq:
                    out.write(raw)
                    out.flush()
                if b'"done"' in raw and line_type(raw) == "done":
                    done = True
        except SpoolChanged as exc:
            raise CliError(str(exc), "spool_changed", EXIT_SPOOL_CHANGED,
                           {"run_id": rd.run_id, "path": rd.spool, "lines": cursor.line}) from None  # fmt: skip
        return done

    while True:
        beat()
        if pump():
            return EXIT_OK
        if not no_worker_check and not rd.worker_alive():
            # The worker may have written its last lines just before exiting: read once more before judging.
            if pump():
                return EXIT_OK
            # `start` may not have written the pid file yet.
            starting = rd.pid() is None and time.time() - os.stat(rd.path).st_mtime < 5.0
            if not starting and not os.path.exists(rd.spool):  # not a death to explain: the lines are elsewhere
                raise CliError(
                    f"the run's spool {rd.spool} is gone from the host (moved or deleted)",
                    "spool_gone",
                    EXIT_DEAD,
                    {"run_id": rd.run_id, "pid": rd.pid(), "lines": cursor.line, "path": rd.spool},
                )
            if not starting and os.path.exists(rd.spool) and rd.pid_trouble() is not None:
                raise _pid_unreadable(rd, cursor.line, "collected as far as it goes")
            # orch stored lines the spool no longer has: not a death. A reason the worker recorded (it refused the
            # changed spool itself, SpoolWriteError) says more, and is the worker_dead below.
            have_stored = from_seq if stored is None else stored
            if not starting and cursor.line < have_stored and not rd.reason():
                raise _spool_cut(rd, cursor.line, have_stored)
            if not starting:
                raise CliError(
                    "agent worker exited without finishing",
                    "worker_dead",
                    EXIT_DEAD,
                    {"run_id": rd.run_id, "pid": rd.pid(), "lines": cursor.line, "reason": rd.reason()},
                )
        elif not no_worker_check:
            stopped_since = _still_stopped(rd, cursor.line, stopped_since, stopped_limit_s)
        time.sleep(poll_s)


def _still_stopped(rd: RunDir, lines: int, since: float | None, limit_s: float) -> float | None:
    """When the worker (alive) has been stopped since (monotonic s), or None when it is not stopped now. Raises
    CliError ``worker_stopped`` once that is ``limit_s`` ago."""
    pid = rd.pid()
    if pid is None or not stopped(pid):
        return None
    now = time.monotonic()
    if since is None:
        return now
    if now - since < limit_s:
        return since
    raise CliError(
        f"agent worker (pid {pid}) has been stopped for {now - since:.0f} s and writes nothing (SIGSTOP, a debugger, "
        "a suspended job)",
        "worker_stopped",
        EXIT_STOPPED,
        {"run_id": rd.run_id, "pid": pid, "lines": lines, "stopped_s": round(now - since, 1)},
    )


def cmd_slurm_task(args: argparse.Namespace) -> int:
    from .slurm_task import main as slurm_task

    return slurm_task(args.spec, args.orch_home)


def cmd_cancel(args: argparse.Namespace) -> int:
    import signal

    from .reaper import cookie_members, kill_cookie, kill_session, read_cookie

    rd = _existing_run(args.run_id, args)
    pid = rd.pid()
    was_running = pid is not None and rd.worker_alive()
    if not was_running and find_done(read_lines(rd.spool)) is None and rd.pid_trouble() is not None:
        # nothing to stop that can be named, and no done while a worker may write: the spool is there, or a pid
        # file that names no worker of this run (a link, garbage, another run's worker). Only a missing pid file
        # without a spool is a start that died before launching, which a done line ends.
        if os.path.exists(rd.spool) or os.path.lexists(rd.pid_path):
            raise _pid_unreadable(rd, len(read_lines(rd.spool)), "not stopped, no done line written")
    # A live pid that is not our worker is a recycled pid: its group and session are someone else's. A dead
    # worker's pid cannot be reused while processes of its session or group are left (the kernel keeps it).
    ours = pid is not None and (was_running or not pid_alive(pid))
    killed = False
    # the run's cookie (reaper.py): processes that left the worker's session with setsid still carry it
    cookie = read_cookie(rd.path, rd.run_id, rd.host) if pid is not None and ours else None
    if pid is not None and ours and (
        was_running or group_alive(pid) or session_members(pid) or (cookie and cookie_members(cookie))
    ):
        rd.mark_cancel("agent cancel")  # first: the worker reads a SIGTERM without it as one from outside orch
        try:
            os.killpg(pid, signal.SIGTERM)  # the worker's own group (not its commands'): it stops them itself
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + args.grace_s
        while (group_alive(pid) or session_members(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if group_alive(pid) or session_members(pid):
            killed = kill_session(pid, exclude=(os.getpid(),), deadline_s=10.0) > 0
        if cookie and cookie_members(cookie):  # left behind by the worker (dead, or stopped by the SIGKILL above)
            left = max(0.0, deadline - time.monotonic())
            killed = kill_cookie(cookie, grace_s=left, deadline_s=10.0) > 0 or killed
    if find_done(read_lines(rd.spool)) is None:
        have = len(read_lines(rd.spool))
        if args.stored is not None and have < args.stored:  # cut or rewritten: a done now would sit at a stored seq
            raise _spool_cut(rd, have, args.stored, "; no done line written", was_running=was_running, killed=killed)
        try:
            with Spool(rd.spool) as spool:
                if find_done(read_lines(rd.spool)) is None:
                    spool.append(
                        "done",
                        fsync=True,
                        status="cancelled",
                        counts=_counts(read_lines(rd.spool)),
                        note="written by cancel",
                    )
        except SpoolWriteError as exc:
            raise CliError(str(exc), "write_failed", EXIT_WRITE, {"path": rd.spool}) from None
    _print({"run_id": rd.run_id, "was_running": was_running, "killed": killed})
    return EXIT_OK


def _counts(lines: list[bytes]) -> dict[str, int]:
    types = [line_type(raw) for raw in lines]
    return {"lines": len(lines), "results": types.count("result"), "errors": types.count("error")}


def _open_dir(name: str, dir_fd: int | None = None) -> tuple[int | None, str | None]:
    """``(descriptor, None)`` of the real directory ``name`` (relative to ``dir_fd`` when given), opened without
    following a symbolic link (``O_NOFOLLOW``) and without blocking; ``(None, what is there)`` when it is something
    else (``"a symbolic link"`` (to a directory too: following it could reach files outside the run directory),
    ``"a FIFO"``, ``"a regular file"`` ...); ``(None, None)`` when nothing is there. Everything below it is then
    listed and opened through the descriptor, so a directory swapped for a link after this check is never
    followed."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        import errno

        kind = _file_kind(name, dir_fd)
        if kind == "a directory":
            return None, f"a directory it cannot read ({exc.strerror})"
        return None, kind if kind is not None or exc.errno == errno.ENOENT else "a regular file"
    return fd, None


def _case_name(name: str) -> int | None:
    """The case index an entry of ``outputs/`` is named for: a decimal number as the worker writes it (ASCII
    digits, no leading zero); None for any other name (``01``, ``²``, ``١٢``: not the worker's)."""
    if name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0")):
        return int(name)
    return None


def _case_runs(case_fd: int) -> dict[int, dict[str, str]]:
    """``{timed run k: {stream: file name}}`` of one case's kept outputs, listed through its directory's
    descriptor (:func:`_open_dir`)."""
    runs: dict[int, dict[str, str]] = {}
    for name in os.listdir(case_fd):
        k, _, stream = name.partition(".")
        idx = _case_name(k)
        if idx is not None and stream in ("stdout", "stderr", "output"):
            runs.setdefault(idx, {})[stream] = name
    return runs


def _read_output(name: str, dir_fd: int) -> bytes | None:
    """The bytes of a kept output file ``name`` in the directory ``dir_fd``, or None when it is not a regular
    file (a symbolic link, a FIFO, a directory put in its place): opened without following a link (which could
    reach a file outside the run directory) and without blocking (a FIFO's open waited for a writer: ``orch runs
    logs`` hung), never read (:func:`runs.open_regular`)."""
    from .runs import open_regular

    try:
        fd = open_regular(name, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_text(name: str, dir_fd: int) -> dict[str, Any] | None:
    """``{"text", "encoding", "bytes", "sha256"}`` of the file ``name`` in ``dir_fd``: ``text`` is the file itself
    when it is valid UTF-8 (``encoding`` ``"utf-8"``), else its base64 (``"base64"``), so no byte is ever
    replaced. None when it is not a regular file (:func:`_read_output`): ``logs`` then lists it under the run's
    ``not_read``, naming what is in its place (:func:`_file_kind`)."""
    import base64
    import hashlib

    data = _read_output(name, dir_fd)
    if data is None:
        return None
    try:
        text, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {"text": text, "encoding": encoding, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _file_kind(name: str, dir_fd: int | None = None) -> str | None:
    """What is at ``name`` (relative to ``dir_fd`` when given) when it is not a regular file (``"a symbolic
    link"``, ``"a FIFO"``, ``"a directory"``, ``"a socket"``, ``"a device"``), never following a link; None when
    nothing is there or it is a regular file (one that could not be read: its mode)."""
    import stat

    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return None
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _case_outputs(out_fd: int, case: int) -> tuple[dict[str, Any], int | None]:
    """One case's entry of ``logs`` (``{"case_index", "runs": [...]}``, with ``not_read`` for what it would not
    read) and the case directory's descriptor (None when it is not a real directory: the caller closes it)."""
    case_fd, odd = _open_dir(str(case), out_fd)
    if case_fd is None:  # the case's directory replaced (a link elsewhere, a FIFO, a file): say what, read none
        return {"case_index": case, "runs": [], "not_read": odd or "gone"}, None
    entries = []
    runs = _case_runs(case_fd)
    for k in sorted(runs):
        entry: dict[str, Any] = {"run": k}
        for stream, name in sorted(runs[k].items()):
            got = _read_text(name, case_fd)
            if got is not None:
                entry[stream] = got
            elif (kind := _file_kind(name, case_fd)) is not None:  # there, but not the file the worker wrote
                entry.setdefault("not_read", {})[stream] = kind
        entries.append(entry)
    return {"case_index": case, "runs": entries}, case_fd


def cmd_logs(args: argparse.Namespace) -> int:
    rd = _existing_run(args.run_id, args)
    out_fd, odd_outputs = _open_dir(rd.outputs_dir)  # outputs/ itself replaced: nothing under it is read
    try:
        return _logs(rd, args, out_fd, odd_outputs)
    finally:
        if out_fd is not None:
            os.close(out_fd)


def _logs(rd: RunDir, args: argparse.Namespace, out_fd: int | None, odd_outputs: str | None) -> int:
    listed = os.listdir(out_fd) if out_fd is not None else []
    cases = sorted(c for c in map(_case_name, listed) if c is not None)
    if args.case is not None:
        if odd_outputs is not None:
            raise CliError(f"run {rd.run_id!r} on {rd.host}: its outputs directory {rd.outputs_dir} is {odd_outputs}, "
                           "not a directory: not read", "outputs_not_read", EXIT_NO_RUN,
                           {"not_read": odd_outputs})  # fmt: skip
        if args.case not in cases:
            raise CliError(
                f"run {rd.run_id!r} on {rd.host} kept no output for case {args.case} (cases with outputs: "
                f"{', '.join(map(str, cases)) or 'none'})",
                "no_such_case",
                EXIT_NO_RUN,
            )
        cases = [args.case]
    elif args.parsed:
        raise CliError("--parsed needs --case N", "usage", EXIT_USAGE)
    doc: list[dict[str, Any]] = []
    for c in cases:
        assert out_fd is not None
        if args.parsed:
            case_fd, odd = _open_dir(str(c), out_fd)
            try:
                return _parsed(rd, c, odd, case_fd)
            finally:
                if case_fd is not None:
                    os.close(case_fd)
        entry, case_fd = _case_outputs(out_fd, c)
        if case_fd is not None:
            os.close(case_fd)
        doc.append(entry)
    answer: dict[str, Any] = {"run_id": rd.run_id, "host": rd.host, "cases": doc}
    if odd_outputs is not None:
        answer["not_read"] = odd_outputs
    _print(answer)
    return EXIT_OK


def _parsed(rd: RunDir, case: int, odd: str | None, case_fd: int | None) -> int:
    """``logs --parsed --case N``: what orch parses of the case, one text per timed run (its ``{output}`` file,
    else its stdout), read through the case directory's descriptor (None: ``odd`` says what is in its place);
    ``files``: each text's file as read, ``{"run", "bytes", "sha256"}``, which orch compares with the result
    line's ``info.files`` before it parses a text (a file changed on the host after the result was written is
    not what the agent measured)."""
    import hashlib

    if case_fd is None:
        raise CliError(f"the outputs of case {case} are {odd or 'gone'} on the host, not a directory: not read",
                       "no_such_case", EXIT_NO_RUN)  # fmt: skip
    out, files = [], []
    runs = _case_runs(case_fd)
    for k in sorted(runs):
        name = runs[k].get("output") or runs[k].get("stdout")
        data = _read_output(name, case_fd) if name else None
        if data is None:
            raise CliError(f"the output {os.path.join(rd.outputs_dir, str(case), name or '?')} of case {case} is not "
                           "a regular file (a symbolic link, a FIFO or a directory in its place): not read",
                           "no_such_case", EXIT_NO_RUN)  # fmt: skip
        out.append(data.decode("utf-8", "replace"))
        files.append({"run": k, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    _print({"run_id": rd.run_id, "host": rd.host, "case_index": case, "outputs": out, "files": files})
    return EXIT_OK


def _pid_unreadable(rd: RunDir, lines: int, what: str) -> CliError:
    """``pid_unreadable`` (exit 3) for a run whose spool is there but whose pid file does not name the worker
    (``RunDir.pid_trouble``): never "spool gone" while the spool exists. ``what``: what this command did."""
    spool = (f"the spool {rd.spool} is still there ({lines} lines, {what})" if os.path.exists(rd.spool)
             else f"the run has no spool {rd.spool} yet ({what})")  # fmt: skip
    return CliError(
        f"{rd.pid_trouble()}: the worker's state is unknown; {spool}",
        "pid_unreadable",
        EXIT_DEAD,
        {"run_id": rd.run_id, "path": rd.pid_path, "spool": rd.spool, "lines": lines},
    )


def _spool_cut(rd: RunDir, have: int, stored: int, more: str = "", **extra: Any) -> CliError:
    """``spool_changed`` (exit 6) for a spool with fewer lines (``have``) than orch stored (``stored``): it was cut
    or rewritten after orch read it (``follow`` once the worker is gone, ``cancel --stored``)."""
    return CliError(
        f"the spool {rd.spool} has {have} lines, orch had stored {stored}: it was cut or rewritten on the host after "
        f"orch read it{more}",
        "spool_changed",
        EXIT_SPOOL_CHANGED,
        {"run_id": rd.run_id, "path": rd.spool, "lines": have, "stored": stored, **extra},
    )


def cmd_stop_follower(args: argparse.Namespace) -> int:
    import signal

    rd = _existing_run(args.run_id, args)
    pid = args.pid
    killed = False
    if valid_pid(pid) and pid > 1 and pid != os.getpid() and pid != rd.pid() and _follower_of(pid, rd.run_id):
        try:
            os.kill(pid, signal.SIGKILL)  # a stopped process dies of SIGKILL too
            killed = True
        except ProcessLookupError:
            pass
    _print({"run_id": rd.run_id, "pid": pid, "killed": killed})
    return EXIT_OK


def _follower_of(pid: int, run_id: str) -> bool:
    """Whether process ``pid`` is an agent follower of run ``run_id``: its command line has the run id and
    ``follow`` (``agent follow RUN_ID``) or ``--follow`` (``agent start --follow --run-id RUN_ID``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0")]
    except OSError:
        return False
    return run_id in argv and ("follow" in argv or "--follow" in argv)


def cmd_status(args: argparse.Namespace) -> int:
    rd = _run_dir(args.run_id, args)
    st = rd.status()
    _print(st)
    return EXIT_OK if rd.exists() else EXIT_NO_RUN


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="orch-agent", description="orch's host agent (prints JSON)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def home(p: argparse.ArgumentParser) -> None:
        p.add_argument("--orch-home", default=None, help="orch home directory (default ~/.orch)")
        p.add_argument("--host", default=None, help="this host's name in orch's inventory (default: hostname)")

    def stopped_limit(p: argparse.ArgumentParser) -> None:
        p.add_argument("--stopped-limit-s", type=float, default=STOPPED_LIMIT_S,
                       help=f"exit 7 once the worker has been stopped this long, s (default {STOPPED_LIMIT_S:g})")
        p.add_argument("--heartbeat-s", type=float, default=0.0,
                       help="write a heartbeat line to stderr every this many s while following (default 0: none)")

    p = sub.add_parser("facts", help="host facts as JSON")
    home(p)
    p.add_argument(
        "--fresh", action="store_true", help="probe torch now, not from this host's cached probe (a day old at most)"
    )
    p.set_defaults(fn=cmd_facts)
    p = sub.add_parser("version", help="agent version, Python version, protocol version")
    home(p)  # accepted (and ignored) so every command takes the same common options
    p.set_defaults(fn=cmd_version)
    p = sub.add_parser("start", help="start a run detached; prints run_id, pid, spool")
    p.add_argument("--spec", required=True, help="spec JSON file, or - to read it from stdin")
    p.add_argument("--follow", action="store_true", help="then print the spool lines until done, as follow does")
    p.add_argument("--run-id", default=None,
                   help="the spec's run id, for the process table (the forked worker keeps start's command line)")
    p.add_argument("--poll-s", type=float, default=0.02, help="with --follow: seconds between polls, default 0.02")
    stopped_limit(p)
    home(p)
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("_worker", help=argparse.SUPPRESS)
    p.add_argument("run_dir")
    p.set_defaults(fn=cmd_worker)
    p = sub.add_parser("follow", help="stream spool lines from --from SEQ until done")
    p.add_argument("run_id")
    p.add_argument("--from", dest="from_seq", type=int, default=0, help="first line (seq) to print, default 0")
    p.add_argument("--poll-s", type=float, default=0.02, help="seconds between polls of the spool, default 0.02")
    p.add_argument("--stored", type=int, default=None,
                   help="lines of the spool orch has stored (default --from): exit 6 when the worker is gone and "
                   "the spool has fewer")
    stopped_limit(p)
    home(p)
    p.set_defaults(fn=cmd_follow)
    p.add_argument("--no-worker-check", action="store_true",
                   help="do not stop when the worker is not alive here (it runs on another node)")
    p = sub.add_parser("slurm-task", help="inside a Slurm job step: this node's worker in the foreground")
    p.add_argument("--spec", required=True, help="spec JSON file (on storage the nodes share)")
    home(p)
    p.set_defaults(fn=cmd_slurm_task)
    p = sub.add_parser("cancel", help="stop a run's process group")
    p.add_argument("run_id")
    p.add_argument("--grace-s", type=float, default=CANCEL_GRACE_S, help="SIGTERM grace before SIGKILL, s")
    p.add_argument("--stored", type=int, default=None,
                   help="lines of the spool orch has stored: exit 6, no done written, when the spool has fewer")
    home(p)
    p.set_defaults(fn=cmd_cancel)
    p = sub.add_parser("logs", help="full outputs a command run kept on the host")
    p.add_argument("run_id")
    p.add_argument("--case", type=int, default=None, help="only this case (its index in the run)")
    p.add_argument("--parsed", action="store_true", help="only the text orch parses, one per timed run")
    home(p)
    p.set_defaults(fn=cmd_logs)
    p = sub.add_parser("stop-follower", help="SIGKILL a (stopped, wedged) follower of a run, never its worker")
    p.add_argument("run_id")
    p.add_argument("--pid", type=int, required=True, help="the follower's pid, from its heartbeat")
    home(p)
    p.set_defaults(fn=cmd_stop_follower)
    p = sub.add_parser("status", help="state of a run")
    p.add_argument("run_id")
    home(p)
    p.set_defaults(fn=cmd_status)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except (CliError, SpoolReadError) as caught:
        # a spool that cannot be read (EIO, a FIFO ...) is the host's error naming the path, never a traceback
        exc = caught if isinstance(caught, CliError) else CliError(str(caught), "read_failed", EXIT_WRITE,
                                                                    {"path": caught.path})  # fmt: skip
        stream = sys.stderr if args.command == "follow" or getattr(args, "following", False) else sys.stdout
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
