"""The transport contract: run a command (argv list), stream its output, put a file, close.

Implementations: ``ssh.SshTransport`` (asyncssh; the only module importing it) and ``local.LocalTransport``
(``connection: local``). Remote paths are relative to the login user's home directory (both SFTP and commands
start there), so no ``~`` needs expanding and no shell string is ever built from input: commands are argv lists,
joined with :func:`shlex.join` where a shell stands in between (SSH always runs the user's login shell).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestrator.errors import exit_text
from orchestrator.textlines import output_lines
from orchestrator.transport.lines import MAX_LINE_BYTES, Line

DEFAULT_COMMAND_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: exit status (the local transport's child killed by signal N: -N; the SSH
    transport raises instead — RemoteCommandError naming the signal, ConnectError when no status came back at
    all), output text, wall time in s. ``errors.exit_text`` words a status for messages."""

    argv: tuple[str, ...]
    exit_status: int | None
    stdout: str
    stderr: str
    duration_s: float

    def json_object(self) -> dict[str, Any]:
        """The JSON object on the last line of stdout, as orch's remote scripts and the agent answer.

        Raises ValueError whose text says why there is none: the object's ``error``, else the last stderr line,
        else the exit status — when the command failed, printed no object, or answered with an ``error``.
        """
        lines = output_lines(self.stdout.strip())
        try:
            doc = json.loads(lines[-1]) if lines else None
        except ValueError:
            doc = None
        if self.exit_status == 0 and isinstance(doc, dict) and doc and "error" not in doc:
            return doc
        why = doc.get("error") if isinstance(doc, dict) else None
        raise ValueError(str(why or (self.stderr.strip().splitlines() or [exit_text(self.exit_status)])[-1]))


class Transport(Protocol):
    """One open connection to one host."""

    host: str

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        input: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        """Run ``argv`` to completion within ``timeout_s`` seconds.

        Raises CommandTimeout past the deadline (the remote process is signalled), RemoteCommandError on a
        non-zero exit when ``check``, ConnectError when the connection is lost.
        """
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        idle_timeout_s: float | None = None,
        max_line: int = MAX_LINE_BYTES,
        input: bytes | None = None,
        silent_s: float | None = None,
    ) -> AsyncIterator[Line]:
        """Yield stdout's lines as they arrive: each whole, as bytes without its newline, or, past ``max_line``
        bytes, as one ``OversizeLine`` (size and head); never a piece of a line (see ``transport.lines``).
        Bytes after the last newline when the stream ends are not yielded. ``input``: written to the command's
        stdin, which is then closed (e.g. the spec of ``agent start --follow``). ``silent_s``: once the command
        has written to stdout or sent a heartbeat (``transport.liveness.HEARTBEAT`` on stderr), it must do one
        or the other at least every ``silent_s`` seconds of waiting; heartbeat lines never appear in error text.

        At the end raises RemoteCommandError when the exit status is non-zero, ConnectError when the connection
        drops, CommandTimeout when nothing arrived for ``idle_timeout_s`` seconds, ConnectError ``silent`` (the
        command killed first) when it was silent for ``silent_s`` seconds (``transport.watch``).
        """
        ...

    async def put(self, local: Path, remote: str) -> None:
        """Copy a local file to ``remote`` (relative to home), creating parent directories."""
        ...

    async def close(self) -> None: ...
