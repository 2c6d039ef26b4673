"""bench/fanout_scale_device.sh (the fleet bench's one command for the lent GPU machine), run here without
.gpu-carry: the OpenSSH on PATH, the given Python, output under $OUT."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "fanout_scale_device.sh"

pytestmark = pytest.mark.sshd  # the script checks for sshd, ssh and ssh-keygen before anything else


def _run(tmp_path: Path, prefix: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PY": sys.executable, "OUT": str(tmp_path / "out"), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(["bash", "-c", f'{prefix}exec bash "$0"', str(SCRIPT)], env=full, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_a_hard_open_files_limit_too_low_for_the_concurrency_is_refused_with_both_numbers(tmp_path: Path) -> None:
    res = _run(tmp_path, "ulimit -n 256; ", SIZES="4:1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        "the hard open-files limit 256 is too low for concurrency 64 (orch 297 + the floors' connections): raise it "
        "(ulimit -Hn as root) or pass BENCH_ARGS='--concurrency N' with a smaller N"
    ) in res.stdout
    assert "bench/fanout_scale.py" not in res.stdout  # nothing was measured
    assert not (tmp_path / "out" / "fanout-scale-4.txt").exists()


def test_one_small_size_runs_to_the_end_and_leaves_its_output_under_out(tmp_path: Path) -> None:
    res = _run(tmp_path, SIZES="4:1", BENCH_ARGS="--skip-run")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no .gpu-carry/start-sshd.sh here: using the OpenSSH on PATH, installing nothing" in res.stdout
    assert "4 hosts x 1: exit 0 after" in res.stdout
    out = (tmp_path / "out" / "fanout-scale-4.txt").read_text()
    assert "  floor (doctor) #1: " in out and "(4/4 ok;" in out
    assert "(4/4 authenticated, 4 probed, exit 1;" in out  # the bare venv has no torch: doctor fails, as meant
    assert "doctor at 4 hosts: best wall orch" in out
    assert (tmp_path / "out" / "setup.txt").read_text().splitlines()[-1].startswith("done in ")
