"""``orch deploy`` against real sshd hosts: two hosts sharing one home (as over NFS) under concurrent deploys, and
build archives that must not write outside the build (issue 12 items 9 and 11)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from orchestrator.deploy import Artifact, deploy_host
from orchestrator.errors import DeployError
from orchestrator.inventory import parse_inventory
from orchestrator.transport import open_transport
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.unit.test_deploy_helper import CHAIN_ONLY, HARD_LINK_OUT, SYMLINK_CHAIN, make_tar

pytestmark = pytest.mark.sshd


def _orch(sshd_bed: SshdBed, tmp_path: Path, groups: dict[str, list[object]]) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml(groups))  # type: ignore[arg-type]
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


def _engine(tmp_path: Path) -> Path:
    build = tmp_path / "engine"
    (build / "bin").mkdir(parents=True)
    (build / "bin" / "engine").write_text("#!/bin/sh\necho engine\n")
    (build / "bin" / "engine").chmod(0o755)
    (build / "weights.bin").write_bytes(bytes(range(256)) * 4096)  # 1 MiB: uploads overlap in time
    return build


def test_five_concurrent_deploys_to_two_hosts_sharing_one_home_all_succeed(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    shared = tmp_path / "nfs-home"
    shared.mkdir()
    a = sshd_bed.add("nfs-a", home=shared)
    b = sshd_bed.add("nfs-b", home=shared)
    orch = _orch(sshd_bed, tmp_path, {"nfs": [a, b]})
    build = _engine(tmp_path)
    argv = [*orch.argv("deploy", "--hosts", "nfs", "--build", str(build), "--json")]

    def deploy(i: int) -> subprocess.CompletedProcess[str]:
        cwd = tmp_path / f"client-{i}"
        cwd.mkdir()
        # five engineers' machines: each its own store and cache, one fleet
        env = orch.env() | {"XDG_CACHE_HOME": str(cwd / "cache"), "ORCH_DB_URL": f"sqlite:///{cwd / 'orch.db'}"}
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(deploy, range(5)))
    for res in results:
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    docs = [json.loads(r.stdout) for r in results]
    rows = [row for d in docs for row in d["hosts"]]
    assert len(rows) == 10
    sha = rows[0]["build_sha"]
    assert {r["build_sha"] for r in rows} == {sha}
    assert {r["build"] for r in rows} <= {"uploaded", "present"}
    builds = shared / ".orch" / "builds"
    assert sorted(p.name for p in builds.iterdir()) == sorted([sha, "current"])  # no temporaries left
    assert (builds / "current").resolve().name == sha
    assert (builds / sha / ".complete").read_text().strip() == sha
    assert (builds / sha / "weights.bin").read_bytes() == (build / "weights.bin").read_bytes()
    agent_dir = shared / ".orch" / "agent" / rows[0]["agent_sha"]
    assert sorted(p.name for p in agent_dir.iterdir()) == ["agent.pyz", "tree"]  # no temporary trees left
    assert (agent_dir / "tree" / "orch_agent" / "cli.py").is_file()
    assert hashlib.sha256((agent_dir / "agent.pyz").read_bytes()).hexdigest() == rows[0]["agent_sha"]


async def _deploy_unchecked(sshd_bed: SshdBed, tmp_path: Path, tar: Path) -> tuple[Path, DeployError]:
    """Push ``tar`` as a build without orch's local check, so that the host's own check is what refuses it."""
    h = sshd_bed.add("evil-target")
    inv = parse_inventory(sshd_bed.inventory_yaml({"g": [h]}))
    art = Artifact(tar, hashlib.sha256(tar.read_bytes()).hexdigest(), tar.stat().st_size, tar.name)
    t = await open_transport(inv.hosts[0], timeout_s=30)
    try:
        with pytest.raises(DeployError) as exc:
            await deploy_host(t, inv.hosts[0], build=art)
    finally:
        await t.close()
    return h.home, exc.value


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (SYMLINK_CHAIN, "build refused: member 'd2/pwned-build' would be written through the link 'd2'"),
        (CHAIN_ONLY, "build refused: unsafe member in build archive: 'd2' would link to"),
        (HARD_LINK_OUT, "build refused: member '../../../victim.txt' points outside the build ('..')"),
    ],
)
async def test_the_host_refuses_an_unsafe_archive_and_nothing_is_written(
    sshd_bed: SshdBed, tmp_path: Path, members: object, message: str
) -> None:
    tar = make_tar(tmp_path / "evil.tar.gz", members)  # type: ignore[arg-type]
    home, err = await _deploy_unchecked(sshd_bed, tmp_path, tar)
    assert err.message.startswith("evil-target: " + message), err.message
    assert err.hint.startswith("repack the build")
    assert "python:" not in err.hint  # the old, wrong hint
    builds = home / ".orch" / "builds"
    assert list(builds.iterdir()) == []  # neither the upload nor a temporary directory is left
    assert sorted(p.name for p in home.iterdir()) == [".orch"]  # no ~/pwned-build, no ~/victim.txt
    assert sorted(p.name for p in (home / ".orch").iterdir()) == ["agent", "builds"]


def test_cli_refuses_an_unsafe_archive_before_uploading(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("evil-cli")
    orch = _orch(sshd_bed, tmp_path, {"g": [h]})
    tar = make_tar(tmp_path / "evil.tar.gz", SYMLINK_CHAIN)
    res = orch("deploy", "--hosts", "g", "--build", str(tar))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "member 'd2/pwned-build' would be written through the link 'd2'" in res.stderr + res.stdout
    assert "Traceback" not in res.stderr
    assert not (h.home / ".orch").exists()


def test_a_venv_build_deploys_and_its_python_runs(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("venv-host")
    orch = _orch(sshd_bed, tmp_path, {"g": [h]})
    venv = tmp_path / "engine-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    doc = orch.json("deploy", "--hosts", "g", "--build", str(venv))
    (row,) = doc["hosts"]
    assert (row["build"], row["switched"]) == ("uploaded", True)
    current = h.home / ".orch" / "builds" / "current"
    assert (current / "bin" / "python3").is_symlink()
    out = subprocess.run([str(current / "bin" / "python3"), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert Path(out).resolve() == current.resolve()
