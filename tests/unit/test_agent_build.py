"""agent.pyz: byte-for-byte reproducible, runnable, and doctor's sysinfo probe runs from its source text."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from orchestrator.agent_build import (
    SHEBANG,
    agent_pyz_bytes,
    agent_source_dir,
    agent_source_sha256,
    build_agent_pyz,
    sysinfo_source,
)


def test_build_is_reproducible(tmp_path: Path) -> None:
    p1, sha1 = build_agent_pyz(tmp_path / "a")
    p2, sha2 = build_agent_pyz(tmp_path / "b")
    assert sha1 == sha2 == hashlib.sha256(p1.read_bytes()).hexdigest() == agent_source_sha256()
    assert p1.read_bytes() == p2.read_bytes()
    assert p1.read_bytes().startswith(SHEBANG) and p1.stat().st_mode & 0o777 == 0o755
    with zipfile.ZipFile(p1) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names) and "__main__.py" in names and "orch_agent/cli.py" in names
    assert "orch_agent/benches/moe_gemm.py" in names and "orch_agent/sysinfo.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}


def test_pycache_and_stray_files_do_not_change_the_build(tmp_path: Path) -> None:
    src = tmp_path / "orch_agent"
    shutil.copytree(agent_source_dir(), src, ignore=shutil.ignore_patterns("__pycache__"))
    before = agent_source_sha256(src)
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"junk")
    (src / "notes.txt").write_text("x")
    (src / "cli.py").touch()
    assert agent_source_sha256(src) == before
    (src / "cli.py").write_text((src / "cli.py").read_text() + "\n# changed\n")
    assert agent_source_sha256(src) != before


def test_built_pyz_runs_version_and_facts(tmp_path: Path) -> None:
    pyz, sha = build_agent_pyz(tmp_path)
    v = subprocess.run(
        [sys.executable, str(pyz), "version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(v.stdout)["agent_version"] == sha
    home = tmp_path / "login" / ".orch"  # as deploy leaves it: ~/.orch of the login user
    (home / "agent" / sha).mkdir(parents=True)
    (home / "agent" / sha / "agent.pyz").write_bytes(pyz.read_bytes())
    (home / "builds" / ("ab" * 32)).mkdir(parents=True)
    (home / "builds" / ".partial-upload").mkdir()
    (home / "builds" / "current").symlink_to("ab" * 32)
    f = subprocess.run(
        [sys.executable, str(pyz), "facts", "--orch-home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "HOME": str(home.parent)},
    )
    facts = json.loads(f.stdout)
    assert facts["orch"] == {
        "home": str(home),
        "agents": [sha],
        "builds": ["ab" * 32],
        "current_build": "ab" * 32,
    }
    assert facts["python"]["executable"] == sys.executable


def test_sysinfo_source_runs_standalone_and_reports_missing_torch(tmp_path: Path) -> None:
    src = sysinfo_source()
    assert "from ." not in src and "import orch_agent" not in src  # self-contained
    out = subprocess.run(
        [sys.executable, "-c", src, "--json", "--orch-home", str(tmp_path / "nope" / ".orch")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    facts = json.loads(out.stdout)
    assert facts["disk"]["path"] == str(tmp_path)
    assert facts["nvidia_smi"]["found"] == (shutil.which("nvidia-smi") is not None)
    # An interpreter without torch: the probe reports ImportError's exact text, and the probe itself survives.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "torch.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    out = subprocess.run(
        [sys.executable, "-c", src, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=bare,
        env={"PYTHONPATH": str(bare), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    torch_facts = json.loads(out.stdout)["torch"]
    assert torch_facts["ok"] is False and torch_facts["error"] == "No module named 'torch'"


_COUNT_PACKS = """
import orchestrator.agent_build as b
packs = []
pack = b._pack
b._pack = lambda entries: packs.append(1) or pack(entries)
from orchestrator.deploy import agent_artifact
from orchestrator.version import version_info
art = agent_artifact()
print(len(packs), art.sha256, version_info().agent_sha256, b.agent_source_sha256())
"""


def test_the_agent_is_packed_once_then_taken_from_the_cache(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "XDG_CACHE_HOME": str(tmp_path)}

    def child() -> list[str]:
        res = subprocess.run([sys.executable, "-c", _COUNT_PACKS], env=env, capture_output=True, text=True,
                             timeout=120, check=True)  # fmt: skip
        return res.stdout.split()

    first, second = child(), child()
    assert first[0] == "1"  # the artifact and the version share one packing in a process
    assert second[0] == "0"  # the next process reads the archive back from the cache
    assert len(set(first[1:] + second[1:])) == 1 and first[1] == agent_source_sha256()
    (tmp_path / "orch" / "agent" / first[1] / "agent.pyz").write_bytes(b"damaged")
    third = child()
    assert third == first  # a cached archive whose bytes do not hash to the recorded sha256 is packed again


def test_changed_sources_are_packed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = tmp_path / "orch_agent"
    shutil.copytree(agent_source_dir(), src, ignore=shutil.ignore_patterns("__pycache__"))
    before = agent_pyz_bytes(src)
    (src / "cli.py").write_text((src / "cli.py").read_text() + "\n# changed\n")
    after = agent_pyz_bytes(src)
    assert before != after
    with zipfile.ZipFile(io.BytesIO(after[len(SHEBANG):])) as zf:
        assert zf.read("orch_agent/cli.py").endswith(b"# changed\n")
