"""``orch deploy``: push the agent and optionally an engine build, content-addressed by sha256.

On the host (under the login user's home)::

    ~/.orch/agent/<sha256>/agent.pyz        the agent zipapp; its sha256 is its version
    ~/.orch/agent/<sha256>/tree/            the zipapp unpacked, with its bytecode: what runs (``python3 tree``),
                                            verified file by file at every deploy check, else the zipapp runs
    ~/.orch/builds/<sha256>/                an engine build, unpacked; ``.complete`` marks it whole
    ~/.orch/builds/current -> <sha256>      switched atomically (symlink renamed over the old one)

A host that already has both costs one round trip (the ``ensure`` call of ``remote/deploy_helper.py``, which also
switches ``current`` and prunes builds beyond ``keep``). Otherwise files go over SFTP to uniquely named temporaries
(hosts may share one home over NFS, and several deploys may run at once), are renamed into place, and are verified
by sha256 on the host. A build archive is checked member by member here before any upload, and again on the host,
which extracts it with tarfile's ``data`` filter (see ``remote/deploy_helper.py`` for the rules).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from orchestrator.agent_build import agent_cache_dir, agent_pyz_bytes, agent_tree_sha256
from orchestrator.errors import ConfigError, DeployError, UsageError
from orchestrator.inventory import Host
from orchestrator.remote import source
from orchestrator.remote.deploy_helper import Refused, check_members
from orchestrator.textlines import output_lines
from orchestrator.transport.base import Transport

DEFAULT_KEEP_BUILDS = 3


@dataclass(frozen=True)
class Artifact:
    """A local file to push: its path, sha256 (hex), size in bytes and a display name; for the agent, also the
    sha256 of its unpacked tree (``agent_build.agent_tree_sha256``)."""

    path: Path
    sha256: str
    size_bytes: int
    name: str
    tree_sha256: str | None = None


@cache
def agent_artifact() -> Artifact:
    """This orch's agent.pyz, built reproducibly once per process into ``$XDG_CACHE_HOME/orch/agent/<sha256>/``.

    The cached file is compared with the built bytes, not only by size: a file damaged in place (one byte flipped)
    would otherwise be uploaded by every deploy and fail its sha256 check on the host forever; it is rewritten.
    Safe when several orch processes fill the cache at once: each writes its own temporary file and renames it
    into place. Raises ConfigError (exit 2) naming the path and the reason when the cache cannot be written."""
    data = agent_pyz_bytes()
    sha = hashlib.sha256(data).hexdigest()
    cache_dir = agent_cache_dir() / sha
    path = cache_dir / "agent.pyz"
    if not _holds(path, data):
        try:
            _write_cache(cache_dir, path, data)
        except OSError as exc:
            where = exc.filename if exc.filename else cache_dir
            raise ConfigError(
                f"cannot write orch's agent cache {where}: {exc.strerror or exc}",
                "free space there, or set XDG_CACHE_HOME to a writable directory",
            ) from exc
    return Artifact(path, sha, len(data), "agent.pyz", agent_tree_sha256())


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a file with exactly ``data`` in it (an unreadable one counts as not)."""
    try:
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _write_cache(cache_dir: Path, path: Path, data: bytes) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    # A name of its own: orch processes started together (a CI matrix, several users' first runs) write the
    # same cache at once, and a shared name lets one rename another's file away from under it.
    tmp = cache_dir / f"agent.{uuid.uuid4().hex[:12]}.part"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def pack_build(build: Path, out_dir: Path) -> Artifact:
    """Turn an engine build (a directory, or a .tar.gz/.tgz file) into a content-addressed tarball.

    A directory is packed reproducibly (sorted entries, mtime 0, uid/gid 0, modes kept so executables stay
    executable), so the same tree always has the same sha256. A tarball is taken as it is.
    Either way every member must pass ``deploy_helper.check_members`` (nothing written outside the build or through
    a link; a venv's absolute ``bin/python3`` link is fine). Raises UsageError when the path is missing, of another
    kind, or holds a member that the host would refuse.
    """
    if not build.exists():
        raise UsageError(f"--build {build}: no such file or directory", "pass a build directory or a .tar.gz")
    if build.is_file():
        if not (build.name.endswith(".tar.gz") or build.name.endswith(".tgz")):
            raise UsageError(f"--build {build}: not a directory or .tar.gz/.tgz", "pack the build with tar czf")
        try:
            with tarfile.open(build, "r:gz") as tf:
                _check(build, tf.getmembers())
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UsageError(
                f"--build {build}: not a readable .tar.gz ({exc})", "pack the build with tar czf"
            ) from None
        digest = hashlib.sha256()
        with build.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return Artifact(build, digest.hexdigest(), build.stat().st_size, build.name)
    raw = io.BytesIO()
    infos: list[tarfile.TarInfo] = []
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for root, dirs, files in os.walk(build):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = Path(root) / name
                arc = str(full.relative_to(build))
                info = tf.gettarinfo(str(full), arcname=arc)
                if info is None:  # a socket: tar cannot hold it
                    raise UsageError(f"--build {build}: {arc} is a socket", "remove it from the build directory")
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                infos.append(info)
                if info.isfile():
                    with full.open("rb") as f:
                        tf.addfile(info, f)
                else:
                    tf.addfile(info)
    _check(build, infos)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=6) as g:
        g.write(raw.getvalue())
    data = gz.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    out = out_dir / f"{sha}.tar.gz"
    out.write_bytes(data)
    return Artifact(out, sha, len(data), build.name)


def _check(build: Path, members: list[tarfile.TarInfo]) -> None:
    try:
        check_members(members)
    except Refused as exc:
        raise UsageError(f"--build {build}: {exc.message}", exc.hint) from None


@dataclass
class HostDeploy:
    """What deploy did on one host."""

    host: str
    agent_sha: str
    agent: str  # present | uploaded
    build_sha: str | None = None
    build: str | None = None  # present | uploaded | None
    current_build: str | None = None  # sha256 of the host's builds/current after this deploy (None: no build)
    switched: bool = False
    pruned: list[str] = field(default_factory=list)
    uploaded_bytes: int = 0
    home: str = ""
    python: str = ""
    facts: dict[str, Any] | None = field(default=None, repr=False)  # the agent's host facts, when asked and present
    agent_run: str = ""  # what the host runs: the verified tree, else the zipapp (the helper's ``agent_run``)
    agent_tree: str | None = None  # present | unpacked | unavailable (then ``agent_tree_note`` says why)
    agent_tree_note: str | None = None

    @property
    def pyz_path(self) -> str:
        """The zipapp on the host (one file: what a Slurm job copies to its nodes)."""
        return f"{self.home}/.orch/agent/{self.agent_sha}/agent.pyz"

    @property
    def agent_path(self) -> str:
        """What ``python3 PATH COMMAND`` runs: the agent's verified tree, else its zipapp."""
        return self.agent_run or self.pyz_path

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "agent_sha": self.agent_sha,
            "agent": self.agent,
            "build_sha": self.build_sha,
            "build": self.build,
            "switched": self.switched,
            "pruned": self.pruned,
            "uploaded_bytes": self.uploaded_bytes,
        }


async def _helper(t: Transport, host: Host, args: Sequence[str], timeout_s: float = 120) -> dict[str, Any]:
    res = await t.run([host.interpreter, "-c", source("deploy_helper"), *args], timeout_s=timeout_s, check=False)
    try:
        return res.json_object()
    except ValueError as why:
        refused = _refusal(res.stdout)
        if refused is not None:  # the helper ran and said why (a bad archive, a corrupt upload): its own hint
            raise DeployError(host.name, f"build refused: {refused[0]}", refused[1]) from None
        raise DeployError(
            host.name,
            f"deploy helper failed: {why}",
            "check that `python:` in the inventory names a working Python 3.8+ on the host",
        ) from None


async def deploy_host(
    t: Transport, host: Host, *, build: Artifact | None = None, keep: int = DEFAULT_KEEP_BUILDS, facts: bool = False
) -> HostDeploy:
    """Make the host hold this orch's agent (and ``build``, switched to ``current``). Raises DeployError.

    ``facts``: also read the host facts through the agent already on the host, in the same round trip (the
    result's ``facts``; None when the agent had to be uploaded, so the caller asks the agent itself)."""
    agent = agent_artifact()
    tree = ["--agent-tree", agent.tree_sha256] if agent.tree_sha256 else []
    args = ["ensure", "--agent-sha", agent.sha256, *tree, "--keep", str(keep)]
    if build is not None:
        args += ["--build-sha", build.sha256]
    if facts:
        args += ["--facts", *(["--orch-home", host.orch_home] if host.orch_home else [])]
    state = await _helper(t, host, args)
    out = HostDeploy(host.name, agent.sha256, "present", home=state["home"], python=state.get("python", ""))
    if isinstance(state.get("facts"), dict):
        out.facts = state["facts"]
    _tree(out, state)
    cur = state.get("current_build")
    out.current_build = cur if isinstance(cur, str) and cur else None
    if state["agent"] != "present":
        await t.put(agent.path, f".orch/agent/{agent.sha256}/agent.pyz")
        out.agent, out.uploaded_bytes = "uploaded", agent.size_bytes
        check = await _helper(t, host, ["ensure", "--agent-sha", agent.sha256, *tree])
        if check["agent"] != "present":
            raise DeployError(
                host.name,
                f"agent.pyz on the host does not hash to {agent.sha256[:12]} after upload",
                "the upload was corrupted; run orch deploy again",
            )
        _tree(out, check)
    if build is not None:
        out.build_sha = build.sha256
        if state.get("build") == "present":
            out.build, out.switched, out.pruned = "present", bool(state.get("switched")), list(state.get("pruned", []))
        else:
            # unique per deploy: hosts sharing one home may upload the same build at the same time
            tarball = f"{build.sha256}.{uuid.uuid4().hex[:12]}.tar.gz"
            await t.put(build.path, f".orch/builds/{tarball}")
            args = ["install-build", "--build-sha", build.sha256, "--tarball", tarball, "--keep", str(keep)]
            done = await _helper(t, host, args, timeout_s=600)
            out.build, out.switched, out.pruned = "uploaded", True, list(done.get("pruned", []))
            out.uploaded_bytes += build.size_bytes
        out.current_build = build.sha256
    return out


def _tree(out: HostDeploy, state: dict[str, Any]) -> None:
    """The helper's answer on the agent's tree: what to run (only a path it verified), present/unpacked/why not."""
    run, tree, note = state.get("agent_run"), state.get("agent_tree"), state.get("agent_tree_note")
    out.agent_run = run if isinstance(run, str) and state.get("agent") == "present" else ""
    out.agent_tree = tree if isinstance(tree, str) else None
    out.agent_tree_note = note if isinstance(note, str) else None


def _refusal(stdout: str) -> tuple[str, str] | None:
    """The helper's ``{"error", "hint"}`` answer, when it gave one with a hint."""
    lines = output_lines(stdout.strip())
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    if isinstance(doc, dict) and doc.get("error") and doc.get("hint"):
        return str(doc["error"]), str(doc["hint"])
    return None


@dataclass
class DeployPlan:
    build: Artifact | None
    tmpdir: Path | None

    def cleanup(self) -> None:
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def plan(build_path: Path | None) -> DeployPlan:
    """Pack the build once for all hosts (a temporary directory, removed by ``cleanup``)."""
    if build_path is None:
        return DeployPlan(None, None)
    tmp = Path(tempfile.mkdtemp(prefix="orch-build-"))
    try:
        return DeployPlan(pack_build(build_path, tmp), tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
