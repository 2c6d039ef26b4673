"""An inventory address with an IPv6 zone id (``fe80::1%lo``, link-local): orch asks ``ssh -G`` with the ``%``
written ``%%`` (ssh expands tokens in HostName, ssh_config(5) TOKENS), and connects to the real address.

A tester saw "OpenSSH cannot resolve its configuration: vdollar_percent_expand: unknown key %l"."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.inventory import parse_inventory
from orchestrator.transport.sshconfig import SshResolver, config_args, host_argv
from tests.e2e.conftest import Orch
from tests.plugins.sshd import ClientHome

pytestmark = pytest.mark.sshd

SSH = shutil.which("ssh") or "/usr/bin/ssh"
ZONED = "fe80::1%lo"
INVENTORY = f"groups:\n  g:\n    hosts:\n      n-zone: {{address: '{ZONED}', port: 1}}\n"


def _ssh_g_hostname(args: list[str]) -> str:
    out = subprocess.run([SSH, "-G", *config_args(), *args], check=True, capture_output=True, text=True,
                         timeout=60).stdout  # fmt: skip
    return next(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("hostname "))


async def test_a_zone_id_reaches_ssh_escaped_and_comes_back_whole(client_home: ClientHome) -> None:
    host = parse_inventory(INVENTORY).select("n-zone")[0]
    args, _ = host_argv(host)
    assert args[args.index("-o") + 1] == "HostName=fe80::1%%lo"
    assert _ssh_g_hostname(args) == ZONED  # what OpenSSH itself makes of orch's arguments
    settings = await SshResolver().resolve(host)
    assert (settings.hostname, settings.port) == (ZONED, 1)


def test_doctor_connects_to_the_zoned_address(client_home: ClientHome, tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(INVENTORY)
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = orch("doctor", "--json", timeout=240)
    assert "cannot resolve its configuration" not in res.stdout + res.stderr, res.stdout + res.stderr
    (host,) = json.loads(res.stdout)["hosts"]
    checks = {c["name"]: c for c in host["checks"]}
    assert checks["dns"]["status"] == "ok", host["checks"]
    # nothing listens there (lo has no fe80::1): the tcp step fails, naming the address it really tried
    assert checks["tcp"]["status"] == "fail" and "fe80::1%lo" in checks["tcp"]["detail"], checks["tcp"]
