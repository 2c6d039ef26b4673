"""Fan-out benchmark: ``orch doctor`` over N real sshd hosts against baselines measured in the same run.

Prints wall times and ratios (not asserted; these machines are noisy):
  - bare asyncssh: connect + ``true`` on all N hosts concurrently — the floor for this SSH stack;
  - sequential OpenSSH: ``ssh HOST true`` one host after another;
  - orch doctor over the N hosts (every check: DNS, TCP, banner, host key, auth, the facts probe);
  - orch doctor over N hosts of which S are silent (accept TCP, never send a banner), with its banner timeout.
Targets (issue 2): doctor <= 1.5x the bare floor and <= 0.5x the sequential loop; with silent hosts, doctor
finishes within the banner timeout + 2 s.

The hosts' ``python:`` is a bare venv (no torch) so that the facts probe measures orch, not 64 torch imports
sharing this machine's 2 cores (on a real fleet each host imports torch on its own CPUs, in parallel).

Usage: .venv/bin/python bench/fanout.py [--hosts 64] [--silent 16] [--timeout 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh  # noqa: E402 - bench measures the bare library as the floor

from orchestrator.doctor import DoctorOptions, run_doctor  # noqa: E402
from orchestrator.inventory import parse_inventory  # noqa: E402
from tests.plugins.sshd import ClientHome, SshdBed, make_client_home  # noqa: E402


async def _silent_listener(address: str) -> tuple[asyncio.base_events.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            writer.close()

    server = await asyncio.start_server(handle, address, 0)
    return server, server.sockets[0].getsockname()[1]


async def bare_asyncssh(hosts: list[tuple[str, int]], client: ClientHome, command: str = "true") -> float:
    t0 = time.perf_counter()

    async def one(addr: str, port: int) -> None:
        async with asyncssh.connect(
            addr,
            port,
            known_hosts=str(client.known_hosts),
            client_keys=[str(client.key)],
            username=os.environ.get("USER", "root"),
            config=[],
        ) as conn:
            await conn.run(command, check=True)

    await asyncio.gather(*(one(a, p) for a, p in hosts))
    return time.perf_counter() - t0


def sequential_openssh(hosts: list[tuple[str, int]], client: ClientHome) -> float:
    t0 = time.perf_counter()
    for addr, port in hosts:
        subprocess.run(
            [
                "ssh",
                "-F",
                str(client.ssh_config),
                "-o",
                f"UserKnownHostsFile={client.known_hosts}",
                "-o",
                "BatchMode=yes",
                "-i",
                str(client.key),
                "-p",
                str(port),
                addr,
                "true",
            ],
            check=True,
        )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--silent", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=3.0, help="doctor's per-step timeout, s")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="orch-bench-"))
    client = make_client_home(root / "client")
    os.environ["HOME"] = str(client.home)
    os.environ.pop("SSH_AUTH_SOCK", None)
    bare_venv = root / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare_venv)], check=True)
    bed = SshdBed(root / "bed", client)
    try:
        t0 = time.perf_counter()
        hosts = [bed.add(f"h{i:03d}") for i in range(args.hosts)]
        print(f"started {len(hosts)} sshd hosts in {time.perf_counter() - t0:.1f} s")
        pairs = [(h.address, h.port) for h in hosts]
        inv = parse_inventory(
            "defaults: {python: %s}\ngroups:\n  fleet:\n    hosts:\n" % (bare_venv / "bin" / "python")
            + "".join(f"      {h.name}: {{address: {h.address}, port: {h.port}}}\n" for h in hosts)
        )
        floor = asyncio.run(bare_asyncssh(pairs, client))
        import shlex

        from orchestrator.doctor import probe_argv

        probe = shlex.join(probe_argv(inv.hosts[0]))
        probe_floor = asyncio.run(bare_asyncssh(pairs, client, probe))
        seq = sequential_openssh(pairs, client)
        t0 = time.perf_counter()
        report = asyncio.run(run_doctor(inv, "fleet", DoctorOptions(timeout_s=args.timeout)))
        doctor = time.perf_counter() - t0
        reached = sum(1 for h in report.hosts if h.check("auth").status == "ok")
        print(f"bare asyncssh connect+true x{len(pairs)}: {floor:.2f} s")
        print(f"sequential OpenSSH ssh HOST true x{len(pairs)}: {seq:.2f} s")
        print(f"orch doctor x{len(pairs)} ({reached} authenticated, full checks): {doctor:.2f} s")
        print(f"  doctor / bare floor = {doctor / floor:.2f}  (target <= 1.5)")
        print(f"  doctor / sequential OpenSSH = {doctor / seq:.2f}  (target <= 0.5)")
        print(
            f"bare asyncssh connect + doctor's facts probe x{len(pairs)}: {probe_floor:.2f} s "
            "(the same remote work as doctor; here all hosts share this machine's CPUs)"
        )
        print(
            f"  doctor / bare connect+probe = {doctor / probe_floor:.2f}  (target <= 1.3; orch's own cost over the "
            "same work, ssh -G resolution of every host included)"
        )

        async def with_silent() -> tuple[float, int]:
            servers = []
            lines = []
            for i in range(args.silent):
                addr = f"127.0.1.{i + 1}"
                server, port = await _silent_listener(addr)
                servers.append(server)
                lines.append(f"      silent{i:02d}: {{address: {addr}, port: {port}}}\n")
            inv2 = parse_inventory(
                "defaults: {python: %s}\ngroups:\n  fleet:\n    hosts:\n" % (bare_venv / "bin" / "python")
                + "".join(
                    f"      {h.name}: {{address: {h.address}, port: {h.port}}}\n"
                    for h in hosts[: args.hosts - args.silent]
                )
                + "".join(lines)
            )
            t = time.perf_counter()
            rep = await run_doctor(inv2, None, DoctorOptions(timeout_s=args.timeout))
            took = time.perf_counter() - t
            for s in servers:
                s.close()
            silent_fail = sum(1 for h in rep.hosts if h.check("banner").data.get("kind") == "banner-timeout")
            return took, silent_fail

        took, silent_fail = asyncio.run(with_silent())
        print(
            f"orch doctor x{args.hosts} with {args.silent} silent hosts: {took:.2f} s "
            f"({silent_fail} banner-timeout verdicts); banner timeout {args.timeout:g} s -> "
            f"target <= {args.timeout + 2:g} s: {'met' if took <= args.timeout + 2 else 'NOT met'}"
        )
    finally:
        bed.close()


if __name__ == "__main__":
    main()
