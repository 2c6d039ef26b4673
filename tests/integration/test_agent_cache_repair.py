"""The local agent cache (``deploy.agent_artifact``) when it is damaged or cannot be written.

A tester flipped one byte of the cached agent.pyz (same size): orch kept uploading it and every deploy failed the
sha256 check on the host, forever. And a cache directory that cannot be written ended in "internal error ... a
bug in orch" instead of a message naming the path and the fix."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import LOCAL_INVENTORY, Orch

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
from orchestrator.deploy import agent_artifact
art = agent_artifact()
print(art.sha256, art.path, flush=True)
"""


def _artifact(cache: Path) -> tuple[str, Path]:
    """``agent_artifact()`` in a fresh process (it is cached per process): (sha256, path)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)}
    res = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    sha, path = res.stdout.split()
    return sha, Path(path)


def test_a_cached_agent_damaged_in_place_is_rebuilt(tmp_path: Path) -> None:
    sha, path = _artifact(tmp_path / "cache")
    whole = path.read_bytes()
    assert hashlib.sha256(whole).hexdigest() == sha
    damaged = bytearray(whole)
    damaged[len(damaged) // 2] ^= 0xFF  # same size, other content
    path.write_bytes(bytes(damaged))
    assert path.stat().st_size == len(whole)

    assert _artifact(tmp_path / "cache") == (sha, path)
    assert path.read_bytes() == whole


def test_a_cache_that_cannot_be_written_is_a_message_naming_it(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(LOCAL_INVENTORY)
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    env = {**orch.env(), "XDG_CACHE_HOME": "/dev/null/x"}
    res = subprocess.run(orch.argv("run", "noop", "--hosts", "local"), cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "bug" not in res.stderr, res.stderr
    assert "cannot write orch's agent cache /dev/null/x/orch/agent/" in res.stderr, res.stderr
    assert "Not a directory" in res.stderr
    assert "XDG_CACHE_HOME" in res.stderr
