"""``orch --version``, the version in each run's provenance, shell completion from the inventory and the suite
registry, and the repository's top-level layout — through the real ``orch`` process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import orchestrator
from orchestrator.agent_build import agent_source_sha256
from tests.e2e.conftest import Orch

REPO = Path(__file__).resolve().parents[2]
INVENTORY = """\
groups:
  b300:
    hosts:
      b300-0: {address: 10.0.0.20}
      b300-1: {address: 10.0.0.21}
  ct200:
    hosts:
      ct200-0: {address: 10.0.0.10}
  local:
    hosts:
      localhost: {connection: local}
"""


@pytest.fixture
def orch(tmp_path: Path) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(INVENTORY)
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


def _git_head() -> str | None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_version_names_orch_its_commit_the_libraries_and_the_agent(orch: Orch) -> None:
    res = orch("--version")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"orch {orchestrator.__version__} (commit ")
    head = _git_head()
    if head is not None:
        assert f"commit {head}" in lines[0] and lines[0].endswith("source checkout)")
    assert re.fullmatch(r"python \d+\.\d+\.\d+, asyncssh \d[\w.]*, sqlalchemy \d[\w.]*", lines[1]), lines[1]
    assert lines[2] == f"agent sha256 {agent_source_sha256()}"
    assert not (orch.cwd / "orch.db").exists()  # --version touches nothing


def test_every_run_records_the_orch_that_ran_it(orch: Orch) -> None:
    run = orch.json("run", "noop", "--hosts", "local")
    info = orch.json("runs", "show", run["run_id"])["run"]["info"]["orch"]
    assert info["version"] == orchestrator.__version__ and info["agent_sha256"] == agent_source_sha256()
    assert set(info) == {"version", "commit", "commit_source", "dirty", "python", "asyncssh", "sqlalchemy",
                         "agent_sha256"}  # fmt: skip


def _complete(orch: Orch, words: str) -> list[str]:
    """What bash completion offers for the last word of ``words`` (click's COMP_WORDS/COMP_CWORD protocol)."""
    parts = words.split(" ")
    env = {**orch.env(), "_ORCH_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    res = subprocess.run(orch.argv(), cwd=orch.cwd, env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0 and not res.stderr, res.stderr
    return [line for line in res.stdout.splitlines() if line]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("orch run moe-sweep --hosts b3", ["b300", "b300-0", "b300-1"]),
        ("orch run moe-sweep --hosts b300,ct", ["b300,ct200", "b300,ct200-0"]),
        ("orch doctor -H lo", ["local", "localhost"]),
        ("orch deploy --hosts ct200-", ["ct200-0"]),
        ("orch hosts trust b", ["b300-0", "b300-1"]),  # hosts only: trust takes one host, not a group
        ("orch run moe", ["moe-sweep", "moe-sweep-ep"]),
        ("orch suites show hbm", ["hbm-bandwidth"]),
    ],
)
def test_completion_offers_inventory_names_and_suites(orch: Orch, words: str, expected: list[str]) -> None:
    assert _complete(orch, words) == expected


def test_completion_reads_the_inventory_named_on_the_line(orch: Orch, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("groups:\n  h100:\n    hosts:\n      h100-0: {}\n")
    assert _complete(orch, f"orch --inventory {other} run noop --hosts h") == ["h100", "h100-0"]
    other.write_text("groups: [not, a, mapping]\n")
    assert _complete(orch, f"orch -i {other} run noop --hosts h") == []  # a bad inventory completes nothing


def test_show_completion_prints_the_script_for_the_calling_shell(orch: Orch) -> None:
    # typer detects the shell from the parent process (shellingham): call orch from bash, not with exec
    res = subprocess.run(["bash", "-c", '"$@" --show-completion; status=$?; exit $status', "_", *orch.argv()],
                         cwd=orch.cwd, env=orch.env(), capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "_ORCH_COMPLETE=complete_bash" in res.stdout and "complete -o default -F _orch_completion orch" in res.stdout


def test_the_top_level_is_the_specified_layout() -> None:
    required = {"pyproject.toml", "orchestrator", "agents", "inventory.yaml", "migrations", "tests",
                "docker-compose.yml"}  # fmt: skip
    allowed = required | {"README.md", "scripts", "bench", "docs", "Dockerfile", "alembic.ini"}
    if (REPO / ".git").exists():
        listed = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, timeout=60,
                                check=True).stdout.split()  # fmt: skip
        top = {p.split("/", 1)[0] for p in listed}
    else:  # an unpacked sdist
        top = {p.name for p in REPO.iterdir()} - {"PKG-INFO"}
    top = {t for t in top if not t.startswith(".")}
    assert required <= top and top <= allowed, sorted(top ^ allowed)
    assert not (REPO / "orchestrator" / "store" / "migrations").exists()
    assert os.path.isfile(REPO / "migrations" / "env.py")
