"""orch as a user installs it: ``python -m build`` makes a wheel and an sdist; the wheel, installed into a fresh
virtual environment away from the source tree, runs ``orch --version``, ``orch db upgrade`` on a new SQLite file,
``orch suites list``, ``orch deploy --hosts local`` (the agent zipapp from the wheel, the same sha256 as one built
from the source tree) and ``orch serve`` (``/`` and ``/docs`` with their assets).

Offline-safe: the build runs ``--no-isolation`` with the test environment's hatchling, the new venv's pip comes
from ensurepip, and the venv gets its third-party packages from the test environment through a ``.pth`` line
(orch itself is not there: the shared environment's orch is an editable finder that a ``.pth`` path does not
activate). Nothing in the commands below runs with the source tree on ``sys.path`` or as the working directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import orchestrator
from orchestrator.agent_build import agent_source_sha256

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 600.0  # build + venv on a loaded 2-core machine

pytestmark = pytest.mark.timeout(1800)


@dataclass
class Installed:
    venv: Path
    work: Path
    home: Path

    @property
    def orch(self) -> str:
        return str(self.venv / "bin" / "orch")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.update(HOME=str(self.home), XDG_CACHE_HOME=str(self.home / ".cache"), COLUMNS="200",
                   ORCH_INVENTORY=str(self.work / "inventory.yaml"), ORCH_DB_URL=f"sqlite:///{self.work / 'orch.db'}",
                   PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")  # fmt: skip
        return env

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.orch, *args], cwd=self.work, env=self.env(), capture_output=True, text=True,
                              timeout=DEADLINE_S)  # fmt: skip


def _git_head() -> str | None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(REPO)],
        capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("user")
    venv, work, home = root / "venv", root / "work", root / "home"
    work.mkdir()
    home.mkdir()
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    # With its own pip (ensurepip, offline): pip run from the test environment would see its orch as installed.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=DEADLINE_S, env=clean)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(
        subprocess.run([str(venv / "bin" / "python"), "-c", purelib],
                       capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    )  # fmt: skip
    wheel = next(dist.glob("orch-*.whl"))
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=DEADLINE_S, env=clean,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert (site / "orchestrator" / "__init__.py").is_file(), pip.stdout[-2000:]
    # After the install: pip would otherwise see the test environment's (editable) orch as already installed.
    (site / "orch-test-deps.pth").write_text(str(Path(sysconfig.get_paths()["purelib"]).resolve()) + "\n")
    (work / "inventory.yaml").write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    yield Installed(venv, work, home)


def test_the_wheel_and_the_sdist_carry_what_an_install_needs(dist: Path) -> None:
    wheel = next(dist.glob("orch-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        build_info = json.loads(zf.read("orchestrator/_build_info.json"))
    versions = sorted(p.name for p in (REPO / "migrations" / "versions").glob("*.py"))
    assert {f"orchestrator/migrations/versions/{v}" for v in versions} <= names
    assert {"orchestrator/migrations/env.py", "orchestrator/migrations/script.py.mako", "orchestrator/web/index.html",
            "orchestrator/web/dash.js", "agents/orch_agent/cli.py", "orchestrator/py.typed"} <= names  # fmt: skip
    assert not any(n.startswith(("tests/", "migrations/", "orchestrator/store/migrations/")) for n in names)
    head = _git_head()
    if head is not None:
        assert build_info["commit"] == head
    sdist = next(dist.glob("orch-*.tar.gz"))
    with tarfile.open(sdist) as tf:
        top = {Path(m.name).parts[1] for m in tf.getmembers() if len(Path(m.name).parts) > 1}
    assert {"pyproject.toml", "README.md", "orchestrator", "agents", "migrations", "alembic.ini", "tests"} <= top


def test_the_installed_orch_works_without_the_source_tree(installed: Installed) -> None:
    where = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import orchestrator, agents; from orchestrator.store.migrate import migrations_dir; "
         "print(orchestrator.__file__); print(agents.__file__); print(migrations_dir())"],
        cwd=installed.work, env=installed.env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).resolve().is_relative_to(installed.venv.resolve()), where.stdout

    source_sha = agent_source_sha256(REPO / "agents" / "orch_agent")
    version = installed("--version")
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[0].startswith(f"orch {orchestrator.__version__} (")
    head = _git_head()
    if head is not None:
        assert f"commit {head}" in lines[0] and "recorded at build" in lines[0]
    assert re.fullmatch(r"python \d+\.\d+\.\d+, asyncssh \d[\w.]*, sqlalchemy \d[\w.]*", lines[1]), lines[1]
    assert lines[2] == f"agent sha256 {source_sha}"

    up = installed("db", "upgrade")
    assert up.returncode == 0, up.stderr
    assert re.search(r"is at revision \w+ \(head\)", up.stdout) and (installed.work / "orch.db").is_file()

    suites = installed("suites", "list", "--json")
    assert suites.returncode == 0, suites.stderr
    assert {"moe-sweep", "hbm-bandwidth", "noop"} <= {s["name"] for s in json.loads(suites.stdout)["suites"]}

    deploy = installed("deploy", "--hosts", "local", "--json")
    assert deploy.returncode == 0, deploy.stderr
    (host,) = json.loads(deploy.stdout)["hosts"]
    assert host["ok"] and host["agent_sha"] == source_sha
    pyz = installed.home / ".orch" / "agent" / source_sha / "agent.pyz"
    assert hashlib.sha256(pyz.read_bytes()).hexdigest() == source_sha


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local_assets(html: str) -> list[str]:
    return sorted({u for u in re.findall(r'(?:src|href)="(/[^"]*)"', html) if not u.startswith("//")})


def test_the_installed_orch_serves_the_dashboard_and_docs_with_their_assets(installed: Installed) -> None:
    assert installed("db", "upgrade").returncode == 0
    port = _free_port()
    proc = subprocess.Popen([installed.orch, "serve", "--port", str(port)], cwd=installed.work, env=installed.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "orch serve did not start"
            try:
                health = httpx.get(f"{base}/healthz", timeout=10)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert health.status_code == 200, health.text
        assert health.json()["orch"]["agent_sha256"] == agent_source_sha256(REPO / "agents" / "orch_agent")
        with httpx.Client(base_url=base, timeout=30) as c:
            for page in ("/", "/docs"):
                r = c.get(page)
                assert r.status_code == 200 and "text/html" in r.headers["content-type"], (page, r.status_code)
                assets = _local_assets(r.text)
                if page == "/docs":
                    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
                for asset in assets:
                    got = c.get(asset)
                    assert got.status_code == 200 and got.content, (page, asset, got.status_code)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_the_docker_image_build_context_makes_a_wheel(tmp_path: Path) -> None:
    """What the Dockerfile COPYs is enough for ``pip install .``: hatchling's build hook and the migrations are in."""
    context = tmp_path / "src"
    context.mkdir()
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        *sources, dest = line.split()[1:]
        for src in sources:
            target = context / (dest if not dest.endswith("/") and len(sources) == 1 else Path(dest) / src)
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / src).is_dir():
                shutil.copytree(REPO / src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(REPO / src, target)
    out = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), "."],
                          cwd=context, capture_output=True, text=True, timeout=DEADLINE_S)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with zipfile.ZipFile(next(out.glob("orch-*.whl"))) as zf:
        names = set(zf.namelist())
    assert {"orchestrator/migrations/env.py", "orchestrator/web/index.html", "agents/orch_agent/cli.py"} <= names
