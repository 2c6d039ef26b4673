"""``orch deploy`` across hosts: pack the build once, deploy to every host concurrently, record the build."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import deploy
from orchestrator.fanout import fanout
from orchestrator.inventory import Host, Inventory
from orchestrator.store.repo import Store
from orchestrator.transport import open_transport
from orchestrator.transport.sshconfig import SshResolver


@dataclass
class DeployReport:
    rows: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return all(r["ok"] for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": self.rows}


async def deploy_hosts(
    inventory: Inventory,
    selector: str | None,
    build: Path | None,
    *,
    keep: int = deploy.DEFAULT_KEEP_BUILDS,
    timeout_s: float = 10.0,
    store: Store | None = None,
    concurrency: int = 64,
) -> DeployReport:
    """Deploy to every selected host, at most ``concurrency`` at once; one row per host (a failed host is a row)."""
    hosts = inventory.select(selector)
    resolver = SshResolver()  # ssh -G answers and known_hosts files read once for all hosts, not once per host
    deploy.agent_artifact()  # a cache that cannot be written is one ConfigError, not every host's failure
    plan = deploy.plan(build)
    try:

        async def one(host: Host) -> deploy.HostDeploy:
            t = await open_transport(host, timeout_s=timeout_s, resolver=resolver)
            try:
                return await deploy.deploy_host(t, host, build=plan.build, keep=keep)
            finally:
                await t.close()

        outcomes = await fanout(hosts, one, concurrency=concurrency)
        if store is not None and plan.build is not None:
            store.record_build(plan.build.sha256, name=plan.build.name, size_bytes=plan.build.size_bytes)
    finally:
        plan.cleanup()
    rows = []
    for o in outcomes:
        if o.value is not None:
            rows.append({"ok": True, "error": None, **o.value.to_dict()})
        else:
            rows.append(
                {
                    "host": o.host.name,
                    "ok": False,
                    "error": o.error.message if o.error else "?",
                    "hint": o.error.hint if o.error else None,
                }
            )
    return DeployReport(rows)
