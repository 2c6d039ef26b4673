"""Agent pieces on the host, with real files, locks and processes: whole-line spool writes on a full disk, the
reserved reason file, GPU leases (flock) and their listing in the facts, the guardian reaping a killed worker's
children. The end-to-end forms over real sshd are in tests/e2e/test_host_side.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent import fatal, leases, sysinfo
from agents.orch_agent.runs import pid_alive
from agents.orch_agent.spool import Spool, SpoolWriteError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root only), for ENOSPC."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_spool_on_a_full_disk_takes_the_line_back_and_names_path_and_errno(full_fs: Path) -> None:
    path = full_fs / "events.jsonl"
    reason = full_fs / "reason"
    fatal.reserve(str(reason))
    with Spool(str(path)) as sp:
        sp.append("hello", run_id="r", facts={}, cases_total=1)
        _fill(full_fs / "filler")
        with pytest.raises(SpoolWriteError) as info:
            for i in range(10_000):  # the file's last page has some room: fill it, then the next line fails
                sp.append("log", level="info", message="m" * 1000 + str(i))
        size = path.stat().st_size
        with pytest.raises(SpoolWriteError):
            sp.append("log", level="info", message="m" * 5000)
        assert path.stat().st_size == size
    assert str(info.value) == f"cannot write {path}: No space left on device (ENOSPC)"
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    docs = [json.loads(x) for x in raw.splitlines()]
    assert [d["seq"] for d in docs] == list(range(len(docs))) and len(docs) > 1
    # the reserved reason file takes the last words without growing
    assert fatal.record(str(reason), f"the agent worker stopped: {info.value}")
    assert fatal.read_reason(str(reason)) == f"the agent worker stopped: {info.value}"
    assert reason.stat().st_size == fatal.REASON_BYTES


def test_reason_is_cut_to_fit_and_blank_means_none(tmp_path: Path) -> None:
    p = tmp_path / "reason"
    fatal.reserve(str(p))
    assert fatal.read_reason(str(p)) is None
    assert fatal.record(str(p), "x" * 10_000)
    got = fatal.read_reason(str(p))
    assert got is not None and got.endswith("...") and len(got) < fatal.REASON_BYTES
    assert p.stat().st_size == fatal.REASON_BYTES
    assert fatal.read_reason(str(tmp_path / "missing")) is None


@pytest.fixture
def lease_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "leases"
    monkeypatch.setenv("ORCH_LEASE_DIR", str(d))
    return d


def test_lease_is_exclusive_names_its_holder_and_waits(lease_dir: Path) -> None:
    held = leases.acquire(["GPU-b", "GPU-a"])
    assert sorted(held) == ["GPU-a", "GPU-b"]
    assert (lease_dir.stat().st_mode & 0o7777) == 0o1777
    assert ((lease_dir / "GPU-a.lock").stat().st_mode & 0o777) == 0o666
    leases.write_record(held["GPU-b"], {"gpu": "GPU-b", "run_id": "r1", "user": "alice", "host": "n1",
                                        "started_by": "alice@laptop", "started": "2026-11-30T07:00:00Z"})  # fmt: skip
    with pytest.raises(leases.LeaseBusy) as busy:  # a second holder in the same process: flock is per open file
        leases.acquire(["GPU-b"])
    assert str(busy.value) == (
        "GPU GPU-b is in use by run r1 (started by alice@laptop, running as alice on n1, since 2026-11-30T07:00:00Z)"
    )
    # nothing of a refused set stays locked
    other = leases.acquire(["GPU-c"])
    with pytest.raises(leases.LeaseBusy):
        leases.acquire(["GPU-c", "GPU-b"])
    leases.release(other)
    leases.release(leases.acquire(["GPU-c"]))

    waited: list[str] = []
    threading.Timer(1.0, leases.release, args=(held,)).start()
    t0 = time.monotonic()
    got = leases.acquire(["GPU-a", "GPU-b"], wait_s=60, on_wait=lambda b: waited.append(b.gpu))
    assert waited == ["GPU-a"] and time.monotonic() - t0 >= 0.5
    leases.release(got)


def test_facts_list_held_and_stale_leases(lease_dir: Path) -> None:
    held = leases.acquire(["GPU-held", "GPU-dead", "GPU-clean"])
    for u, fd in held.items():
        leases.write_record(fd, {"gpu": u, "run_id": f"run-{u}", "pid": 1234})
    leases.release({"GPU-dead": held.pop("GPU-dead")})  # its holder died: the lock is free, the record stays
    leases.clear_records([str(lease_dir / "GPU-clean.lock")], 1234)  # a finished holder blanks its record
    leases.release({"GPU-clean": held.pop("GPU-clean")})
    facts = sysinfo._leases()
    assert facts["dir"] == str(lease_dir)
    assert [(e["gpu"], e["run_id"], e["pid"]) for e in facts["held"]] == [("GPU-held", "run-GPU-held", 1234)]
    assert [(e["gpu"], e["run_id"]) for e in facts["stale"]] == [("GPU-dead", "run-GPU-dead")]
    leases.release(held)
    assert sysinfo._leases()["held"] == []


def test_gpu_uuids_from_facts_and_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    csv = (
        "name, uuid, driver_version, memory.total [MiB]\n"
        "NVIDIA H200, GPU-bbb, 570.86, 143771 MiB\n"
        "NVIDIA H200, GPU-aaa, 570.86, 143771 MiB\n"
        "WARNING: infoROM is corrupted at gpu 0000:0B:00.0\n"
    )
    facts = {"nvidia_smi": {"found": True, "rc": 0, "stdout": csv, "stderr": ""}}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert leases.gpu_uuids(facts) == ["GPU-aaa", "GPU-bbb"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert leases.gpu_uuids(facts) == ["GPU-aaa"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bb")
    assert leases.gpu_uuids(facts) == ["GPU-bbb"]
    no_gpu = {"nvidia_smi": {"found": False, "rc": None, "stdout": "", "stderr": "nvidia-smi not found on PATH"}}
    assert leases.gpu_uuids(no_gpu) == []


GRANDCHILD_CASE = """
import json, sys
from agents.orch_agent.benches import Context, load
from agents.orch_agent import reaper
reaper.start_guardian(poll_s=0.2)
ctx = Context(repeat=1, warmup=0, run_dir=sys.argv[1])
load("command")({"argv": ["sh", "-c", "sleep %s & sleep %s"], "timeout_s": 600}, ctx)
"""


def test_guardian_kills_every_process_of_a_sigkilled_worker(tmp_path: Path) -> None:
    """A stand-in worker (a session leader running a command whose shell leaves a background child) is
    SIGKILLed: its guardian kills the rest of the session."""
    secs = f"{600 + os.getpid() % 100}.{int(time.time() * 1000) % 1000:03d}"
    worker = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD_CASE % (secs, secs), str(tmp_path)],
        cwd=ROOT, start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip

    def sleeps() -> list[int]:
        out = subprocess.run(["pgrep", "-f", f"sleep {secs}"], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    try:
        deadline = time.monotonic() + 60
        while len(sleeps()) < 2:
            assert time.monotonic() < deadline, "the command did not start"
            time.sleep(0.1)
        children = sleeps()
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(pid_alive(p) for p in children):
            assert time.monotonic() < deadline, f"left behind: {[p for p in children if pid_alive(p)]}"
            time.sleep(0.1)
    finally:
        for p in sleeps():
            os.kill(p, signal.SIGKILL)


def test_the_deployed_agent_and_builds_are_found_in_the_login_home_whatever_orch_home_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's host with ``orch_home: /scratch/orch``: doctor said "no agent deployed" after every ``orch
    deploy``, which puts agents and builds under ``~/.orch`` (remote/deploy_helper.home) while the facts looked
    under ``orch_home``. ``home`` (where runs go) is still ``orch_home``."""
    from agents.orch_agent import sysinfo

    monkeypatch.setenv("HOME", str(tmp_path / "login"))
    sha, build = "a" * 64, "b" * 64
    (tmp_path / "login" / ".orch" / "agent" / sha).mkdir(parents=True)
    (tmp_path / "login" / ".orch" / "agent" / sha / "agent.pyz").write_bytes(b"PK")
    (tmp_path / "login" / ".orch" / "builds" / build).mkdir(parents=True)
    (tmp_path / "login" / ".orch" / "builds" / "current").symlink_to(build)
    scratch = tmp_path / "scratch" / "orch"
    scratch.mkdir(parents=True)
    got = sysinfo._orch(str(scratch))
    assert got == {"home": str(scratch), "agents": [sha], "builds": [build], "current_build": build}
