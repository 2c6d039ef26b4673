"""The inner loop: ``orch run`` of a one-case ``echo`` suite, the whole CLI process, over real sshd and on a
``connection: local`` host — against the floors measured in the same run, interleaved (this machine is noisy):
OpenSSH's ``ssh host true``, an asyncssh connect + ``true``, and ``orch --help`` (interpreter start-up and CLI
imports).

Targets (issue 21): ``orch run`` of the echo suite <= 0.8 s wall over SSH and <= 0.6 s on a local host, CLI
start-up included. The last section is ``python -X importtime`` of the local run: the modules that cost most,
cumulative, so a regression in import cost shows where it came from.

What one run does after the first (which deploys the agent): one SSH connection; one session for the deploy
check and the host facts (the torch probe is answered from the host's cache); one session that starts the
detached worker and follows its spool until ``done`` (``agent start --spec - --follow``); the store writes. The
store (SQLAlchemy's import, the schema check without Alembic) opens on a thread while the host is reached; a
local host's run imports no asyncssh. Each figure is printed with the client's CPU (user+sys of the orch process
and the children it waited for: on a local host that includes the agent's start, not the detached worker), which
a loaded machine disturbs much less than the wall time.

Measured 2026-11-30 (docs/inner-loop.md has the profile and what remains), medians of 7, wall s (client CPU s):
on the lent H200 machine (16 cores, Python 3.12, load 0.7-0.9), before these changes (d4825ae) -> after (72ca3a6):
``orch --help`` 0.712 (0.708) -> 0.344 (0.343); over SSH 2.273 (1.684) -> 1.824 (1.225), 7.98x -> 6.89x ``ssh host
true`` (0.27-0.29 s); local host 2.151 (2.011) -> 1.375 (1.280). On the 2-core development machine at load 16-17
the CPU went 0.535 -> 0.325 (help), 1.430 -> 1.061 (SSH), 1.612 -> 1.020 (local). Targets not met.

Usage: .venv/bin/python bench/overhead.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh  # noqa: E402 - a floor is the bare library

from tests.plugins.sshd import ClientHome, SshdBed, make_client_home  # noqa: E402

ECHO_SUITE = """\
name: echo
description: one case, one echo (the inner loop's smallest suite)
command: ["echo", '{{"v": 1}}']
params: {}
parser: json
metrics:
  v: {unit: ms}
"""
TARGET_SSH_S = 0.8
TARGET_LOCAL_S = 0.6


CPU: dict[str, list[float]] = {}


def timed(argv: list[str], env: dict[str, str], key: str | None = None) -> float:
    """Wall time of ``argv`` in s; its CPU (user+sys of it and the children it waited for) goes to ``CPU[key]``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    if key is not None:
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        CPU.setdefault(key, []).append(cpu)
    return took


async def asyncssh_true(addr: str, port: int, client: ClientHome) -> float:
    t0 = time.perf_counter()
    async with asyncssh.connect(
        addr, port, known_hosts=str(client.known_hosts), client_keys=[str(client.key)],
        username=os.environ.get("USER", "root"), config=[],
    ) as conn:  # fmt: skip
        await conn.run("true", check=True)
    return time.perf_counter() - t0


def importtime_top(argv: list[str], env: dict[str, str], n: int = 12) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    rows = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            _, self_us, cum_us, name = (p.strip() for p in line.replace("import time:", "|").split("|"))
            depth = (len(line.split("|")[-1]) - len(line.split("|")[-1].lstrip())) // 2
            if depth <= 1:
                rows.append((int(cum_us), name))
    total = sum(c for c, _ in rows)
    out = [f"  all imports: {total / 1000:.0f} ms"]
    out += [f"  {c / 1000:7.1f} ms  {name}" for c, name in sorted(rows, reverse=True)[:n]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="orch-overhead-"))
    client = make_client_home(root / "client")
    os.environ["HOME"] = str(client.home)
    os.environ.pop("SSH_AUTH_SOCK", None)
    bed = SshdBed(root / "bed", client)
    try:
        h = bed.add("node")
        suites = root / "suites"
        suites.mkdir()
        (suites / "echo.yaml").write_text(ECHO_SUITE)
        (root / "inventory.yaml").write_text(
            f"defaults: {{python: {sys.executable}}}\ngroups:\n  g:\n    hosts:\n"
            f"      node: {{address: {h.address}, port: {h.port}}}\n"
            f"  l:\n    hosts:\n      localhost: {{connection: local}}\n"
        )
        env = dict(
            os.environ, ORCH_INVENTORY=str(root / "inventory.yaml"), ORCH_DB_URL=f"sqlite:///{root / 'orch.db'}",
            ORCH_SUITE_DIR=str(suites), PYTHONPATH=str(Path(__file__).resolve().parents[1]),
        )  # fmt: skip
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from their .pyc
        orch = [sys.executable, "-m", "orchestrator"]
        run_ssh = [*orch, "run", "echo", "--hosts", "node"]
        run_local = [*orch, "run", "echo", "--hosts", "localhost"]
        ssh_true = ["ssh", "-F", str(client.ssh_config), "-p", str(h.port), h.address, "true"]
        for argv in (run_ssh, run_local):
            timed(argv, env)  # deploys the agent, caches the torch probe and the schema head
        figures: dict[str, list[float]] = {k: [] for k in ("ssh", "asyncssh", "help", "orch-ssh", "orch-local")}
        for _ in range(args.repeat):  # interleaved: load changes hit every figure alike
            figures["ssh"].append(timed(ssh_true, env, "ssh"))
            figures["asyncssh"].append(asyncio.run(asyncssh_true(h.address, h.port, client)))
            figures["help"].append(timed([*orch, "--help"], env, "help"))
            figures["orch-ssh"].append(timed(run_ssh, env, "orch-ssh"))
            figures["orch-local"].append(timed(run_local, env, "orch-local"))
        med = {k: statistics.median(v) for k, v in figures.items()}
        cpu = {k: f"cpu {statistics.median(v):.3f}" for k, v in CPU.items()}
        load = os.getloadavg()[0]
        print(f"medians of {args.repeat} interleaved runs, wall s (load average at the end: {load:.1f} on "
              f"{os.cpu_count()} cores); client CPU s")  # fmt: skip
        print(f"  ssh host true (OpenSSH)          {med['ssh']:.3f}  {cpu['ssh']}")
        print(f"  asyncssh connect + true          {med['asyncssh']:.3f}")
        print(f"  orch --help                      {med['help']:.3f}  {cpu['help']}")
        print(f"  orch run echo, over SSH          {med['orch-ssh']:.3f}  {cpu['orch-ssh']}  = "
              f"{med['orch-ssh'] / med['ssh']:.2f}x ssh true  target <= {TARGET_SSH_S} s: "
              f"{'met' if med['orch-ssh'] <= TARGET_SSH_S else 'NOT met'}")  # fmt: skip
        print(f"  orch run echo, local host        {med['orch-local']:.3f}  {cpu['orch-local']}  = "
              f"{med['orch-local'] / med['help']:.2f}x orch --help  target <= {TARGET_LOCAL_S} s: "
              f"{'met' if med['orch-local'] <= TARGET_LOCAL_S else 'NOT met'}")  # fmt: skip
        print("python -X importtime, orch run echo on the local host (cumulative, top-level modules):")
        print("\n".join(importtime_top(["-m", "orchestrator", "run", "echo", "--hosts", "localhost"], env)))
    finally:
        bed.close()


if __name__ == "__main__":
    main()
