"""``orch doctor`` in 100 columns (the real ``orch``, piped, ``COLUMNS=100``) cut the address to ``127.0.0.1:2…``,
hiding the port: host names and addresses are never cut; the check cells give way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_the_address_keeps_its_port_in_100_columns(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: the host fails at tcp, quickly
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = "box-0"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  lab:\n    hosts:\n      {name}: {{address: 127.0.0.1, port: {port}}}\n"
                   "      localhost: {connection: local}\n")  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": "100", "ORCH_INVENTORY": str(inv),
           "ORCH_DB_URL": f"sqlite:///{tmp_path / 'orch.db'}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "orchestrator", "doctor", "--timeout", "20"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert max(len(ln) for ln in lines if ln[:1] in "┏┃┡│└") <= 100, res.stdout  # the tables
    row = next(ln for ln in lines if ln.startswith("│") and name in ln)
    assert f"127.0.0.1:{port}" in row and "…" not in row, res.stdout
