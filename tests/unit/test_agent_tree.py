"""The agent's unpacked tree (``deploy_helper.ensure_tree``): the helper run as on a host (``python -c SOURCE``, a
subprocess, the real filesystem), a tree that verifies is run, one that was changed or left partial is made again,
and one this user cannot replace leaves the zipapp to run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.agent_build import agent_pyz_bytes, agent_tree_sha256
from orchestrator.remote import source

PYZ = agent_pyz_bytes()
SHA = hashlib.sha256(PYZ).hexdigest()
TREE_SHA = agent_tree_sha256()


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HOME": str(home)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env | extra


def _umask_022() -> None:
    """The usual login umask (other tests of this process may have set 077, which hides files from other users)."""
    os.umask(0o022)


def ensure(home: Path, python: str = sys.executable, prefix: tuple[str, ...] = (), **env: str) -> dict[str, object]:
    argv = [*prefix, python, "-c", source("deploy_helper"), "ensure", "--agent-sha", SHA, "--agent-tree", TREE_SHA]
    res = subprocess.run(argv, env=_env(home, **env), capture_output=True, text=True, timeout=120, check=False,
                         preexec_fn=_umask_022)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


@pytest.fixture
def home(tmp_path: Path) -> Path:
    agent = tmp_path / ".orch" / "agent" / SHA
    agent.mkdir(parents=True)
    (agent / "agent.pyz").write_bytes(PYZ)
    return tmp_path


def test_first_check_unpacks_with_checked_hash_bytecode_and_the_tree_runs_as_that_version(home: Path) -> None:
    doc = ensure(home, PYTHONDONTWRITEBYTECODE="1")  # the unpack writes bytecode whatever the shell says
    tree = home / ".orch" / "agent" / SHA / "tree"
    assert (doc["agent"], doc["agent_tree"], doc["agent_run"]) == ("present", "unpacked", str(tree))
    pyc = next((tree / "orch_agent" / "__pycache__").glob("cli.*.pyc")).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0b11  # PEP 552: hash-based, checked against the source
    assert sorted(p.name for p in (home / ".orch" / "agent" / SHA).iterdir()) == ["agent.pyz", "tree"]
    assert ensure(home)["agent_tree"] == "present"
    res = subprocess.run([sys.executable, str(tree), "version"], env=_env(home), capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    assert json.loads(res.stdout)["agent_version"] == SHA


@pytest.mark.parametrize("damage", ["edited", "added", "removed", "symlink", "emptied"])
def test_a_changed_or_partial_tree_is_made_again_before_it_runs(home: Path, damage: str) -> None:
    ensure(home)
    tree = home / ".orch" / "agent" / SHA / "tree"
    spec = tree / "orch_agent" / "spec.py"
    good = spec.read_bytes()
    if damage == "edited":
        spec.write_bytes(good.replace(b"def ", b"def _", 1))
    elif damage == "added":
        (tree / "orch_agent" / "sitecustomize.py").write_text("raise SystemExit(9)\n")
    elif damage == "removed":  # an unpack that stopped half way
        spec.unlink()
    elif damage == "symlink":
        spec.unlink()
        spec.symlink_to("/etc/hostname")
    else:
        shutil.rmtree(tree)
        tree.mkdir()
    doc = ensure(home)
    assert (doc["agent_tree"], doc["agent_run"]) == ("unpacked", str(tree))
    assert spec.read_bytes() == good and not spec.is_symlink()
    assert not (tree / "orch_agent" / "sitecustomize.py").exists()
    assert sorted(p.name for p in (home / ".orch" / "agent" / SHA).iterdir()) == ["agent.pyz", "tree"]


@pytest.fixture
def shared_home() -> Iterator[Path]:
    """A home another user can read (tmp_path's parents are 0700 to everyone but root)."""
    d = Path(tempfile.mkdtemp(prefix="orch-shared-home-"))
    d.chmod(0o755)
    try:
        agent = d / ".orch" / "agent" / SHA
        agent.mkdir(parents=True)
        for p in (d / ".orch", d / ".orch" / "agent", agent):
            p.chmod(0o755)
        (agent / "agent.pyz").write_bytes(PYZ)
        (agent / "agent.pyz").chmod(0o644)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as_nobody(home: Path) -> tuple[str, ...]:
    """argv prefix running a command as ``nobody`` with ``home`` as its HOME (runuser sets nobody's own)."""
    if os.geteuid() != 0 or shutil.which("runuser") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, runuser and /usr/bin/python3 to act as a second user")
    return ("runuser", "-u", "nobody", "--", "env", f"HOME={home}")


def test_a_second_user_runs_the_tree_another_user_made_and_falls_back_to_the_zipapp_when_it_differs(
    shared_home: Path,
) -> None:
    nobody = _as_nobody(shared_home)
    tree = shared_home / ".orch" / "agent" / SHA / "tree"
    assert ensure(shared_home, "/usr/bin/python3")["agent_tree"] == "unpacked"  # made by root
    doc = ensure(shared_home, "/usr/bin/python3", nobody)
    assert (doc["agent_tree"], doc["agent_run"]) == ("present", str(tree))
    res = subprocess.run([*nobody, "/usr/bin/python3", str(tree), "version"], env=_env(shared_home),
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(res.stdout)["agent_version"] == SHA
    (tree / "orch_agent" / "spec.py").write_text("# changed\n")  # root's tree now differs; nobody cannot replace it
    doc = ensure(shared_home, "/usr/bin/python3", nobody)
    pyz = shared_home / ".orch" / "agent" / SHA / "agent.pyz"
    assert (doc["agent_tree"], doc["agent_run"]) == ("unavailable", str(pyz))
    assert "cannot unpack the agent next to" in str(doc["agent_tree_note"])
    res = subprocess.run([*nobody, "/usr/bin/python3", str(pyz), "version"], env=_env(shared_home),
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(res.stdout)["agent_version"] == SHA
