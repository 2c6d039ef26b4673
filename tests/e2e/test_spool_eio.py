"""EIO on the spool's filesystem (adapted from the tester's variants16 test_variants16_eio.py): the host's orch_home
on an ext4 loop filesystem shut down (EXT4_IOC_SHUTDOWN: every later read and write fails with EIO) after the
first result is stored. Promised: the host's error names the path and the errno (EIO), no traceback, never
completed. Needs root and loop devices."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.killed_run import wait_first_result
from tests.plugins.sshd import SshdBed

pytestmark = [pytest.mark.sshd]

SLOWCASES = """\
name: slowcases
description: many short cases, one a second
command: ["sh", "-c", "sleep 1; echo v: {n}"]
params:
  n: {type: list, default: [1], help: "case"}
timeout_s: 60
repeat: 1
warmup: 0
parser: {name: regex, pattern: 'v: (?P<v>[0-9]+)'}
metrics:
  v: {path: v, unit: "1"}
"""

EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root, losetup and mkfs.ext4")
    img = tmp_path / "fs.img"
    with open(img, "wb") as f:
        f.truncate(32 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, timeout=120)
    mnt = tmp_path / "ext4"
    mnt.mkdir()
    res = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        pytest.skip(f"cannot loop-mount here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False, timeout=120)


def _shutdown(mnt: Path) -> None:
    fd = os.open(mnt, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
    finally:
        os.close(fd)


def _eio_run(sshd_bed: SshdBed | None, tmp_path: Path, ext4: Path) -> tuple[Orch, str, dict, str, Path]:  # type: ignore[type-arg]
    home = ext4 / "orch"
    home.mkdir()
    os.chown(home, os.getuid(), os.getgid())
    if sshd_bed is None:
        entry = {"connection": "local", "orch_home": str(home)}
    else:
        host = sshd_bed.add("gpu-a")
        entry = {"address": host.address, "port": host.port, "orch_home": str(home)}
    inv = {"defaults": {"python": sys.executable}, "groups": {"g": {"hosts": {"gpu-a": entry}}}}
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    orch = Orch(tmp_path / "inventory.yaml", f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slowcases.yaml").write_text(SLOWCASES)
    proc = orch.popen("run", "slowcases", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set",
                      "n=" + ",".join(str(i) for i in range(1, 41)), "--json")  # fmt: skip
    store = Store.from_url(orch.db_url)
    try:
        rid = wait_first_result(store, proc)
        _shutdown(ext4)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()
    return orch, rid, json.loads(out), err, home


def test_spool_filesystem_gives_eio_mid_run(sshd_bed: SshdBed, tmp_path: Path, ext4: Path) -> None:
    """Variant of kind 7: EIO on the spool's filesystem mid-run. Promised: the host fails naming the path under
    orch_home and EIO; no traceback (not even its frames in the error); not completed."""
    orch, rid, doc, err, home = _eio_run(sshd_bed, tmp_path, ext4)
    out = json.dumps(doc)
    (h,) = doc["hosts"]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    assert "Traceback" not in err + out, err[-3000:]
    assert 'File "' not in h["error"] and "new_lines" not in h["error"], h["error"]
    assert "EIO" in h["error"] and str(home) in h["error"], h["error"]


def test_resume_on_a_spool_filesystem_giving_eio(sshd_bed: SshdBed, tmp_path: Path, ext4: Path) -> None:
    """Variant of kinds 4/7: ``orch run --resume`` of that run while the spool's filesystem still gives EIO.
    Promised: the host fails naming the path and EIO, without a traceback; nothing new stored; not completed."""
    orch, rid, _doc, _err, home = _eio_run(sshd_bed, tmp_path, ext4)
    res = orch("run", "--resume", rid, "--suite-dir", str(tmp_path / "suites"), "--json", timeout=300)
    assert res.stdout.strip(), (res.returncode, res.stderr[-3000:])
    doc = json.loads(res.stdout)
    (h,) = doc["hosts"]
    assert res.returncode == 1 and doc["status"] != "completed" and h["status"] == "failed", doc
    assert "Traceback" not in res.stderr and 'File "' not in h["error"], h["error"]
    assert "EIO" in h["error"] and str(home) in h["error"], h["error"]


def test_local_host_spool_filesystem_gives_eio_mid_run(tmp_path: Path, ext4: Path) -> None:
    """Variant of kinds 6/7 on a ``connection: local`` host: EIO on its orch_home mid-run. Promised as over sshd."""
    _orch, _rid, doc, err, home = _eio_run(None, tmp_path, ext4)
    (h,) = doc["hosts"]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    assert "Traceback" not in err and 'File "' not in h["error"], h["error"]
    assert "EIO" in h["error"] and str(home) in h["error"], h["error"]
