"""Expected failures of orch, each carrying what the user needs to act on it.

The tree::

    OrchError                      message + hint; the CLI prints both in red and exits 1 (a host or run failed)
    ├── UsageError                 bad input or configuration from the user; exit 2 at the CLI
    │   ├── InventoryError         inventory.yaml malformed: file, line, key, fix
    │   ├── SelectionError         --hosts matched nothing / unknown name
    │   ├── SuiteError             unknown suite, unknown or bad parameter, bad suite file
    │   ├── ConfigError            settings (ORCH_*), tokens, ports
    │   ├── IncomparableError      two runs that cannot be compared (other suites, no shared case); API 422
    │   └── ProjectionError        orch project: a run of the wrong suite, an unknown GPU, a missing peak or roof
    ├── ToolMissingError           a program orch runs is not installed (the OpenSSH client); hint: the package
    ├── HostError                  something about one host; `host` names it
    │   ├── ConnectError           dns / tcp / banner / throttled / handshake; `kind` says which
    │   │   └── CommandSilent      a streaming command said nothing, not even its heartbeat (kind `silent`); `pid`
    │   ├── HostKeyError           verdict other than match / cert-authority; carries the verdict
    │   ├── AuthError              denied / too many authentication failures / no usable method
    │   ├── RemoteCommandError     a remote command exited non-zero: argv, exit status, stderr tail
    │   ├── CommandTimeout         a remote command ran past its deadline
    │   └── DeployError            upload / verify / switch failed
    └── StoreError                 database unreachable, locked, migration needed
        ├── NotFoundError          a run / host / build id that is not in the store; exit 2 (the user named it)
        ├── SchemaTooNewError      the database was migrated by a newer orch; exit 2
        └── SchemaBehindError      the database is empty, older, or has tables without a revision; exit 2

An agent line that is not a valid event is not an exception: ``protocol.parse_line`` turns it into an ``error``
event for its place in the spool.

Third-party exceptions are translated at the boundary where they are raised (asyncssh in
``transport/ssh.py``, SQLAlchemy in ``store/``) with ``raise ... from exc``.
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Sequence
from typing import Any


class OrchError(Exception):
    """Base of every expected failure.

    Args:
        message: what went wrong, one line, naming the place (host, file:line, run id).
        hint: what the user can do about it, or ``""``.
    """

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(OrchError):
    exit_code = 2


class InventoryError(UsageError):
    """The inventory file is malformed; ``path`` and ``line`` locate the problem (line 0 = unknown)."""

    def __init__(self, message: str, hint: str = "", *, path: str = "", line: int = 0) -> None:
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(f"{where}{message}", hint)
        self.path = path
        self.line = line


class SelectionError(UsageError):
    pass


class SuiteError(UsageError):
    pass


class ConfigError(UsageError):
    pass


class IncomparableError(UsageError):
    """Two runs that cannot be compared: of different suites, or sharing no case of the metric."""


class ProjectionError(UsageError):
    pass


class ToolMissingError(OrchError):
    """A program orch runs locally is missing (``ssh`` for ``ssh -G``); the hint names the package."""


class HostError(OrchError):
    """A failure tied to one host."""

    def __init__(self, host: str, message: str, hint: str = "") -> None:
        super().__init__(f"{host}: {message}", hint)
        self.host = host
        self.reason = message


class ConnectError(HostError):
    """Could not reach the SSH server.

    ``kind`` is one of ``dns``, ``refused``, ``timeout``, ``no-route``, ``unreachable``, ``banner-timeout``,
    ``not-ssh``, ``closed``, ``throttled``, ``handshake``, ``proxy``, ``silent`` (a streaming command said nothing, not
    even its heartbeat, for its limit: ``transport/watch.py``).
    """

    def __init__(self, host: str, kind: str, message: str, hint: str = "") -> None:
        super().__init__(host, message, hint)
        self.kind = kind


class CommandSilent(ConnectError):
    """A streaming command (the agent's follower) said nothing on stdout and sent no heartbeat for ``silent_s``
    seconds: stopped or wedged on the host. ``pid``: its pid on the host, as its heartbeats named it (None when
    they named none). Callers treat it as a dropped connection (follow again), after killing the process."""

    def __init__(self, host: str, message: str, hint: str, *, silent_s: float, pid: int | None) -> None:
        super().__init__(host, "silent", message, hint)
        self.silent_s = silent_s
        self.pid = pid


class HostKeyError(HostError):
    def __init__(self, host: str, verdict: str, message: str, hint: str = "") -> None:
        super().__init__(host, message, hint)
        self.verdict = verdict


class AuthError(HostError):
    """``kind`` is ``denied``, ``too-many-failures`` or ``no-method`` (the server offers no method orch uses)."""

    def __init__(self, host: str, kind: str, message: str, hint: str = "") -> None:
        super().__init__(host, message, hint)
        self.kind = kind


def signal_name(status: int) -> str:
    """The signal a negative status stands for, as sshd names it (``-9``: ``KILL``; an unknown number as itself)."""
    try:
        return _signal.Signals(-status).name.removeprefix("SIG")
    except ValueError:
        return str(-status)


def exit_text(exit_status: int | None, signal: str | None = None) -> str:
    """How a command ended, for messages: ``exit status 3``; ``killed by signal KILL`` for a signal (sshd's
    ``exit-signal`` name, or a local child's negative returncode, ``-9``); ``no exit status (its session was cut)``
    when neither came back. Never a raw ``None`` or ``-9``."""
    if exit_status is not None and exit_status < 0 and signal is None:
        signal = signal_name(exit_status)
    if signal is not None:
        return f"killed by signal {signal}"
    if exit_status is None:
        return "no exit status (its session was cut)"
    return f"exit status {exit_status}"


def command_shown(argv: Sequence[str]) -> str:
    """A remote command as messages show it: its first four arguments, ``" ..."`` when more follow, and an
    argument of several lines or over 200 characters cut to its first line's first 40 characters and its length
    (the deploy helper goes as ``python -c <20 KB of source>``: a drop while it ran put all of it in the host's
    error). Paths (a host's interpreter, the agent's tree) are shorter and shown whole."""

    def one(arg: str) -> str:
        if len(arg) <= 200 and "\n" not in arg:
            return arg
        return f"{arg.splitlines()[0][:40]}…[{len(arg)} chars]"

    return " ".join(one(a) for a in argv[:4]) + (" ..." if len(argv) > 4 else "")


class RemoteCommandError(HostError):
    """``exit_status`` None: the command was killed by ``signal`` (its name as sshd sends it: ``KILL``), or, with
    no signal either, ended without any status (the session was cut; transports raise ConnectError for that).
    A negative ``exit_status`` is taken as "killed by a signal" and stored as None with the signal's name: a local
    child's returncode ``-9`` is ``KILL``; asyncssh's ``-1``, which it reports for any signal, comes with the
    name sshd sent. Callers tell a killed command (None) from one that exited (an int >= 0) by that alone."""

    def __init__(
        self, host: str, argv: list[str], exit_status: int | None, stderr: str, hint: str = "",
        signal: str | None = None,
    ) -> None:  # fmt: skip
        if exit_status is not None and exit_status < 0:
            signal = signal or signal_name(exit_status)
            exit_status = None
        tail = stderr.strip().splitlines()[-5:]
        shown = command_shown(argv)
        ended = exit_text(exit_status, signal)
        if ended.startswith("exit status"):
            detail = f"`{shown}` exited with status {exit_status}"
        elif ended.startswith("killed"):
            detail = f"`{shown}` was {ended}"
        else:
            detail = f"`{shown}` ended without an exit status (its session was cut)"
        if tail:
            detail += ": " + " | ".join(tail)
        super().__init__(host, detail, hint)
        self.argv = argv
        self.exit_status = exit_status
        self.stderr = stderr
        self.signal = signal


class CommandTimeout(HostError):
    def __init__(self, host: str, argv: list[str], timeout_s: float) -> None:
        shown = command_shown(argv)
        super().__init__(
            host,
            f"`{shown}` did not finish within {timeout_s:g} s",
            "raise the deadline with --timeout, or check the host's load",
        )
        self.argv = argv
        self.timeout_s = timeout_s


class DeployError(HostError):
    pass


class DriftError(OrchError):
    """``orch run --require-uniform`` refused to start: ``differences`` (fleet.Difference) lists every host and
    field that differs from its group's majority (or a health count above zero); the message names them all."""

    def __init__(self, differences: list[Any], lines: list[str]) -> None:
        super().__init__(
            f"refusing to start: {len(differences)} fleet difference(s) in fields that matter\n  "
            + "\n  ".join(lines),
            "fix the hosts, or let a field through with --allow-drift FIELD (repeatable); "
            "orch fleet --hosts SEL shows the whole view",
        )
        self.differences = differences


class StoreError(OrchError):
    pass


class DiskFullError(StoreError):
    """SQLite failed on a database file whose filesystem is full (ENOSPC). ``path``: the database file. Exit 1,
    like the store's other runtime errors; a command that only reads may still open the file read-only."""

    def __init__(self, message: str, hint: str, *, path: str) -> None:
        super().__init__(message, hint)
        self.path = path


class NotFoundError(StoreError):
    """A run / host / build the user named is not in the store: a usage error at the CLI (exit 2), 404 in the API."""

    exit_code = 2


class SchemaTooNewError(StoreError):
    """The database is at an Alembic revision this orch does not know (written by a newer orch): nothing reads
    or writes it. ``revision`` is the database's, ``head`` this orch's newest."""

    exit_code = 2

    def __init__(self, revision: str, head: str | None) -> None:
        super().__init__(
            f"the database was written by a newer orch, revision {revision}; this orch knows up to {head or '-'}",
            "upgrade orch (pipx upgrade orch / pip install -U orch), or point --db / ORCH_DB_URL at another "
            "database",
        )
        self.revision = revision
        self.head = head


class SchemaBehindError(StoreError):
    """The database is not at this orch's schema and ``orch db upgrade`` is what fixes it (empty or older), or it
    holds orch's tables without a recorded revision (``alembic_version`` missing or empty), which no migration
    can start from. A configuration state, not a failed run: exit 2 on every command, like SchemaTooNewError."""

    exit_code = 2
