"""``orch doctor``'s table in 100 columns (the real ``orch``, piped, ``COLUMNS=100``), issue 21: with host names
like ``b300-node-017`` and an address with its port, the check headers folded (``hos/tke/y``). The checks'
headers are abbreviated when the full ones do not fit, with a legend under the table; in a wide terminal they
stay whole."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def _doctor(tmp_path: Path, columns: int, name: str = "b300-node-017") -> tuple[str, int]:
    with socket.socket() as s:  # a port nothing listens on: the host fails at tcp, quickly
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  lab:\n    hosts:\n      {name}: {{address: 127.0.0.1, port: {port}}}\n"
                   "      localhost: {connection: local}\n")  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path), "COLUMNS": str(columns), "ORCH_INVENTORY": str(inv),
           "ORCH_DB_URL": f"sqlite:///{tmp_path / 'orch.db'}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "orchestrator", "doctor", "--timeout", "20"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    return res.stdout, port


@pytest.mark.parametrize("columns", [100, 160])
def test_check_headers_never_fold(tmp_path: Path, columns: int) -> None:
    out, port = _doctor(tmp_path, columns)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines if ln[:1] in "┏┃┡│└") <= columns, out
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))  # the doctor table (a fleet table follows)
    headers = lines[top + 1 : next(i for i in range(top, len(lines)) if lines[i].startswith("┡"))]
    assert len(headers) == 1, out  # one line: no header folded
    cells = [c.strip() for c in headers[0].split("┃")[1:-1]]
    row = next(ln for ln in lines if ln.startswith("│") and "b300-node-017" in ln)
    assert f"127.0.0.1:{port}" in row, out
    legend = "bnr = banner, key = hostkey, py = python, agt = agent"
    if columns == 100:
        assert cells == ["host", "address", "dns", "tcp", "bnr", "key", "auth", "py", "gpus", "disk", "agt"], out
        assert legend in out
    else:
        assert cells == ["host", "address", "dns", "tcp", "banner", "hostkey", "auth", "python", "gpus", "disk",
                         "agent"], out  # fmt: skip
        assert legend not in out


LONG = "b300-rack12-node-0042.dc-frankfurt-2.cluster.example.internal"  # 61 characters


@pytest.mark.parametrize("columns", [80, 120])
def test_a_long_host_name_keeps_the_table_in_the_terminal(tmp_path: Path, columns: int) -> None:
    """With a 61-character host name a column per check cannot fit: rich squeezed the checks' cells to nothing
    (``┃ ┃ ┃``) in 100 columns. In 120 one ``checks`` column says what did not pass instead; in 80 (and 100, with a
    five-digit port) the address goes under the name too. The name and the address stay whole."""
    out, port = _doctor(tmp_path, columns, name=LONG)
    lines = out.splitlines()
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert max(len(ln) for ln in table) <= columns, out
    top = next(i for i, ln in enumerate(lines) if ln.startswith("┏"))
    headers = [c.strip() for c in lines[top + 1].split("┃")[1:-1]]
    first = next(i for i, ln in enumerate(lines) if LONG in ln)
    last = next(i for i in range(first, len(lines)) if f"127.0.0.1:{port}" in lines[i])  # the row's last line
    row = [ln.split("│")[1:-1] for ln in lines[first:last + 1]]
    assert [c.strip() for c in row[0][:-1]] == ([LONG, f"127.0.0.1:{port}"] if columns == 120 else [LONG]), out
    if columns == 80:
        assert len(row) == 2 and row[1][0].strip() == f"127.0.0.1:{port}", out  # the address under the name
    assert headers == (["host", "address", "checks"] if columns == 120 else ["host / address", "checks"]), out
    for ln in lines[last + 1 :]:  # the checks cell's own further lines (the name and address column empty)
        if not ln.startswith("│") or ln.split("│")[1].strip():
            break
        row.append(ln.split("│")[1:-1])
    cell = " ".join(r[-1].strip() for r in row)
    assert cell.startswith("FAIL tcp; skipped banner hostkey auth python gpus disk agent; ok dns"), out
