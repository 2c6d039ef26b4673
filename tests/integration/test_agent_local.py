"""The built agent.pyz end to end on this machine, laid out as deploy leaves it: start a run, follow its spool
from the start and from the middle, and read every line through the orchestrator's protocol parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.agent_build import build_agent_pyz
from orchestrator.protocol import Event, parse_line


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    home = tmp_path_factory.mktemp("host") / ".orch"
    _, sha = build_agent_pyz(home / "agent" / "tmp")
    pyz_dir = home / "agent" / sha
    (home / "agent" / "tmp").rename(pyz_dir)
    return home, pyz_dir / "agent.pyz", sha


def agent(
    deployed: tuple[Path, Path, str], *args: str, timeout: float = 300, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    home, pyz, _ = deployed
    return subprocess.run(
        [sys.executable, str(pyz), *args, "--orch-home", str(home), "--host", "it"],
        capture_output=True,
        timeout=timeout,
        check=False,
        cwd="/",
        input=input,
        env={**os.environ, "HOME": str(home.parent)},  # deploy's ~/.orch is this home
    )


def run_to_end(deployed: tuple[Path, Path, str], spec: dict[str, Any]) -> list[Event]:
    out = agent(deployed, "start", "--spec", "-", input=json.dumps(spec).encode())
    assert out.returncode == 0, out
    fol = agent(deployed, "follow", spec["run_id"], "--from", "0")
    assert fol.returncode == 0, fol.stderr
    lines = fol.stdout.splitlines()
    events = [parse_line(raw, expected_seq=i) for i, raw in enumerate(lines)]
    assert [e.seq for e in events] == list(range(len(lines)))
    assert not [e for e in events if e.data.get("kind") == "protocol"]
    # resuming from the middle gives exactly the tail, byte for byte
    mid = len(lines) // 2
    again = agent(deployed, "follow", spec["run_id"], "--from", str(mid))
    assert again.returncode == 0 and again.stdout.splitlines() == lines[mid:]
    return events


def test_sleep_run_from_the_deployed_pyz(deployed: tuple[Path, Path, str]) -> None:
    home, _, sha = deployed
    events = run_to_end(
        deployed, {"run_id": "it-sleep", "suite": "noop", "bench": "sleep", "cases": [{"ms": 5}]}
    )
    assert [e.type for e in events] == ["hello", "case_start", "result", "done"]
    hello = events[0].data
    assert hello["agent_version"] == sha and hello["suite"] == "noop" and hello["cases_total"] == 1
    assert hello["facts"]["orch"]["agents"] == [sha]
    assert events[2].metrics()["time_ms"].value >= 5
    assert events[-1].data["status"] == "completed"
    assert json.loads((home / "runs" / "it-sleep" / "it" / "spec.json").read_text())["repeat"] == 20


@pytest.mark.torch
def test_moe_gemm_tiny_sweep_from_the_deployed_pyz(deployed: tuple[Path, Path, str]) -> None:
    pytest.importorskip("torch")
    cases = [
        {"M": m, "E": 8, "H": 64, "I": 32, "k": 2, "shared": 1, "dtype": "bf16", "seed": 3}
        for m in (1, 4, 16)
    ]
    cases.append(
        {"M": 4, "E": 8, "H": 64, "I": 32, "k": 99, "shared": 1}
    )  # bad case: an error, the run goes on
    spec = {
        "run_id": "it-moe",
        "suite": "moe-sweep",
        "bench": "moe_gemm",
        "cases": cases,
        "repeat": 5,
        "warmup": 1,
    }
    events = run_to_end(deployed, spec)
    types = [e.type for e in events]
    assert types == ["hello"] + ["case_start", "result"] * 3 + ["case_start", "error", "done"]
    results = [e for e in events if e.type == "result"]
    assert [r.case_index for r in results] == [0, 1, 2]
    assert results[0].data["info"]["check"]["ok"] is True
    assert results[0].metrics()["distinct_experts"].value == 3  # M=1: top-2 + 1 shared
    for r in results:
        t = r.metrics()["time_ms"]
        assert t.n == 5 and t.samples is not None and t.p10 is not None and t.p10 <= t.value <= (t.p90 or 0)
        assert r.data["info"]["device"] == "cpu" and r.data["info"]["routing_in_timed_region"] is False
    err = events[-2]
    assert err.case_index == 3 and "k=99 exceeds E=8" in err.data["message"]
    assert events[-1].data == {"status": "completed", "counts": {"lines": 9, "results": 3, "errors": 1}}
