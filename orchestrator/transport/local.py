"""``connection: local``: the same contract as SSH, run as subprocesses of orch on this machine.

Commands run with the user's home directory as the working directory, as they would over SSH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from orchestrator.errors import CommandTimeout, HostError, RemoteCommandError
from orchestrator.transport import children
from orchestrator.transport.base import DEFAULT_COMMAND_TIMEOUT_S, CommandResult
from orchestrator.transport.lines import MAX_LINE_BYTES, STREAM_CHUNK_BYTES, Line, LineSplitter
from orchestrator.transport.watch import IdleTimeout, Silent, StreamWatch, silent_error


class LocalTransport:
    def __init__(self, host: str, home: Path | None = None) -> None:
        self.host = host
        self.home = home or Path.home()

    async def _spawn(self, argv: Sequence[str], stdin: int | None) -> asyncio.subprocess.Process:
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.home,
                stdin=stdin,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError:
            raise RemoteCommandError(self.host, list(argv), 127, f"{argv[0]}: command not found") from None
        except PermissionError:
            raise RemoteCommandError(self.host, list(argv), 126, f"{argv[0]}: permission denied") from None

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        input: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        t0 = time.monotonic()
        proc = await self._spawn(argv, asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL)
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(input.encode() if input is not None else None), timeout_s
            )
        except (asyncio.TimeoutError, TimeoutError):
            children.kill(proc)
            await proc.wait()
            raise CommandTimeout(self.host, list(argv), timeout_s) from None
        res = CommandResult(
            tuple(argv),
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - t0,
        )
        if check and res.exit_status != 0:
            raise RemoteCommandError(self.host, list(argv), res.exit_status, res.stderr)
        return res

    async def stream(
        self,
        argv: Sequence[str],
        *,
        idle_timeout_s: float | None = None,
        max_line: int = MAX_LINE_BYTES,
        input: bytes | None = None,
        silent_s: float | None = None,
    ) -> AsyncIterator[Line]:
        proc = await self._spawn(argv, asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        if input is not None:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it exited first: its status says why
                proc.stdin.write(input)
                await proc.stdin.drain()
            proc.stdin.close()
        stdout, stderr = proc.stdout, proc.stderr
        watch = StreamWatch(lambda: stderr.read(STREAM_CHUNK_BYTES), silent_s=silent_s, idle_timeout_s=idle_timeout_s)
        lines = LineSplitter(max_line)  # chunks, not readline: StreamReader refuses a line past its 64 KiB limit
        try:
            while True:
                try:
                    chunk = await watch.next_chunk(lambda: stdout.read(STREAM_CHUNK_BYTES))
                except IdleTimeout:
                    raise CommandTimeout(self.host, list(argv), idle_timeout_s or 0) from None
                except Silent as why:
                    raise silent_error(self.host, argv, why.silent_s, why.pid) from None  # killed below
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    yield line
            status = await proc.wait()
            err = await watch.stderr_text()
            if status != 0:
                raise RemoteCommandError(self.host, list(argv), status, err)
        finally:
            if proc.returncode is None:
                children.kill(proc)  # not proc.kill(): it may reap a child that just exited (children.py)
                await proc.wait()
            await watch.close()

    async def put(self, local: Path, remote: str) -> None:
        dest = self.home / remote
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f"{dest.name}.{uuid.uuid4().hex[:12]}.part")  # unique, as over SSH
            try:
                shutil.copyfile(local, tmp)
                os.replace(tmp, dest)
            finally:
                tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise HostError(self.host, f"cannot copy {local} to {dest}: {exc.strerror}") from None

    async def close(self) -> None:
        return None
