"""The local agent cache (``deploy.agent_artifact``) filled by several orch processes at once: none fails, and
the file left is whole.

CI found one of six first runs failing with FileNotFoundError on ``agent.part``: every process wrote the same
temporary name, and one renamed another's file away from under it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 6
WRITERS = 8

# Wait for the start file, then fill the cache: the writers start together without the test relying on sleeps.
_CHILD = """
import os, sys, time
from orchestrator.deploy import agent_artifact
print("ready", flush=True)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.001)
art = agent_artifact()
print(art.sha256, art.path, flush=True)
"""


def test_writers_filling_one_agent_cache_at_once_all_succeed(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        cache = tmp_path / f"cache{n}"
        go = tmp_path / f"go{n}"
        env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_CACHE_HOME": str(cache)}
        procs = [
            subprocess.Popen([sys.executable, "-c", _CHILD, str(go)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
            for _ in range(WRITERS)
        ]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            go.touch()
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        failed = [err[-1500:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode]
        assert not failed, f"round {n + 1}: {len(failed)} of {WRITERS} writers failed: {failed[0]}"
        (sha, path), = {tuple(out.split()) for out, _ in outs}
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == sha
        assert sorted(p.name for p in Path(path).parent.iterdir()) == ["agent.pyz"], "a temporary file was left"
