"""remote/deploy_helper.py's archive rules and extraction, on crafted archives in a temporary directory (the real
filesystem; the same code runs on the hosts, see tests/integration/test_deploy_sshd.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from orchestrator.deploy import pack_build
from orchestrator.errors import UsageError
from orchestrator.remote import deploy_helper as dh


def member(name: str, kind: str = "file", link: str = "", data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                 "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]  # fmt: skip
    info.linkname = link
    info.mode = 0o755 if kind == "dir" else 0o644
    info.size = len(data) if kind == "file" else 0
    return info, data


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def refused(members: list[tuple[tarfile.TarInfo, bytes]]) -> str:
    with pytest.raises(dh.Refused) as exc:
        dh.check_members([m for m, _ in members])
    return exc.value.message


# Archives that once wrote outside the build (issue 12 item 11) and their relatives.
SYMLINK_CHAIN = [member("d1", "sym", "."), member("d2", "sym", "d1/d1/d1/../../.."), member("d2/pwned-build")]
CHAIN_ONLY = [member("d1", "sym", "."), member("d2", "sym", "d1/d1/d1/../../..")]
HARD_LINK_OUT = [member("h", "hard", "../../../victim.txt")]
HARD_LINK_TO_SYMLINK = [member("s", "sym", "/tmp/victim.txt"), member("h", "hard", "s")]
FILE_OVER_SYMLINK = [member("s", "sym", "/tmp/victim.txt"), member("s", data=b"overwritten")]


def test_symlink_chain_with_a_member_through_it_is_refused_by_the_member_check() -> None:
    assert refused(SYMLINK_CHAIN) == (
        "member 'd2/pwned-build' would be written through the link 'd2' (a chain of links can place files outside "
        "the build)"
    )


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (HARD_LINK_OUT, "member '../../../victim.txt' points outside the build ('..')"),
        (HARD_LINK_TO_SYMLINK, "hard link 'h' -> 's' does not name an earlier regular file of the archive"),
        (FILE_OVER_SYMLINK, "member 's' appears twice in the archive and one of them is a link"),
        ([member("/etc/x")], "member '/etc/x' has an absolute path"),
        ([member("a/../../x")], "member 'a/../../x' points outside the build ('..')"),
        ([member("up", "sym", "../x")], "symlink 'up' -> '../x' leads outside the build"),
        ([member("p", "fifo")], "member 'p' is a device or FIFO, which a build may not contain"),
        ([member("c", "chr")], "member 'c' is a device or FIFO, which a build may not contain"),
        ([member("f"), member("f/g")], "member 'f/g' lies under the file 'f'"),
    ],
)
def test_unsafe_members_are_refused_with_the_member_named(members: Any, message: str) -> None:
    assert refused(members) == message


def test_links_inside_and_absolute_links_are_accepted() -> None:
    ok = [member("bin", "dir"), member("bin/python3.11", "sym", "/usr/bin/python3.11"),
          member("bin/python", "sym", "python3.11"), member("lib", "dir"), member("lib64", "sym", "lib"),
          member("lib/a.so", data=b"so"), member("lib/b.so", "hard", "lib/a.so")]  # fmt: skip
    assert dh.check_members([m for m, _ in ok]) == 7


def test_chain_only_archive_is_refused_by_the_data_filter_and_leaves_nothing(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "chain.tar.gz", CHAIN_ONLY)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(dh.Refused, match="unsafe member in build archive: 'd2' would link to"):
        dh.extract_build(str(tar), str(dest))


def _install(home: Path, tar: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    import hashlib

    sha = hashlib.sha256(tar.read_bytes()).hexdigest()
    builds = home / ".orch" / "builds"
    builds.mkdir(parents=True, exist_ok=True)
    (builds / f"{sha}.up1.tar.gz").write_bytes(tar.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    rc = dh.main(["install-build", "--build-sha", sha, "--tarball", f"{sha}.up1.tar.gz"])
    monkeypatch.undo()
    doc: dict[str, Any] = json.loads(out.getvalue())
    doc["rc"], doc["sha"] = rc, sha
    return doc


@pytest.mark.parametrize("members", [SYMLINK_CHAIN, CHAIN_ONLY, HARD_LINK_OUT, HARD_LINK_TO_SYMLINK, FILE_OVER_SYMLINK])
def test_install_refuses_and_leaves_nothing_behind(
    members: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    tar = make_tar(tmp_path / "evil.tar.gz", members)
    doc = _install(home, tar, monkeypatch)
    assert doc["rc"] == 1 and doc["hint"] and doc["error"]
    assert list((home / ".orch" / "builds").iterdir()) == []  # no tarball, no temporary directory, no current
    assert victim.read_text() == "original"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.tar.gz", "home", "victim.txt"]
    assert sorted(p.name for p in home.iterdir()) == [".orch"]


def test_a_venv_build_is_accepted_and_its_interpreter_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv = tmp_path / "engine-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert (venv / "bin" / "python3").is_symlink()
    art = pack_build(venv, tmp_path)
    doc = _install(tmp_path / "home", art.path, monkeypatch)
    assert (doc["rc"], doc["build"]) == (0, "installed"), doc
    installed = tmp_path / "home" / ".orch" / "builds" / doc["sha"]
    out = subprocess.run([str(installed / "bin" / "python3"), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert out == str(installed)
    assert (tmp_path / "home" / ".orch" / "builds" / "current").resolve() == installed.resolve()
    leftovers = [p.name for p in (tmp_path / "home" / ".orch" / "builds").iterdir()]
    assert sorted(leftovers) == sorted([doc["sha"], "current"])


def test_pack_build_refuses_a_bad_tarball_before_any_upload(tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "evil.tar.gz", SYMLINK_CHAIN)
    with pytest.raises(UsageError) as exc:
        pack_build(tar, tmp_path)
    assert exc.value.message == (
        f"--build {tar}: member 'd2/pwned-build' would be written through the link 'd2' (a chain of links can place "
        "files outside the build)"
    )
    assert "repack the build" in exc.value.hint


def test_pack_build_refuses_a_directory_with_an_escaping_relative_link(tmp_path: Path) -> None:
    build = tmp_path / "b"
    build.mkdir()
    (build / "up").symlink_to("../../etc")
    with pytest.raises(UsageError, match=r"symlink 'up' -> '../../etc' leads outside the build"):
        pack_build(build, tmp_path)
