"""An IPv6 host prints as ``[::1]:PORT`` (``::1:PORT`` reads as another address), over a real sshd listening on
the IPv6 loopback: the doctor table's address column and the tcp step's detail."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


pytestmark = [
    pytest.mark.sshd,
    pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to listen on"),
]


def test_doctor_prints_ipv6_in_brackets(sshd_bed: SshdBed, tmp_path: Path) -> None:
    v6 = sshd_bed.add("gpu-v6", address="::1")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"g": [v6]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = orch("doctor", "--json", timeout=240)
    doc = json.loads(res.stdout)
    (host,) = doc["hosts"]
    assert (host["address"], host["port"]) == ("::1", v6.port)
    tcp = next(c for c in host["checks"] if c["name"] == "tcp")
    assert tcp["status"] == "ok" and tcp["detail"] == f"connected to [::1]:{v6.port}", tcp
    hostkey = next(c for c in host["checks"] if c["name"] == "hostkey")
    assert hostkey["status"] == "ok", host["checks"]
    table = orch("doctor", timeout=240, columns=160)
    assert f"[::1]:{v6.port}" in table.stdout and f" ::1:{v6.port}" not in table.stdout, table.stdout
