"""orch's own overhead per run: ``orch run noop`` (one trivial case, one host) against a bare asyncssh connect +
agent ``facts`` call, both measured here in the same run over a real sshd (the agent already deployed).

orch's run does on top of the floor: the deploy check (one round trip), run creation, ``agent start``, following
the spool, ingest into SQLite, and teardown. Target (issue 4): orch's overhead <= 0.5 s over the floor.
Printed for the in-process runner (what orch adds) and for the CLI subprocess (adds interpreter start-up and
imports). Medians of --repeat runs.

Usage: .venv/bin/python bench/overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh  # noqa: E402 - the floor is the bare library

from orchestrator.deploy import agent_artifact  # noqa: E402
from orchestrator.inventory import parse_inventory  # noqa: E402
from orchestrator.runner import Runner, RunRequest  # noqa: E402
from orchestrator.store.repo import Store  # noqa: E402
from tests.plugins.sshd import ClientHome, SshdBed, make_client_home  # noqa: E402


async def floor_once(addr: str, port: int, client: ClientHome, home: Path) -> float:
    agent = agent_artifact()
    t0 = time.perf_counter()
    async with asyncssh.connect(
        addr,
        port,
        known_hosts=str(client.known_hosts),
        client_keys=[str(client.key)],
        username=os.environ.get("USER", "root"),
        config=[],
    ) as conn:
        pyz = f"{home}/.orch/agent/{agent.sha256}/agent.pyz"
        await conn.run(f"{sys.executable} {pyz} facts", check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="orch-overhead-"))
    client = make_client_home(root / "client")
    os.environ["HOME"] = str(client.home)
    os.environ.pop("SSH_AUTH_SOCK", None)
    bed = SshdBed(root / "bed", client)
    try:
        h = bed.add("node")
        inv_text = (
            f"defaults: {{python: {sys.executable}}}\ngroups:\n  g:\n    hosts:\n"
            f"      node: {{address: {h.address}, port: {h.port}}}\n"
        )
        (root / "inventory.yaml").write_text(inv_text)
        inv = parse_inventory(inv_text)
        db = f"sqlite:///{root / 'orch.db'}"
        store = Store.from_url(db)
        store.upgrade()
        asyncio.run(Runner(inv, store, RunRequest("noop", "g")).run())  # deploys the agent; warms caches
        floors, runs, clis = [], [], []
        for _ in range(args.repeat):
            floors.append(asyncio.run(floor_once(h.address, h.port, client, h.home)))
            t0 = time.perf_counter()
            out = asyncio.run(Runner(inv, store, RunRequest("noop", "g")).run())
            runs.append(time.perf_counter() - t0)
            assert out.status == "completed", out
            env = dict(os.environ, ORCH_INVENTORY=str(root / "inventory.yaml"), ORCH_DB_URL=db)
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "orchestrator", "run", "noop", "--hosts", "g", "--json"],
                env=env,
                check=True,
                capture_output=True,
            )
            clis.append(time.perf_counter() - t0)
        f, r, c = (statistics.median(x) for x in (floors, runs, clis))
        print(f"bare asyncssh connect + agent facts: median {f * 1000:.0f} ms over {args.repeat}")
        print(
            f"orch run noop (in-process runner):  median {r * 1000:.0f} ms -> overhead {(r - f) * 1000:.0f} ms "
            f"(target <= 500 ms): {'met' if r - f <= 0.5 else 'NOT met'}"
        )
        print(
            f"orch run noop (CLI subprocess):     median {c * 1000:.0f} ms -> overhead {(c - f) * 1000:.0f} ms "
            "(includes interpreter start-up and imports)"
        )
    finally:
        bed.close()


if __name__ == "__main__":
    main()
