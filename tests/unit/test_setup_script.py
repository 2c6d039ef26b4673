"""scripts/setup.sh (the README's demo runs it first) says what it is doing: one ``setup:`` line per step, pip's
own progress for the long installs (not ``-q``), without pip's noise. Run on a copy of the script whose
``.venv/bin/python`` is a stand-in recording the pip commands (a real install would take minutes and the
network), so only the script's own logic is under test."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
# stands in for .venv/bin/python: pip installs print pip-like progress; 'import torch' fails (first install)
echo "$*" >> "$(dirname "$0")/calls.log"
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "Collecting example-package"
  echo "Requirement already satisfied: already-here"
  echo "WARNING: Location 'x' is ignored"
  echo "Installing collected packages: example-package"
  exit 0
fi
if [ "$1" = "-c" ] && [ "$2" = "import torch" ]; then exit 1; fi
exit 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(FAKE_PYTHON)
    (venv_bin / "python").chmod(0o755)
    return tmp_path


def test_setup_prints_each_step_and_pips_progress(tree: Path) -> None:
    if shutil.which("python3") is None:
        pytest.fail("python3 is not on PATH: setup.sh needs it (apt-get install python3 python3-venv)")
    res = subprocess.run(["bash", str(tree / "scripts" / "setup.sh")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    steps = [line for line in res.stderr.splitlines() if line.startswith("setup: ")]
    assert [s.split(" (")[0].split("...")[0] for s in steps] == [
        "setup: updating pip in .venv",
        "setup: installing torch 2.13.0 and numpy into .venv",
        "setup: installing orch and its dev tools into .venv",
        "setup: checking the installation",
        "setup: done: .venv is ready",
    ]
    # pip's progress reaches the terminal for the long installs, its noise does not
    assert res.stdout.count("Collecting example-package") == 3
    assert "Requirement already satisfied" not in res.stdout and "WARNING: Location" not in res.stdout
    calls = (tree / ".venv" / "bin" / "calls.log").read_text().splitlines()
    installs = [c for c in calls if c.startswith("-m pip install")]
    assert len(installs) == 3
    assert "-q" in installs[0].split()  # pip upgrading itself: quiet, it takes seconds
    assert all("-q" not in c.split() for c in installs[1:]), installs  # torch and orch: pip shows progress
    assert "-e .[dev]" in installs[2]


def test_demo_says_each_step_before_it_runs() -> None:
    text = (REPO / "scripts" / "demo.sh").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for i, line in enumerate(lines):
        if line.startswith(("bash scripts/setup.sh", "orch ")):
            assert lines[i - 1].startswith("say "), f"scripts/demo.sh: no progress line before {line!r}"
