"""``cli/fastexit.py`` keeps the normal exit under a profiler or coverage tool that Python 3.12+ runs through
``sys.monitoring`` (PEP 669): 3.12's ``cProfile`` registers there and leaves ``sys.getprofile()`` None, so an
``orch run`` under ``python -m cProfile -o FILE`` ended with ``os._exit`` and wrote no profile (seen on the lent
H200 machine, Python 3.12). Run in a real 3.12+ interpreter found on this machine; ``fastexit`` is stdlib-only."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _python_312_or_later() -> str | None:
    """This interpreter when it is 3.12+, else the first 3.12+ one on PATH or under pyenv that really starts
    (pyenv's shims are on PATH for every version but run only the selected ones)."""
    if sys.version_info >= (3, 12):
        return sys.executable
    found = [shutil.which(f"python3.{minor}") for minor in range(12, 20)]
    found += sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[2-9]*/bin/python3")))
    for candidate in filter(None, found):
        check = [candidate, "-I", "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        if subprocess.run(check, capture_output=True, timeout=60, check=False).returncode == 0:
            return candidate
    return None


PY = _python_312_or_later()
needs_312 = pytest.mark.skipif(PY is None, reason="no Python 3.12+ interpreter on this machine")

LEAVE = """
import atexit, sys
sys.path.insert(0, {repo!r})
from orchestrator.cli import fastexit
atexit.register(lambda: print("normal exit", flush=True))
{setup}
fastexit.request()
fastexit.leave(0)
"""


def _leave(setup: str) -> subprocess.CompletedProcess[str]:
    assert PY is not None
    code = LEAVE.format(repo=str(REPO), setup=setup)
    return subprocess.run([PY, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=False)


@needs_312
def test_without_a_tool_the_process_leaves_at_once() -> None:
    """The fast exit still happens when nothing observes the process: the atexit handler never runs."""
    proc = _leave("")
    assert proc.returncode == 0, proc.stderr
    assert "normal exit" not in proc.stdout


@needs_312
def test_cprofile_of_312_keeps_the_normal_exit() -> None:
    proc = _leave("import cProfile\nprofiler = cProfile.Profile()\nprofiler.enable()")
    assert proc.returncode == 0, proc.stderr
    assert "normal exit" in proc.stdout


@pytest.mark.parametrize("tool", ["DEBUGGER_ID", "COVERAGE_ID", "PROFILER_ID", "OPTIMIZER_ID"])
@needs_312
def test_any_sys_monitoring_tool_keeps_the_normal_exit(tool: str) -> None:
    """coverage's ``sysmon`` core and debuggers register a tool id without ``sys.settrace``."""
    proc = _leave(f"sys.monitoring.use_tool_id(sys.monitoring.{tool}, 'observer')")
    assert proc.returncode == 0, proc.stderr
    assert "normal exit" in proc.stdout


@needs_312
def test_python_m_cprofile_of_a_command_that_asks_for_the_fast_exit_writes_its_profile(tmp_path: Path) -> None:
    script = tmp_path / "cmd.py"
    script.write_text(LEAVE.format(repo=str(REPO), setup=""))
    prof = tmp_path / "out.prof"
    assert PY is not None
    proc = subprocess.run([PY, "-I", "-m", "cProfile", "-o", str(prof), str(script)], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert prof.is_file() and prof.stat().st_size > 0
