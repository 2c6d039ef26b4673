"""A run's directory on the host and the liveness of its worker.

``<orch_home>/runs/<run_id>/<host>/`` (per host: homes are often shared over NFS, and two hosts of one run must not
share a spool) holds ``spec.json``, ``pid`` (the worker's pid, which is also its process group and session id),
``pid.start`` (``PID START``, written before ``pid``: the worker's start time in clock ticks after boot, field 22 of
``/proc/PID/stat``, by which a recycled pid is told apart from a worker that ``start`` forked; absent for a worker
that exec'd ``_worker RUN_DIR``, recognised by its command line), ``events.jsonl`` (the spool), ``reason`` (why the
worker died, when it could tell: see :mod:`.fatal`), ``outputs/`` (full outputs of ``command`` cases) and
``worker.log`` (the worker's stdout and stderr: tracebacks of crashes that the spool could not record). Everything
is created 0700/0600: the spec may hold secrets in ``env``.

Nothing is signalled on the word of a pid file alone: both files are opened without following a symbolic link
(``O_NOFOLLOW``), a pid is 1 to ``pid_max - 1`` (:func:`valid_pid`), and a live process is this run's worker only
when it works in this run directory (:func:`is_worker`) — a pid file copied or linked from another run names
that run's worker, which is never this run's to stop.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import socket
from stat import S_ISREG
from typing import Any

from .spool import SPOOL_NAME, find_done, read_lines

DEFAULT_ORCH_HOME = "~/.orch"


def resolve_home(orch_home: str | None = None) -> str:
    """The absolute orch home: the argument, else ``~/.orch`` — as ``sysinfo.resolve_home``, which keeps its own
    copy because it also runs alone (``orch doctor`` sends sysinfo.py's source), and which this module does not
    import: a run's commands need none of the facts."""
    return os.path.abspath(os.path.expanduser(orch_home or DEFAULT_ORCH_HOME))

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_run_id(run_id: str) -> bool:
    """Run ids name a directory: letters, digits, ``._-``, no leading dot, at most 128 characters."""
    return bool(_RUN_ID_RE.match(run_id))


def default_host() -> str:
    """The name a run directory is kept under when orch names no host: this machine's hostname, made valid."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()).lstrip(".") or "localhost"
    return name[:128]


class RunDir:
    """``path`` is ``<orch_home>/runs/<run_id>/<host>``."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.host = os.path.basename(self.path)
        self.run_id = os.path.basename(os.path.dirname(self.path))

    @classmethod
    def for_run(cls, run_id: str, orch_home: str | None = None, host: str | None = None) -> RunDir:
        return cls(os.path.join(resolve_home(orch_home), "runs", run_id, host or default_host()))

    @property
    def orch_home(self) -> str:
        return os.path.dirname(os.path.dirname(os.path.dirname(self.path)))

    @property
    def reason_path(self) -> str:
        return os.path.join(self.path, "reason")

    @property
    def outputs_dir(self) -> str:
        return os.path.join(self.path, "outputs")

    def reason(self) -> str | None:
        """Why the worker died, as it recorded it (see :mod:`.fatal`), or None."""
        from .fatal import read_reason

        return read_reason(self.reason_path)

    @property
    def spool(self) -> str:
        return os.path.join(self.path, SPOOL_NAME)

    @property
    def spec_path(self) -> str:
        return os.path.join(self.path, "spec.json")

    @property
    def pid_path(self) -> str:
        return os.path.join(self.path, "pid")

    @property
    def cancel_path(self) -> str:
        """``cancel``: written by ``agent cancel`` before it sends SIGTERM (and by ``slurm-task`` at the start: in
        a job step SIGTERM is Slurm's stop, which orch reads from sacct), so the worker tells a cancel from a
        SIGTERM sent from outside orch (an admin's kill, a watchdog, systemd-oomd), which it reports as a failure
        (``done`` status failed, ``stopped_by: "sigterm"``), not as a cancel."""
        return os.path.join(self.path, "cancel")

    def mark_cancel(self, by: str) -> None:
        """Leave the ``cancel`` marker (``by``: who cancels, one line); best effort: a run directory that cannot
        be written still gets its SIGTERM (the worker then reports it as one from outside orch)."""
        try:
            fd = os.open(self.cancel_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError:
            return
        try:
            os.write(fd, f"{by} pid {os.getpid()}\n".encode())
        except OSError:
            pass
        finally:
            os.close(fd)

    def cancel_marked(self) -> bool:
        return os.path.exists(self.cancel_path)

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def pid(self) -> int | None:
        return self._pid_file()[0]

    @property
    def pid_start_path(self) -> str:
        return self.pid_path + ".start"

    def _pid_file(self) -> tuple[int | None, int | None]:
        """``(pid, start time)``: ``(None, None)`` before ``pid`` is written, or when it is a symbolic link, not a
        regular file, or holds no valid pid (:func:`parse_pid`); start None without a ``pid.start`` (regular file,
        not a link) for that pid."""
        try:
            pid = parse_pid(read_pid_file(self.pid_path))
        except OSError:
            return None, None
        if pid is None:
            return None, None
        try:
            fields = read_pid_file(self.pid_start_path).split()
            return pid, (int(fields[1]) if parse_pid(fields[0]) == pid else None)
        except (OSError, ValueError, IndexError):
            return pid, None

    def worker_alive(self) -> bool:
        pid, start = self._pid_file()
        return pid is not None and is_worker(pid, self.path, start)

    def pid_trouble(self) -> str | None:
        """Why the worker's pid file does not name the worker (None when it does, or when it names a process that
        is gone, or a recycled pid, and no live worker of this run works here: a dead worker is a reading, not a
        trouble): ``pid`` names no live worker while one of this run works in this directory (:func:`workers_in`:
        the pid file was overwritten; never called dead, nothing written); ``pid`` missing, a symbolic link (never
        followed: a link could name another run's worker), not a regular file, unreadable, empty or not a pid
        (:func:`parse_pid`); ``pid.start`` a symbolic link; ``pid.start`` missing or for another pid while ``pid``
        names a live process this run dir does not recognise (without it a recycled pid cannot be told from the
        worker); or ``pid`` and ``pid.start`` naming a live process that started then but is not this run's
        worker (its working directory is not this run directory: another run's worker). One sentence naming the
        path."""
        try:
            raw = read_pid_file(self.pid_path)
        except OSError as exc:
            return f"the worker's pid file {self.pid_path} {_file_trouble(exc)}"
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return f"the worker's pid file {self.pid_path} is empty"
        if parse_pid(raw) is None:
            return f"the worker's pid file {self.pid_path} holds {text[:40]!r}, not a pid"
        if os.path.islink(self.pid_start_path):
            return f"the worker's start-time file {self.pid_start_path} is a symbolic link"
        pid, start = self._pid_file()
        if pid is None or is_worker(pid, self.path, start):
            return None
        if not pid_alive(pid):
            return self._unnamed_worker(pid, "a process that is gone")
        if exiting(pid):  # the worker SIGKILLed, tearing down: its working directory is released before it is a
            # zombie (a window a loaded machine widens), so it read as "not this run's worker"; it is ending
            return self._unnamed_worker(pid, "a process that is ending")
        if start is None:
            return (f"the worker's start-time file {self.pid_start_path} is missing or names another pid, and pid "
                    f"{pid} is a live process that is not recognisably this run's worker")  # fmt: skip
        if start_time(pid) == start:
            return (f"the worker's pid file {self.pid_path} names pid {pid}, a live process started when "
                    f"{self.pid_start_path} says, but it is not this run's worker (its working directory is not "
                    f"{self.path}): another run's worker")  # fmt: skip
        return self._unnamed_worker(pid, "a recycled pid (a live process that is not this run's worker)")

    def _unnamed_worker(self, pid: int, what: str) -> str | None:
        """The trouble when the pid file names no live worker (``pid``, ``what`` it is) while a live agent worker
        of this run works in this directory (:func:`workers_in`): the pid file was overwritten (a copy of another
        run's files, a stale pid), and the run is not dead. None when there is none: the worker is dead. Only
        asked once the pid file's process is not the worker, so a healthy poll never scans /proc."""
        live = workers_in(self.path, self.run_id)
        if not live:
            return None
        w = live[0]
        others = f" (and pid {', '.join(map(str, live[1:]))})" if live[1:] else ""
        return (f"the worker's pid file {self.pid_path} names pid {pid}, {what}, but pid {w}{others} is a live agent "
                f"worker of run {self.run_id} working in {self.path}: the pid file does not name it (overwritten or "
                f"copied from another run); stop it on the host with `kill -TERM -- -{w}` (its process group), or "
                f"let it finish")  # fmt: skip

    def not_this_run(self) -> str | None:
        """Why this directory is not run ``run_id``'s own directory for host ``host`` (None when nothing says so):
        ``<runs>/<run_id>`` or ``<runs>/<run_id>/<host>`` is a symbolic link (lstat, never followed: a link to
        another run's directory would let this run's commands stop that run's worker and read its spool as this
        run's; the orch home and ``runs`` above may be links, to a bigger disk), or ``spec.json`` (written by
        ``start`` and ``slurm-task`` before any worker, read without following a link) names another run (a bind
        mount of another run's directory shows that run's spec), or was written for another host of this run
        (:data:`SPEC_HOST_KEY`: in a home shared by several hosts, one host's directory mounted onto another's would
        have its spool stored as the other host's results), or is a link. One sentence naming the directory
        and what it holds. A directory without ``spec.json`` yet (a start that died before writing it) proves
        nothing either way: None."""
        runs = os.path.dirname(os.path.dirname(self.path))
        for path in (os.path.join(runs, self.run_id), self.path):
            try:
                if not os.path.islink(path):
                    continue
                target = os.readlink(path)
            except OSError:
                target = "?"
            return (f"the run directory {path} is a symbolic link (to {target}), not run {self.run_id}'s own "
                    "directory: it may hold another run's worker and spool")  # fmt: skip
        try:
            fd = os.open(self.spec_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return (f"the run's spec {self.spec_path} is a symbolic link: {self.path} is not proved to be run "
                        f"{self.run_id}'s own directory")  # fmt: skip
            return None
        try:
            with os.fdopen(fd, "rb") as f:
                doc = json.loads(f.read().decode("utf-8"))
            held, held_host = doc.get("run_id"), doc.get(SPEC_HOST_KEY)
        except (OSError, ValueError, AttributeError):
            return None  # unreadable or half written: start's own check of the spec says so
        if held != self.run_id:
            return (f"the run directory {self.path} holds the files of run {held!r} ({self.spec_path} names run "
                    f"{held!r}, not {self.run_id!r}): another run's directory, linked or mounted here")  # fmt: skip
        if held_host is None or held_host == self.host:  # a spec written before the host was recorded: None
            return None
        return (f"the run directory {self.path} holds host {held_host!r}'s files of run {held!r} ({self.spec_path} "
                f"was written for host {held_host!r}, not {self.host!r}): another host's directory of this run, "
                "linked or mounted here")  # fmt: skip

    def status(self) -> dict[str, Any]:
        """``{"run_id", "host", "state": running|finished|dead|unknown|unknown_worker, "pid", "lines", "done"}``
        (+ ``reason`` when dead: the worker's own last words, or None). ``unknown``: no pid recorded and no spool
        (a start that died before launching); ``unknown_worker``: the spool is there but the pid file does not name
        the worker (``pid_trouble`` says why): the spool can be collected as far as it goes, the worker's state is
        unknown."""
        foreign = self.not_this_run() if self.exists() else None
        if foreign is not None:  # never another run's pid, spool or done reported as this run's
            return {"run_id": self.run_id, "host": self.host, "state": "unknown_worker", "pid": None, "lines": 0,
                    "done": None, "pid_trouble": foreign}  # fmt: skip
        pid = self.pid()
        lines = read_lines(self.spool)
        done = find_done(lines)
        trouble = self.pid_trouble() if self.exists() and done is None else None
        if not self.exists():
            state = "unknown"
        elif done is not None:
            state = "finished"
        elif trouble is not None and (os.path.exists(self.spool) or pid is not None):
            state = "unknown_worker"
        elif pid is None:
            state = "unknown"
        elif self.worker_alive():
            state = "running"
        else:
            state = "dead"
        out = {"run_id": self.run_id, "host": self.host, "state": state, "pid": pid, "lines": len(lines), "done": done}
        if state == "dead":
            out["reason"] = self.reason()
        if state == "unknown_worker":
            out["pid_trouble"] = trouble
        return out


# The key ``start`` and ``slurm-task`` add to ``spec.json``: the host directory the spec was written for (orch's
# spec itself is the same for every host of a run). Never part of orch's spec: :func:`spec_as_sent` drops it.
SPEC_HOST_KEY = "written_for_host"


def spec_as_written(spec: dict[str, Any], host: str) -> bytes:
    """``spec.json``'s bytes for ``spec`` written in ``host``'s run directory: the spec plus :data:`SPEC_HOST_KEY`,
    so that :meth:`RunDir.not_this_run` can tell another host's directory of the same run."""
    return json.dumps({**spec, SPEC_HOST_KEY: host}, sort_keys=True).encode("utf-8")


def spec_as_sent(doc: Any) -> Any:
    """``spec.json``'s document without :data:`SPEC_HOST_KEY`: the spec as orch sent it (what a second ``start``
    compares with its own)."""
    if isinstance(doc, dict):
        return {k: v for k, v in doc.items() if k != SPEC_HOST_KEY}
    return doc


PID_MAX_LIMIT = 1 << 22  # PID_MAX_LIMIT of <linux/threads.h> on 64-bit: the most pid_max can be (proc(5))
PID_FILE_MAX_BYTES = 64  # a pid file holds one decimal pid (and pid.start a pid and a tick count): never more


@functools.cache
def pid_max() -> int:
    """The kernel's ``/proc/sys/kernel/pid_max``: one more than the largest pid it hands out (``proc(5)``); where it
    cannot be read, :data:`PID_MAX_LIMIT`. Read once per process: :func:`valid_pid` guards every liveness probe
    (the follower makes them at each poll), and the file did cost an open and a read each time."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return PID_MAX_LIMIT


def valid_pid(pid: int) -> bool:
    """True for a pid the kernel can hand out: 1 to ``pid_max() - 1``. Nothing else is ever signalled or probed:
    ``kill(0, ...)`` and ``killpg(0, ...)`` mean the caller's own process group, a negative pid a group (or every
    process, -1), and a pid beyond a C long makes ``os.kill`` raise OverflowError."""
    return 0 < pid < pid_max()


def parse_pid(raw: bytes | str) -> int | None:
    """The pid a pid file's text names (ASCII digits, surrounding whitespace allowed, :func:`valid_pid`), or None."""
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    pid = int(text)
    return pid if valid_pid(pid) else None


def open_regular(path: str, dir_fd: int | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (relative to ``dir_fd`` when given), opened without
    following a symbolic link (``O_NOFOLLOW``: a link raises OSError ELOOP) and without blocking (a FIFO is
    refused, not waited on). Raises OSError, also with EINVAL (our own) for anything but a regular file (the
    descriptor is closed then)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    if not S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def read_pid_file(path: str) -> bytes:
    """The first :data:`PID_FILE_MAX_BYTES` of ``path`` (:func:`open_regular`). Raises OSError."""
    fd = open_regular(path)
    try:
        return os.read(fd, PID_FILE_MAX_BYTES)
    finally:
        os.close(fd)


def _file_trouble(exc: OSError) -> str:
    """What ``read_pid_file``'s error says about the file, as the end of a sentence naming it."""
    if exc.errno == errno.ENOENT:
        return "is missing"
    if exc.errno == errno.ELOOP:
        return "is a symbolic link"
    if exc.errno == errno.EINVAL:
        return "is not a regular file"
    return f"is unreadable ({exc.strerror})"


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (an unreaped zombie counts as gone); False for a pid that is
    not :func:`valid_pid` (never probed: ``kill(0, 0)`` succeeds for the caller's own group)."""
    if not valid_pid(pid):
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        # EPERM: it exists but belongs to someone else.
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def stopped(pid: int) -> bool:
    """True when ``pid`` is stopped: state ``T`` (SIGSTOP, SIGTSTP, a job-control stop; Slurm's ``scontrol
    suspend`` sends SIGSTOP) or ``t`` (held by a tracer: a debugger), field 3 of ``/proc/PID/stat`` (``proc(5)``).
    False when it runs, sleeps, or cannot be read."""
    if not valid_pid(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] in "Tt"
    except (OSError, ValueError, IndexError):
        return False


PF_KTHREAD = 0x00200000  # <linux/sched.h>: the flags field (9th) of /proc/PID/stat marks a kernel thread
PF_EXITING = 0x00000004  # <linux/sched.h>: the same field marks a process getting shut down (do_exit)


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks after boot (field 22 of ``/proc/PID/stat``, ``proc(5)``), or None."""
    if not valid_pid(pid):
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def is_worker(pid: int, run_dir: str, start: int | None = None) -> bool:
    """Alive, working in ``run_dir``, and (where /proc tells) still the worker of ``run_dir`` rather than a
    recycled pid.

    Every worker works in its run directory (``start`` forks it after ``chdir(RUN_DIR)``; ``slurm-task`` changes
    there before it execs ``_worker RUN_DIR``; the worker never changes directory): ``/proc/PID/cwd`` must be that
    directory (same device and inode), or the process is not this run's worker — another run's worker that a
    copied or linked pid file names included. Where the working directory cannot be read the process is not
    taken for the worker: nothing is signalled that was not proved to be this run's.

    ``start``: the worker's start time as ``start`` recorded it (a worker forked by ``start`` has the command line
    of ``start``): the process is the worker when it started then. Without it (a worker that exec'd
    ``_worker RUN_DIR``, as ``slurm-task`` does), the command line tells.

    An empty command line is a process inside ``execve``: ``subprocess.Popen`` returns once the close-on-exec
    descriptors are closed, before the kernel has laid out the new program's arguments (measured: 285 of 300
    reads right after ``Popen`` returned, on a loaded machine). ``start --follow`` asks at once, so such a
    process is taken as the worker just launched; a kernel thread (also without a command line) is not."""
    if not pid_alive(pid) or not works_in(pid, run_dir):
        return False
    if start is not None:
        now = start_time(pid)
        return now is None or now == start
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return True
    if not raw:
        return not _kernel_thread(pid)
    argv = raw.split(b"\0")
    return b"_worker" in argv and os.fsencode(run_dir) in argv


WORKER_COMMANDS = (b"start", b"_worker", b"slurm-task")  # the agent commands whose process becomes a run's worker


def workers_in(run_dir: str, run_id: str) -> list[int]:
    """The pids (ascending) of the live agent workers of run ``run_id`` working in ``run_dir``, found by a scan of
    /proc (one read of ``/proc/PID/stat`` per process, a stat of ``/proc/PID/cwd`` for session leaders only).

    A worker is a session leader (``start`` forks it after ``setsid``; ``slurm-task`` makes it one before it execs
    ``_worker RUN_DIR`` or forks it), so the guardian (:mod:`.reaper`, a fork of the worker in its session and its
    own group), the worker's commands and a multi-GPU bench's ranks are not taken for one. Its working directory
    is ``run_dir`` (same device and inode, as :func:`works_in`), and its command line is an agent command that
    becomes a worker (:data:`WORKER_COMMANDS`); with ``--run-id ID`` (as orch's ``start`` passes it) ``ID`` must
    be ``run_id``. Zombies and this process are left out."""
    try:
        here = os.stat(run_dir)
    except OSError:
        return []
    me = os.getpid()
    found = []
    for pid, state, _pgid, sid in _proc_stats():
        if sid != pid or pid == me or state == "Z":
            continue
        try:
            cwd = os.stat(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if (cwd.st_dev, cwd.st_ino) != (here.st_dev, here.st_ino) or not any(c in argv for c in WORKER_COMMANDS):
            continue
        if b"--run-id" in argv:
            i = argv.index(b"--run-id")
            if argv[i + 1 : i + 2] != [os.fsencode(run_id)]:
                continue
        found.append(pid)
    return sorted(found)


def _argv_value(argv: list[bytes], option: bytes) -> bytes | None:
    """The value of ``option`` in a /proc cmdline's ``argv`` as argparse reads it (``--opt VALUE`` or
    ``--opt=VALUE``; the last one given wins), or None when it is not there."""
    found = None
    for i, word in enumerate(argv):
        if word == option and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith(option + b"="):
            found = word[len(option) + 1 :]
    return found


def workers_elsewhere(run_id: str, host: str, run_dir: str, orch_home: str) -> list[tuple[int, str]]:
    """``[(pid, working directory)]`` (by pid) of the live agent workers of run ``run_id`` for ``host`` that do
    not work in ``run_dir``: its directory was moved while it ran (``mv``: the worker's working directory, read
    through ``/proc/PID/cwd``, holds the ``spec.json`` of this run and host) or removed (the directory reads
    ``(deleted)`` and the worker's command line names the run and host: ``--run-id``, ``--host``, as orch's
    ``start`` passes them). :func:`workers_in` finds workers by the directory's inode, which a new directory at
    the old path does not share. A worker is a session leader whose command line is an agent command that becomes
    a worker (:data:`WORKER_COMMANDS`) under the orch home ``orch_home`` (its ``--orch-home``, else the default,
    compared with links resolved: the same run id in another home is another run; a relative ``--orch-home`` is
    read from this process's directory); zombies and this process are left out. A removed directory's worker
    started without ``--run-id`` (never by orch) cannot be told from others and is not found."""
    try:
        here = os.stat(run_dir)
        here_id: tuple[int, int] | None = (here.st_dev, here.st_ino)
    except OSError:
        here_id = None
    me, found = os.getpid(), []
    for pid, state, _pgid, sid in _proc_stats():
        if sid != pid or pid == me or state == "Z":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not any(c in argv for c in WORKER_COMMANDS):
                continue
            home = _argv_value(argv, b"--orch-home")
            if os.path.realpath(resolve_home(os.fsdecode(home) if home else None)) != os.path.realpath(orch_home):
                continue
            cwd = os.stat(f"/proc/{pid}/cwd")
            where = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if (cwd.st_dev, cwd.st_ino) == here_id:
            continue
        named = _argv_value(argv, b"--run-id") == os.fsencode(run_id)
        its_host = _argv_value(argv, b"--host") or os.fsencode(default_host())
        if named and where.endswith(" (deleted)") and its_host == os.fsencode(host):
            found.append((pid, where))
            continue
        try:
            with open(f"/proc/{pid}/cwd/spec.json", "rb") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("run_id") == run_id and doc.get(SPEC_HOST_KEY) == host:
            found.append((pid, where))
    return found


def works_in(pid: int, directory: str) -> bool:
    """True when process ``pid``'s working directory (``/proc/PID/cwd``, ``proc(5)``; readable for our own
    processes) is ``directory``: the same device and inode, whatever path spells it. False when either cannot be
    read (another user's process, a pid that is gone, a directory that is gone)."""
    if not valid_pid(pid):
        return False
    try:
        cwd = os.stat(f"/proc/{pid}/cwd")
        here = os.stat(directory)
    except OSError:
        return False
    return (cwd.st_dev, cwd.st_ino) == (here.st_dev, here.st_ino)


def exiting(pid: int) -> bool:
    """True when ``pid`` is on its way out (``PF_EXITING``, set by the kernel's ``do_exit`` before the process
    releases its files and working directory and long before it is a zombie). False when it runs or cannot be
    read."""
    return _has_flag(pid, PF_EXITING)


def _kernel_thread(pid: int) -> bool:
    return _has_flag(pid, PF_KTHREAD)


def _has_flag(pid: int, flag: int) -> bool:
    """Whether ``flag`` is set in ``pid``'s flags (field 9 of ``/proc/PID/stat``, ``proc(5)``); False when it
    cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return bool(int(stat[stat.rindex(")") + 2 :].split()[6]) & flag)
    except (OSError, ValueError, IndexError):
        return False


def _proc_stats() -> list[tuple[int, str, int, int]]:
    """``(pid, state, pgid, sid)`` of every process /proc shows."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            rest = stat[stat.rindex(")") + 2 :].split()
            out.append((int(name), rest[0], int(rest[2]), int(rest[3])))
        except (OSError, ValueError, IndexError):
            continue
    return out


def session_members(sid: int, exclude: tuple[int, ...] = ()) -> list[tuple[int, int]]:
    """``(pid, pgid)`` of the live (non-zombie) processes of session ``sid``, leaving out ``exclude``; none for a
    ``sid`` that is not :func:`valid_pid` (session 0 holds the kernel's threads).

    The worker is a session leader (``start`` launches it with ``setsid``) and every process it starts stays in
    its session (commands get their own process group, not their own session), so this is "everything the run
    started" — except a program that calls ``setsid`` itself (followed by the run cookie instead: ``reaper.py``)."""
    if not valid_pid(sid):
        return []
    return [(pid, pgid) for pid, state, pgid, s in _proc_stats() if s == sid and state != "Z" and pid not in exclude]


def group_alive(pgid: int) -> bool:
    """True when any non-zombie process is left in process group ``pgid``; False for a ``pgid`` that is not
    :func:`valid_pid` (never probed: ``killpg(0, 0)`` is the caller's own group, and group 0 in /proc is the
    kernel's threads)."""
    if not valid_pid(pgid):
        return False
    try:
        os.killpg(pgid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        if len(rest) > 2 and rest[2] == str(pgid) and rest[0] != "Z":
            return True
    return False
