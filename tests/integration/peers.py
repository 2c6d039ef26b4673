"""Helpers for the real-peer doctor / trust tests: inventories for bed hosts, pathological listeners, wrappers.

Pathological peers are small asyncio servers in the test's own event loop (doctor runs in that loop too):
``silent_listener`` accepts TCP and never speaks, ``garbage_listener`` answers like an HTTP server.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.doctor import DoctorOptions, DoctorReport, HostReport, run_doctor
from orchestrator.inventory import parse_inventory
from tests.plugins.sshd import SSH_KEYGEN, SshdHost
from tests.plugins.timing import scaled

# Per-step deadline for doctor/trust against real sshd peers (processes that a loaded machine may be slow to
# schedule): generous, scaled by ORCH_TEST_TIME_SCALE (tests/plugins/timing.py).
TIMEOUT_S = scaled(20.0)
# A deadline meant to expire: the pathological peers (in this process's event loop) never complete a handshake.
EXPIRING_TIMEOUT_S = 2.0
HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nBad Request\r\n"


def entry(host: SshdHost, **more: Any) -> dict[str, Any]:
    return {"address": host.address, "port": host.port, **more}


def inventory_text(hosts: dict[str, dict[str, Any]], *, python: str | None = None, group: str = "bed") -> str:
    doc = {"defaults": {"python": python or sys.executable}, "groups": {group: {"hosts": hosts}}}
    return yaml.safe_dump(doc, sort_keys=False)


async def doctor(
    hosts: dict[str, dict[str, Any]], *, python: str | None = None, timeout_s: float = TIMEOUT_S
) -> DoctorReport:
    inv = parse_inventory(inventory_text(hosts, python=python))
    return await run_doctor(inv, None, DoctorOptions(timeout_s=timeout_s))


async def doctor_one(
    name: str, spec: dict[str, Any], *, python: str | None = None, timeout_s: float = TIMEOUT_S
) -> HostReport:
    report = await doctor({name: spec}, python=python, timeout_s=timeout_s)
    assert [h.host for h in report.hosts] == [name]
    return report.hosts[0]


def statuses(h: HostReport) -> dict[str, str]:
    return {c.name: c.status for c in h.checks}


def fingerprint(pub: Path) -> str:
    """The SHA256 fingerprint as OpenSSH's ``ssh-keygen -lf`` prints it (independent of orch)."""
    out = subprocess.run([SSH_KEYGEN, "-lf", str(pub)], check=True, capture_output=True, text=True).stdout
    return out.split()[1]


def restart(host: SshdHost) -> None:
    host.stop()
    host.start()


@dataclass
class CertAuthority:
    key: Path

    @property
    def pub_line(self) -> str:
        return " ".join(self.key.with_suffix(".pub").read_text().split()[:2])

    def sign_host(
        self, host: SshdHost, *, principal: str, validity: str = "-5m:+1h", key_type: str = "ed25519"
    ) -> Path:
        """``ssh-keygen -s CA -h -n PRINCIPAL -V VALIDITY`` over the host's key; installs it as HostCertificate."""
        pub = host.host_keys[key_type].with_suffix(".pub")
        subprocess.run(
            [
                SSH_KEYGEN,
                "-q",
                "-s",
                str(self.key),
                "-I",
                f"{host.name}-host",
                "-h",
                "-n",
                principal,
                "-V",
                validity,
                str(pub),
            ],
            check=True,
        )
        cert = Path(str(host.host_keys[key_type]) + "-cert.pub")
        assert cert.is_file()
        host.host_certs = [cert]
        restart(host)
        return cert


def make_ca(root: Path) -> CertAuthority:
    key = root / "host_ca"
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(key), "-C", "host-ca"], check=True)
    return CertAuthority(key)


def python_wrapper(path: Path, *, path_dirs: list[Path], python: str | None = None) -> str:
    """An interpreter for ``python:`` that runs the venv's Python with PATH set to ``path_dirs`` only, so a
    test decides whether ``nvidia-smi`` exists on the "host" (sshd's SetEnv only honours its first line)."""
    path.write_text(
        f'#!/bin/sh\nPATH={":".join(str(d) for d in path_dirs)}\nexport PATH\nexec {python or sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def fake_nvidia_smi(bin_dir: Path, output: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\nexec /bin/cat {output}\n")
    exe.chmod(0o755)


@asynccontextmanager
async def _listener(handler: Any) -> AsyncIterator[tuple[str, int, list[asyncio.StreamWriter]]]:
    writers: list[asyncio.StreamWriter] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await handler(reader, writer)

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield "127.0.0.1", port, writers
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def silent_listener() -> AsyncIterator[tuple[str, int, list[asyncio.StreamWriter]]]:
    """Accepts TCP, never sends a banner, keeps the connection open."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up

    async with _listener(handler) as peer:
        yield peer


@asynccontextmanager
async def garbage_listener(payload: bytes = HTTP_400) -> AsyncIterator[tuple[str, int, list[asyncio.StreamWriter]]]:
    """Sends ``payload`` (an HTTP error page by default) at once, as a web server on the SSH port would."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()
        await reader.read()

    async with _listener(handler) as peer:
        yield peer


def cli_env(home: Path, inventory: Path, cwd: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        ORCH_INVENTORY=str(inventory),
        ORCH_DB_URL=f"sqlite:///{cwd / 'orch.db'}",
        COLUMNS="160",
        XDG_CACHE_HOME=str(cwd / "cache"),
    )
    env.pop("SSH_AUTH_SOCK", None)
    return env


def orch_cli(
    *args: str, home: Path, inventory: Path, cwd: Path, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        env=cli_env(home, inventory, cwd),
        capture_output=True,
        text=True,
        timeout=timeout if timeout is not None else scaled(120),
    )
