"""Variants (issue 10, kind 4): ``orch run --resume`` when the host's spool was replaced by something that is not
a regular file — a directory, a FIFO, a symbolic link to /dev/zero (an endless line without a newline) or to
another file. Promised: the host is named with what happened (no traceback, no hang), nothing new stored, the run
not completed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import _plant, _result, _spool
from tests.plugins.sshd import SshdBed, SshdHost

pytestmark = [pytest.mark.sshd]


@pytest.fixture
def bed(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Orch, SshdHost]:
    a = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [a]}))
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    s = Store.from_url(url)
    s.upgrade()
    s.close()
    return Orch(inv, url, tmp_path), a


LIMIT_KB = 1024 * 1024  # 1 GiB


def _guard_memory(proc, rid: str) -> str | None:  # type: ignore[no-untyped-def]
    """Wait for ``proc`` (at most 400 s); meanwhile SIGKILL any process of this run (its id in the command line)
    whose RSS passes 1 GiB and say which."""
    deadline = time.monotonic() + 400
    while proc.poll() is None and time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                if rid.encode() not in cmd or int(pid) == proc.pid:
                    continue
                rss = int(next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines()
                               if x.startswith("VmRSS:")).split()[1])  # fmt: skip
            except (OSError, StopIteration, ValueError):
                continue
            if rss > LIMIT_KB:
                os.kill(int(pid), signal.SIGKILL)
                words = cmd.decode(errors="replace").split("\0")
                tree = next((w for w in words if w.endswith("/tree")), words[0])
                shown = " ".join(words[words.index(tree) + 1 :][:2])
                return f"pid {pid} (the agent's `{shown} ...`) at {rss // 1024} MiB"
        time.sleep(0.5)
    if proc.poll() is None:
        proc.kill()
    return None


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink-dev-zero", "symlink-elsewhere", "sparse-3gb-tail"])
def test_variant_resume_when_the_spool_is_not_a_regular_file(bed: tuple[Orch, SshdHost], tmp_path: Path,
                                                             kind: str) -> None:  # fmt: skip
    orch, host = bed
    rid = _plant(orch, host, _spool([_result(1, 1), _result(2, 2)])[:2])  # hello and one result, no done
    spool = host.home / ".orch" / "runs" / rid / host.name / "events.jsonl"
    saved = tmp_path / "saved.jsonl"
    shutil.copy(spool, saved)
    if kind == "sparse-3gb-tail":  # a regular file: hello, a result, then 3 GiB of NULs without a newline (sparse)
        with spool.open("r+b") as f:
            f.truncate(spool.stat().st_size + 3 * 2**30)
    else:
        spool.unlink()
    if kind == "sparse-3gb-tail":
        pass
    elif kind == "directory":
        spool.mkdir()
    elif kind == "fifo":
        os.mkfifo(spool)
    elif kind == "symlink-dev-zero":
        spool.symlink_to("/dev/zero")
    else:
        spool.symlink_to(saved)
    proc = orch.popen("run", "--resume", rid, "--json")
    hog = _guard_memory(proc, rid)  # an agent reading /dev/zero whole took 12.6 GB in a minute: never let it run on
    out, err = proc.communicate(timeout=60)
    assert hog is None, f"the host's agent read the spool into memory: {hog}"
    assert "Traceback" not in err, err[-3000:]
    doc = json.loads(out)
    res = proc
    (h,) = doc["hosts"]
    assert res.returncode == 1 and doc["status"] != "completed" and h["status"] == "failed", doc
    assert 'File "' not in (h["error"] or ""), h["error"]
    assert "events.jsonl" in (h["error"] or ""), h["error"]
    if kind in ("symlink-elsewhere", "sparse-3gb-tail"):
        return  # the same bytes behind a link: following it is not promised against; only the loud end is
    s = Store.from_url(orch.db_url)
    try:
        assert [(r.seq, r.status) for r in s.results(rid, limit=10).items] == [], "nothing was stored before"
    finally:
        s.close()
