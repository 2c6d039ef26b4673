"""The agent's ``slurm-task`` (agents/orch_agent/slurm_task.py): the node's name, its run directory, a refused
second start — pure file system work in a temporary orch home (the launch under srun is tested against the real
Slurm in tests/e2e/test_slurm.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agents.orch_agent import slurm_task

SPEC = {"run_id": "r-1", "suite": "noop", "bench": "sleep", "cases": [{"ms": 1}]}


def test_node_name_is_slurms_name_for_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-017")
    assert slurm_task.node_name() == "gpu-017"
    monkeypatch.setenv("SLURMD_NODENAME", "odd/name")
    assert slurm_task.node_name() == "odd_name"  # never a path
    monkeypatch.delenv("SLURMD_NODENAME")
    assert slurm_task.node_name()  # the hostname


def test_prepare_writes_the_nodes_run_directory_private(tmp_path: Path) -> None:
    rd = slurm_task.prepare(dict(SPEC), str(tmp_path), "gpu-017")
    assert rd.path == str(tmp_path / "runs" / "r-1" / "gpu-017")
    assert json.loads(Path(rd.spec_path).read_text()) == {**SPEC, "written_for_host": "gpu-017"}  # its own host
    assert os.stat(rd.path).st_mode & 0o077 == 0 and os.stat(rd.spec_path).st_mode & 0o077 == 0
    assert os.path.getsize(rd.reason_path) == 4096  # reserved for the worker's last words


def test_a_second_start_over_a_spool_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rd = slurm_task.prepare(dict(SPEC), str(tmp_path), "gpu-017")
    Path(rd.spool).write_text('{"v":1,"seq":0,"type":"hello"}\n')
    with pytest.raises(ValueError, match="was started before"):
        slurm_task.prepare(dict(SPEC), str(tmp_path), "gpu-017")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-017")
    assert slurm_task.main(str(spec_file), str(tmp_path)) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["code"] == "already_started" and doc["host"] == "gpu-017"


def test_a_bad_spec_is_refused_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "spec.json"
    bad.write_text('{"run_id": "../x"}')
    assert slurm_task.main(str(bad), str(tmp_path)) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["code"] == "bad_spec" and str(bad) in doc["error"]
