"""The remote side of ``orch run``, recorded and replayed by bare asyncssh: a run floor doing the same remote work.

bench/fanout_scale.py measures ``orch run noop`` against two floors. The first runs the facts probe and the noop
suite's sleeps; this module gives the second, "floor (run, same remote commands)": for each host, the commands
``orch run`` itself sent to a host that already holds the agent, replayed over one asyncssh connection with the
same concurrency bound, reading the follow's lines until ``done``, storing nothing.

The commands are not retyped here: :func:`record_main` runs orch's own CLI in this process with
``SshTransport.run``/``stream``/``put`` wrapped so that every call appends one JSON line to a log:
``{"host", "kind": "run"|"stream"|"put", "argv": [...], "input": str|null}`` (``input``: what orch wrote to the
command's stdin, UTF-8 — the run spec for ``agent start --spec -``). :func:`host_commands` picks one host's calls
from that log and :func:`for_host` rewrites them for another host and a fresh run id (argv tokens equal to the
recorded host name or run id, and the spec's ``run_id``); nothing else changes.

Also here: :func:`nogpu_python`, the hosts' ``python:`` for the bench — a wrapper whose PATH leaves out every
directory holding an ``nvidia-smi``, so that the simulated hosts of one machine with a real GPU see no GPU (the
agent then takes no GPU lease, reads no GPU facts and starts no GPU telemetry, as on a machine without GPUs).
This changes nothing in orch: it is how the bench's hosts are set up.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The PATH sshd gives a root session (OpenSSH's ``_PATH_STDPATH`` plus the sbin directories Debian adds for uid
0): the directories a host's ``python:`` would search for ``nvidia-smi``."""

RECORD_ENV = "ORCH_BENCH_RECORD"
"""The log file :func:`record_main` appends the remote calls to."""


def nogpu_python(path: Path, python: str, search_path: str = SESSION_PATH) -> tuple[str, list[str]]:
    """Write ``path``: a ``/bin/sh`` wrapper that runs ``python`` with PATH = the directories of ``search_path``
    (colon-separated) holding no executable ``nvidia-smi``. Returns (the wrapper's path, the directories left
    out). On a machine with no nvidia-smi the wrapper's PATH is ``search_path`` itself."""
    kept, hidden = [], []
    for d in (x for x in search_path.split(":") if x):
        smi = os.path.join(d, "nvidia-smi")
        (hidden if os.path.isfile(smi) and os.access(smi, os.X_OK) else kept).append(d)
    path.write_text(
        "#!/bin/sh\n# bench host: no GPU (directories holding nvidia-smi left out of PATH: "
        f"{' '.join(hidden) or 'none'})\nPATH={shlex.quote(':'.join(kept))}\nexport PATH\n"
        f'exec {shlex.quote(python)} "$@"\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path), hidden


def record_main(log: Path, orch_args: Sequence[str]) -> None:
    """Run ``orch ORCH_ARGS`` in this process, appending every remote call orch makes to ``log`` (see the module
    docstring). Exits with orch's exit status."""
    from orchestrator.transport.ssh import SshTransport

    def note(host: str, kind: str, argv: Sequence[str], data: str | bytes | None) -> None:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        with log.open("a") as f:  # one whole line per call, flushed at once: orch may leave by os._exit
            f.write(json.dumps({"host": host, "kind": kind, "argv": list(argv), "input": text}) + "\n")

    run, stream, put = SshTransport.run, SshTransport.stream, SshTransport.put

    async def run_logged(self: SshTransport, argv: Sequence[str], **kw: Any) -> Any:
        note(self.host, "run", argv, kw.get("input"))
        return await run(self, argv, **kw)

    def stream_logged(self: SshTransport, argv: Sequence[str], **kw: Any) -> Any:
        note(self.host, "stream", argv, kw.get("input"))
        return stream(self, argv, **kw)

    async def put_logged(self: SshTransport, local: Path, remote: str) -> None:
        note(self.host, "put", [str(local), remote], None)
        await put(self, local, remote)

    SshTransport.run = run_logged  # type: ignore[method-assign]
    SshTransport.stream = stream_logged  # type: ignore[method-assign]
    SshTransport.put = put_logged  # type: ignore[method-assign]
    sys.argv = ["orch", *orch_args]
    from orchestrator.cli.main import main

    main()


def record(argv: list[str], env: dict[str, str], log: Path, timeout_s: float = 600) -> dict[str, Any]:
    """Run ``orch ARGV`` (with ``--json``) in a child process under :func:`record_main`, its remote calls appended
    to ``log``; its JSON document. Raises SystemExit with orch's output when there is none, subprocess's
    TimeoutExpired after ``timeout_s`` seconds."""
    import subprocess

    rec = [sys.executable, str(Path(__file__).resolve()), "--record", str(log), "--"]
    res = subprocess.run(rec + argv, env=env, capture_output=True, text=True, check=False, timeout=timeout_s)
    try:
        return dict(json.loads(res.stdout[res.stdout.index("{") :]))
    except ValueError:
        out = (res.stdout + res.stderr)[-3000:]
        raise SystemExit(f"recording orch {' '.join(argv)} failed (exit {res.returncode}):\n{out}") from None


def read_log(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def host_commands(records: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    """``host``'s recorded calls, in order. Raises ValueError when there are none or when one is an upload (the
    agent was not on the host yet: that run is not the one to replay)."""
    mine = [r for r in records if r["host"] == host]
    if not mine:
        raise ValueError(f"no remote call of {host} in the log (hosts there: {sorted({r['host'] for r in records})})")
    if any(r["kind"] == "put" for r in mine):
        raise ValueError(f"{host}'s recorded run uploaded files (the agent was not there yet): record another run")
    return mine


def for_host(cmds: list[dict[str, Any]], *, old_host: str, new_host: str, old_run: str, new_run: str) -> list[
    dict[str, Any]]:  # fmt: skip
    """``cmds`` as orch would send them to ``new_host`` in run ``new_run``: argv tokens equal to ``old_host`` or
    ``old_run`` replaced, and a JSON object on stdin whose ``run_id`` is ``old_run`` given ``new_run``."""
    swap = {old_host: new_host, old_run: new_run}
    out = []
    for c in cmds:
        data = c["input"]
        if data:
            try:
                doc = json.loads(data)
            except ValueError:
                doc = None
            if isinstance(doc, dict) and doc.get("run_id") == old_run:
                data = json.dumps({**doc, "run_id": new_run})
        out.append({**c, "host": new_host, "argv": [swap.get(a, a) for a in c["argv"]], "input": data})
    return out


def describe(cmds: list[dict[str, Any]], width: int = 150) -> list[str]:
    """One line per call for the bench's output: the argv as a shell would read it, long tokens (the deploy
    helper's ``-c`` source) shown by size, and what went on stdin."""
    lines = []
    for i, c in enumerate(cmds, 1):
        argv = [a if len(a) <= 80 else f"<{len(a)} chars: {a[:24].splitlines()[0]}...>" for a in c["argv"]]
        text = shlex.join(argv)
        stdin = f"; stdin {len(c['input'].encode())} B" if c["input"] else ""
        lines.append(f"  {i}. {c['kind']:6s} {text[:width]}{'...' if len(text) > width else ''}{stdin}")
    return lines


async def replay_floor(spec: dict[str, Any]) -> dict[str, int]:
    """Per host of ``spec["hosts"]`` (``[name, address, port]``), at most ``spec["concurrency"]`` at once: one
    asyncssh connection running ``spec["cmds"]`` (the recorded calls, rewritten by :func:`for_host` for the host
    and ``spec["run_id"]``): a ``run`` call to its end, a ``stream`` call read line by line until the agent's
    ``done`` event. Returns ``{"ok": hosts that reached done, "failed": the others}``."""
    import asyncssh

    sem = asyncio.Semaphore(int(spec["concurrency"]))
    ok = 0
    failures: dict[str, int] = {}

    async def one(name: str, addr: str, port: int) -> None:
        nonlocal ok
        cmds = for_host(spec["cmds"], old_host=spec["recorded_host"], new_host=name, old_run=spec["recorded_run"],
                        new_run=spec["run_id"])  # fmt: skip
        async with sem:
            try:
                async with asyncssh.connect(
                    addr, port, known_hosts=spec["known_hosts"], client_keys=[spec["key"]],
                    username=os.environ.get("USER", "root"), config=[], connect_timeout=float(spec["timeout"]),
                ) as conn:  # fmt: skip
                    done = False
                    for c in cmds:
                        if c["kind"] == "run":
                            await conn.run(shlex.join(c["argv"]), input=c["input"], check=True)
                        elif c["kind"] == "stream":
                            data = c["input"].encode() if c["input"] is not None else None
                            proc = await conn.create_process(shlex.join(c["argv"]), encoding=None, input=data)
                            async for line in proc.stdout:
                                if b'"done"' in line and json.loads(line).get("type") == "done":
                                    done = True
                                    break
                            proc.close()
                    if done:
                        ok += 1
                    else:
                        failures["no done"] = failures.get("no done", 0) + 1
            except (OSError, asyncssh.Error, ValueError) as exc:
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

    await asyncio.gather(*(one(n, a, p) for n, a, p in spec["hosts"]))
    return {"ok": ok, "failed": sum(failures.values()), **{f"failed_{k}": v for k, v in failures.items()}}


if __name__ == "__main__":
    # python bench/remote_replay.py --record LOG -- ORCH ARGS...  (orch under the recorder)
    if len(sys.argv) >= 4 and sys.argv[1] == "--record" and sys.argv[3] == "--":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        record_main(Path(sys.argv[2]), sys.argv[4:])
    else:
        raise SystemExit("usage: remote_replay.py --record LOG -- ORCH_ARGS...")
