"""The host side of a run over real sshd: the spec by stdin, children that die with the worker, named write errors,
outputs kept on the host, per-host run state in a shared home, GPU leases, and ``orch_home:``.

Suites here are small ``command`` suites (no torch): ``sh``/``yes``/``sleep`` stand in for an engine's benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed, SshdHost

pytestmark = [pytest.mark.sshd]

LINE = "0123456789" * 4  # 40 characters; `yes` prints it with a newline: 41 bytes a line

SUITES = {
    "big-output.yaml": f"""\
name: big-output
description: prints LINES lines of 40 characters, then the figure N
command: ["sh", "-c", "yes {LINE} | head -n {{lines}}; echo 'tput: {{n}}'"]
params:
  n: {{type: list, default: [1, 2, 3], help: "the figure printed"}}
  lines: {{type: int, default: 500, min: 0, help: "lines printed before it"}}
parser: {{name: regex, pattern: 'tput: (?P<tput>\\d+)'}}
metrics:
  tput: {{path: tput, unit: tok/s}}
warmup: 0
repeat: 1
timeout_s: 120
""",
    "sleeper.yaml": """\
name: sleeper
description: a command that leaves a background child (sleep SECS &) and waits on a second one
command: ["sh", "-c", "sleep {secs} & sleep {secs}; echo 'tput: 1'"]
params:
  secs: {type: str, default: "1", help: "seconds each sleep takes"}
  n: {type: list, default: [1, 2], help: "cases"}
  token: {type: str, default: "none", help: "a secret for the environment: must never show in ps"}
env: {ORCH_TEST_TOKEN: "{token}"}
parser: {name: regex, pattern: 'tput: (?P<tput>\\d+)'}
metrics:
  tput: {path: tput, unit: tok/s}
warmup: 0
repeat: 1
timeout_s: 900
""",
}


def _write_suites(tmp_path: Path, extra: dict[str, str] | None = None) -> Path:
    d = tmp_path / "suites"
    d.mkdir(exist_ok=True)
    for name, text in {**SUITES, **(extra or {})}.items():
        (d / name).write_text(text)
    return d


def _inventory(tmp_path: Path, hosts: list[tuple[SshdHost, dict[str, Any]]]) -> Path:
    doc = {
        "defaults": {"python": sys.executable},
        "groups": {"bed": {"hosts": {h.name: {"address": h.address, "port": h.port, **extra} for h, extra in hosts}}},
    }
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _orch(tmp_path: Path, hosts: list[tuple[SshdHost, dict[str, Any]]]) -> Orch:
    return Orch(_inventory(tmp_path, hosts), f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


def _wait(pred: Any, what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def _pgrep(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if "pgrep" not in ln]


def _run_dir(home: Path, run_id: str, host: str) -> Path:
    return home / ".orch" / "runs" / run_id / host


def _latest_run_id(orch: Orch) -> str | None:
    try:
        page = Store.from_url(orch.db_url).list_runs(limit=1)
    except Exception:  # noqa: BLE001 - the schema is not there yet
        return None
    return page.items[0].id if page.total else None


def _spool(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), "the spool ends in half a line"
    docs = [json.loads(x) for x in raw.splitlines()]
    assert [d["seq"] for d in docs] == list(range(len(docs)))
    return docs


@pytest.fixture
def fake_gpu(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A fake ``nvidia-smi`` (one GPU with a fresh UUID) and a private lease directory, as host environment."""
    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    gpu = f"GPU-{uuid.uuid4()}"
    smi = bindir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "echo 'name, uuid, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.memory [MHz], "
        "ecc.mode.current, pci.bus_id'\n"
        f"echo 'NVIDIA H200, {gpu}, 570.86.15, 143771 MiB, 1980 MHz, 3201 MHz, Enabled, 00000000:19:00.0'\n"
    )
    smi.chmod(0o755)
    leases = tmp_path / "leases"
    yield {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "ORCH_LEASE_DIR": str(leases), "gpu": gpu}


def _gpu_host(bed: SshdBed, name: str, env: dict[str, str]) -> SshdHost:
    h = bed.add(name, start=False)
    h.env = {k: v for k, v in env.items() if k != "gpu"}
    h.start()
    return h


def test_large_outputs_stay_on_the_host_all_results_stored_and_logs_fetch_them(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """~20 KB per run, --repeat 300, 3 cases: every result stored from small lines; the full output retrievable."""
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    suites = _write_suites(tmp_path)
    doc = orch.json("run", "big-output", "--hosts", "gpu-a", "--suite-dir", str(suites), "--repeat", "300",
                    timeout=900)  # fmt: skip
    assert doc["status"] == "completed", doc
    assert doc["hosts"][0]["results"] == 3
    run_id = doc["run_id"]
    expected = (LINE + "\n").encode() * 500
    rows = Store.from_url(orch.db_url).results(run_id, limit=10, samples=True).items
    assert sorted(r.case["n"] for r in rows) == [1, 2, 3]
    for r in rows:
        assert r.metrics["tput"]["value"] == r.case["n"] and r.metrics["tput"]["n"] == 300
        assert r.info is not None and len(r.info["files"]) == 300
        out = expected + f"tput: {r.case['n']}\n".encode()
        assert {f["stdout"]["sha256"] for f in r.info["files"]} == {hashlib.sha256(out).hexdigest()}
        assert {f["stdout"]["bytes"] for f in r.info["files"]} == {len(out)}
    spool = _run_dir(host.home, run_id, "gpu-a") / "events.jsonl"
    assert max(len(x) for x in spool.read_bytes().splitlines()) < 128 * 1024  # 300 x 20 KB stayed out of it

    case = next(r for r in rows if r.case["n"] == 2)
    logs = orch.json("runs", "logs", run_id, "--case", "1", "--host", "gpu-a")
    (h,) = logs["hosts"]
    assert h["host"] == "gpu-a" and h["error"] is None
    (c,) = h["cases"]
    assert c["case_index"] == 1 and len(c["runs"]) == 300
    want = (expected + b"tput: 2\n").decode()
    assert all(r["stdout"]["text"] == want for r in c["runs"])
    assert c["runs"][299]["stdout"]["sha256"] == case.info["files"][299]["stdout"]["sha256"]  # type: ignore[index]
    human = orch("runs", "logs", run_id, "--case", "0")
    assert human.returncode == 0, human.stderr
    header = f"==> gpu-a case 0 run 299 stdout ({len(expected) + 8} bytes, sha256 "
    assert header in human.stdout and human.stdout.count(LINE) == 300 * 500

    # the API route fetches the same from the host
    from fastapi.testclient import TestClient

    from orchestrator.api.app import create_app
    from orchestrator.settings import Settings

    with TestClient(create_app(Settings(db_url=orch.db_url, inventory=orch.inventory))) as client:
        r = client.get(f"/api/v1/runs/{run_id}/logs", params={"host": "gpu-a", "case": 2})
        assert r.status_code == 200, r.text
        (api_case,) = r.json()["hosts"][0]["cases"]
        assert api_case["case_index"] == 2 and len(api_case["runs"]) == 300
        assert api_case["runs"][0]["stdout"]["text"] == (expected + b"tput: 3\n").decode()
        empty = hashlib.sha256(b"").hexdigest()
        assert api_case["runs"][0]["stderr"] == {"text": "", "encoding": "utf-8", "bytes": 0, "sha256": empty,
                                                 "check": "ok", "stored": {"bytes": 0, "sha256": empty}}  # fmt: skip
        bad = client.get(f"/api/v1/runs/{run_id}/logs", params={"host": "gpu-z"})
        assert bad.status_code == 400 and "not part of run" in bad.json()["detail"]


def test_sigkilled_worker_leaves_no_process_and_a_stale_lease(
    sshd_bed: SshdBed, tmp_path: Path, fake_gpu: dict[str, str]
) -> None:
    host = _gpu_host(sshd_bed, "gpu-a", fake_gpu)
    orch = _orch(tmp_path, [(host, {})])
    suites = _write_suites(tmp_path)
    secs = f"{700 + random.random() * 100:.4f}"  # names this test's sleeps in the process table
    proc = orch.popen("run", "sleeper", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", f"secs={secs}",
                      "--set", "token=x", "--json")  # fmt: skip
    try:
        _wait(lambda: len(_pgrep(f"sleep {secs}")) >= 2, "the command and its background child")
        run_id = _latest_run_id(orch)
        assert run_id
        rd = _run_dir(host.home, run_id, "gpu-a")
        worker = int((rd / "pid").read_text())
        os.kill(worker, signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    _wait(lambda: not _pgrep(f"sleep {secs}"), "the benchmark's processes to die", timeout=60)
    _wait(lambda: not _pgrep(f"run-id {run_id}"), "the worker's guardian to exit", timeout=60)  # forked: start's argv
    assert proc.returncode == 1
    (h,) = json.loads(out)["hosts"]
    assert h["status"] == "failed"
    assert "exited without finishing and recorded no reason" in h["error"]
    # the lock went with the worker; its record stays: doctor shows it as stale, naming the dead run
    gpus = next(c for c in orch.json("doctor", expect_rc=None)["hosts"][0]["checks"] if c["name"] == "gpus")
    assert gpus["leases"]["held"] == []
    (stale,) = gpus["leases"]["stale"]
    assert stale["gpu"] == fake_gpu["gpu"] and stale["run_id"] == run_id and stale["pid"] == worker
    assert gpus["status"] == "warn" and "stale lease (holder dead)" in gpus["detail"]


def test_cancel_kills_the_commands_children_too(sshd_bed: SshdBed, tmp_path: Path) -> None:
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    suites = _write_suites(tmp_path)
    secs = f"{800 + random.random() * 100:.4f}"
    proc = orch.popen("run", "sleeper", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", f"secs={secs}",
                      "--set", "token=x", "--json")  # fmt: skip
    try:
        _wait(lambda: len(_pgrep(f"sleep {secs}")) >= 2, "the command and its background child")
        run_id = _latest_run_id(orch)
        assert run_id
        res = orch("cancel", run_id, "--json")
        assert res.returncode == 0, res.stderr
        _wait(lambda: not _pgrep(f"sleep {secs}"), "the benchmark's processes to die", timeout=60)
        proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not _pgrep(f"run-id {run_id}")  # the worker and its guardian, forked from start, have start's argv


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test (root only): a disk that fills up."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


FILLER = """\
import sys
f = open(sys.argv[1], "ab")
try:
    while True:
        f.write(b"x" * 65536)
        f.flush()
except OSError:
    pass
sys.exit(3)
"""


def test_a_full_disk_is_named_and_the_spool_keeps_whole_lines(
    sshd_bed: SshdBed, tmp_path: Path, small_fs: Path
) -> None:
    """orch_home on a 1 MiB tmpfs; each case fills it and fails: the spool runs out of room mid-run."""
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {"orch_home": str(small_fs / "orch")})])
    filler = tmp_path / "filler.py"
    filler.write_text(FILLER)
    suite = f"""\
name: filler
description: fills the disk, then fails
command: ["{sys.executable}", "{filler}", "{small_fs / 'filler'}"]
params:
  n: {{type: list, default: [1], help: "cases"}}
parser: {{name: regex, pattern: 'tput: (?P<tput>\\d+)'}}
metrics:
  tput: {{path: tput, unit: tok/s}}
warmup: 0
repeat: 1
"""
    suites = _write_suites(tmp_path, {"filler.yaml": suite})
    res = orch("run", "filler", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set",
               "n=" + ",".join(str(i) for i in range(200)), "--json")  # fmt: skip
    assert res.returncode == 1, res.stderr[-2000:]
    (h,) = json.loads(res.stdout)["hosts"]
    run_id = json.loads(res.stdout)["run_id"]
    spool = small_fs / "orch" / "runs" / run_id / "gpu-a" / "events.jsonl"
    assert h["status"] == "failed"
    assert f"cannot write {spool}: No space left on device (ENOSPC)" in h["error"], h["error"]
    docs = _spool(spool)  # whole lines only: the failed line was taken back
    assert len(docs) < 200
    if docs[-1]["type"] == "done":  # the short done line may still fit where the lost line did not: it says why
        assert docs[-1]["status"] == "failed" and "No space left on device (ENOSPC)" in docs[-1]["reason"]
    human = orch("run", "filler", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", "n=1")
    said = " ".join((human.stdout + human.stderr).split())  # prose wraps at the width: a long tmp path moves the break
    assert "No space left on device" in said, human.stdout + human.stderr
    assert "memory and dmesg" not in human.stdout + human.stderr


def test_2000_case_sweep_starts_with_the_spec_on_stdin_never_in_ps(sshd_bed: SshdBed, tmp_path: Path) -> None:
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    token = f"tok-{uuid.uuid4().hex}"
    suites = _write_suites(tmp_path, {"sleeper.yaml": SUITES["sleeper.yaml"].replace("{token}", token)})
    sweep = "n=" + ",".join(str(i) for i in range(1, 2001))
    proc = orch.popen("run", "sleeper", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", sweep,
                      "--set", "secs=0", "--json")  # fmt: skip
    try:
        store = Store.from_url(orch.db_url)
        run_id = _wait(lambda: (rid := _latest_run_id(orch)) and store.get_run(rid).results >= 1 and rid,
                       "the first result", timeout=180)  # fmt: skip
        seen = []  # the token in any process's argv: ps shows it
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in argv:
                seen.append(argv[:200])
        assert seen == []
        rd = _run_dir(host.home, run_id, "gpu-a")
        assert len(json.loads((rd / "spec.json").read_text())["cases"]) == 2000
        assert (rd.stat().st_mode & 0o777) == 0o700
        for name in ("spec.json", "events.jsonl", "pid", "reason"):
            assert ((rd / name).stat().st_mode & 0o777) == 0o600, name
        assert orch("cancel", run_id).returncode == 0
        proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()


def _shared_home(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Path, Orch, Path]:
    """gpu-a and gpu-b, two sshd hosts whose home is one directory (an NFS home): ``(home, orch, suite dir)``."""
    shared = tmp_path / "nfs-home"
    shared.mkdir()
    hosts = []
    for name in ("gpu-a", "gpu-b"):
        h = sshd_bed.add(name, start=False)
        h.home = shared
        h.start()
        hosts.append(h)
    return shared, _orch(tmp_path, [(h, {}) for h in hosts]), _write_suites(tmp_path)


def test_two_hosts_sharing_one_home_run_one_run(sshd_bed: SshdBed, tmp_path: Path) -> None:
    shared, orch, suites = _shared_home(sshd_bed, tmp_path)
    doc = orch.json("run", "big-output", "--hosts", "bed", "--suite-dir", str(suites), "--set", "lines=3")
    assert doc["status"] == "completed", doc
    assert sorted((h["host"], h["status"], h["results"]) for h in doc["hosts"]) == [
        ("gpu-a", "completed", 3), ("gpu-b", "completed", 3),
    ]  # fmt: skip
    for name in ("gpu-a", "gpu-b"):
        assert _spool(_run_dir(shared, doc["run_id"], name) / "events.jsonl")[-1]["type"] == "done"
        assert next(h for h in doc["hosts"] if h["host"] == name)["state_dir"] == (
            f"~/.orch/runs/{doc['run_id']}/{name}/"
        )


def test_second_run_on_the_same_gpu_is_refused_then_waits(
    sshd_bed: SshdBed, tmp_path: Path, fake_gpu: dict[str, str]
) -> None:
    host = _gpu_host(sshd_bed, "gpu-a", fake_gpu)
    orch = _orch(tmp_path, [(host, {})])
    suites = _write_suites(tmp_path)
    sleeper = ("run", "sleeper", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", "token=x", "--json")
    first = orch.popen(*sleeper, "--set", "secs=600")
    waiter = None
    try:
        def held() -> list[dict[str, Any]]:
            checks = orch.json("doctor", expect_rc=None)["hosts"][0]["checks"]
            return next(c for c in checks if c["name"] == "gpus").get("leases", {}).get("held", [])

        (lease,) = _wait(held, "the first run's GPU lease")
        run1 = _latest_run_id(orch)
        assert run1 and lease["gpu"] == fake_gpu["gpu"] and lease["run_id"] == run1 and lease["user"] == "root"

        refused = orch(*sleeper, "--set", "secs=0")
        assert refused.returncode == 1, refused.stdout
        (h,) = json.loads(refused.stdout)["hosts"]
        assert h["status"] == "failed" and h["results"] == 0
        assert f"GPU {fake_gpu['gpu']} is in use by run {run1} (started by root@" in h["error"]
        assert f"running as root on gpu-a, since {lease['started']})" in h["error"]
        run2 = json.loads(refused.stdout)["run_id"]

        waiter = orch.popen(*sleeper, "--set", "secs=0", "--wait", "600")

        def waiting() -> str | None:
            rid = _latest_run_id(orch)
            if rid in (None, run1, run2):
                return None
            rd = _run_dir(host.home, rid, "gpu-a")  # type: ignore[arg-type]
            return rid if (rd / "spec.json").exists() and not (rd / "pid").exists() else None

        run3 = _wait(waiting, "the third run to wait for the GPU")
        time.sleep(2)
        assert not (_run_dir(host.home, run3, "gpu-a") / "pid").exists()  # still waiting: no worker yet
        assert orch("cancel", run1).returncode == 0
        first.communicate(timeout=240)
        out, err = waiter.communicate(timeout=600)
        assert waiter.returncode == 0, err[-2000:]
        assert json.loads(out)["status"] == "completed"
    finally:
        for p in (first, waiter):
            if p is not None and p.poll() is None:
                p.kill()
    done1 = _spool(_run_dir(host.home, run1, "gpu-a") / "events.jsonl")[-1]
    starts3 = [d for d in _spool(_run_dir(host.home, run3, "gpu-a") / "events.jsonl") if d["type"] == "case_start"]
    assert done1["type"] == "done" and starts3[0]["ts"] >= done1["ts"]  # no overlap: it ran after the first
    # a finished run leaves no lease record behind
    gpus = next(c for c in orch.json("doctor", expect_rc=None)["hosts"][0]["checks"] if c["name"] == "gpus")
    assert gpus["leases"] == {"dir": fake_gpu["ORCH_LEASE_DIR"], "held": [], "stale": []}


def test_local_host_keeps_its_state_where_orch_home_says(client_home: Any, tmp_path: Path) -> None:
    """21.7: ``connection: local`` and ``orch_home:``: nothing lands in the user's own ~/.orch/runs."""
    state = tmp_path / "node-local"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"groups": {"local": {"hosts": {"here": {
        "connection": "local", "python": sys.executable, "orch_home": str(state)}}}}}))  # fmt: skip
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = _write_suites(tmp_path)
    res = orch("run", "big-output", "--hosts", "here", "--suite-dir", str(suites), "--set", "lines=2")
    assert res.returncode == 0, res.stderr[-2000:]
    run_id = _latest_run_id(orch)
    assert run_id
    assert _spool(state / "runs" / run_id / "here" / "events.jsonl")[-1]["type"] == "done"
    assert not (client_home.home / ".orch" / "runs").exists()
    said = " ".join(res.stdout.split())  # free text wraps at words; a path is never broken
    assert f"run state (spool, spec, outputs) on the hosts: here: {state}/runs/{run_id}/here/" in said, res.stdout


@pytest.mark.parametrize("how", ["bind", "copy", "spool"])
def test_resume_never_stores_one_hosts_spool_as_another_hosts_in_a_shared_home(
    sshd_bed: SshdBed, tmp_path: Path, how: str
) -> None:
    """Two hosts of one run share an NFS home; orch dies mid-run. gpu-a's run directory mounted onto gpu-b's (or
    copied over it): ``orch run --resume`` followed gpu-a's spool as gpu-b's, since the spec in it names the same
    run. Now ``spec.json`` records the host it was written for: gpu-b fails naming gpu-a's files, none of them is
    stored as gpu-b's, and gpu-a's own results are all collected. Only the spool copied (``spool``): orch itself
    reads the hello at line 0, which names gpu-a."""
    from tests.e2e.test_pid_file_ssh import _bind
    from tests.plugins.timing import scaled

    shared, orch, suites = _shared_home(sshd_bed, tmp_path)
    secs = f"{4 + random.random():.4f}"
    proc = orch.popen("run", "sleeper", "--hosts", "bed", "--suite-dir", str(suites), "--set", f"secs={secs}",
                      "--json")  # fmt: skip
    try:
        run_id = _wait(lambda: _latest_run_id(orch), "the run", scaled(120))
        dirs = {name: _run_dir(shared, run_id, name) for name in ("gpu-a", "gpu-b")}
        _wait(lambda: all((d / "pid").is_file() for d in dirs.values()), "both workers", scaled(120))
    finally:
        proc.kill()  # orch's machine went down: the run stays running in the store, the workers go on
        proc.communicate()
    # a worker writes its pid file before it opens the spool: under load orch can be killed in between
    _wait(lambda: all((d / "events.jsonl").is_file() and b'"done"' in (d / "events.jsonl").read_bytes()
                      for d in dirs.values()), "both done", scaled(120))  # fmt: skip
    b_lines = (dirs["gpu-b"] / "events.jsonl").read_bytes()
    mounted = False
    if how == "bind":
        if not _bind(dirs["gpu-a"], dirs["gpu-b"]):
            pytest.skip("mount --bind is not allowed here")
        mounted = True
    else:
        for name in ("events.jsonl", "spec.json")[: 2 if how == "copy" else 1]:
            (dirs["gpu-b"] / name).write_bytes((dirs["gpu-a"] / name).read_bytes())
    store = Store.from_url(orch.db_url)
    stored_before = store.last_seq(run_id, "gpu-b")
    try:
        res = orch("run", "--resume", run_id, "--suite-dir", str(suites), "--json", timeout=scaled(300))
    finally:
        if mounted:
            subprocess.run(["umount", str(dirs["gpu-b"])], check=True)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(res.stdout)
    by_host = {h["host"]: h for h in doc["hosts"]}
    assert by_host["gpu-a"]["status"] == "completed" and by_host["gpu-a"]["results"] == 2, by_host
    b = by_host["gpu-b"]
    assert b["status"] == "failed", b
    if how == "spool":
        said = f"holds run {run_id} of host 'gpu-a' (its first line says so), not run {run_id} of gpu-b"
    else:
        said = f"the run directory {dirs['gpu-b']} holds host 'gpu-a''s files of run {run_id!r}"
    assert said in b["error"], b
    try:
        assert store.last_seq(run_id, "gpu-b") == stored_before  # not one line of gpu-a's stored as gpu-b's
    finally:
        store.close()
    assert (dirs["gpu-b"] / "events.jsonl").read_bytes() == (b_lines if how == "bind" else
                                                              (dirs["gpu-a"] / "events.jsonl").read_bytes())


def test_a_run_whose_orch_process_died_says_so_with_the_resume_command(sshd_bed: SshdBed, tmp_path: Path) -> None:
    """orch killed mid-run (its terminal closed, the OOM killer): the run stayed ``running`` in `orch runs show`
    forever, with nothing saying that no one collects it. Now the run records the orch process driving it;
    `runs show` names it gone and gives `orch run --resume`, which collects the rest; a run being driven, or
    finished, says nothing of the kind."""
    from orchestrator.store.compute import short_run_id
    from tests.plugins.timing import scaled

    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    suites = _write_suites(tmp_path)
    # two cases of this many seconds: long enough that the run is still going when the check below (an orch
    # runs show, seconds under load) is done and orch is killed (3 s was not, at load 6)
    secs = f"{scaled(10) + random.random():.4f}"
    proc = orch.popen("run", "sleeper", "--hosts", "bed", "--suite-dir", str(suites), "--set", f"secs={secs}",
                      "--json")  # fmt: skip
    try:
        run_id = _wait(lambda: _latest_run_id(orch), "the run", scaled(120))
        _wait(lambda: (_run_dir(host.home, run_id, "gpu-a") / "pid").is_file(), "the worker", scaled(120))
        live = orch.json("runs", "show", run_id)
        assert live["run"]["status"] == "running" and live["orphaned"] is None, live["orphaned"]
    finally:
        proc.kill()
        proc.communicate()
    shown = orch("runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert f"warning: run {short_run_id(run_id)} is marked running, but" in text and (
        f"is marked running, but the orch process that drove it (pid {proc.pid} on {os.uname().nodename}) is gone: "
        "nothing is collecting its results") in text, shown.stdout
    assert f"orch run --resume {run_id}" in text and f"orch cancel {run_id}" in text, shown.stdout
    doc = orch.json("runs", "show", run_id)
    assert f"pid {proc.pid}" in doc["orphaned"]["warning"], doc["orphaned"]
    # the runs list says it too (it showed the run as any other running one)
    listed = orch("runs", "list")
    text = " ".join(listed.stdout.split())
    assert listed.returncode == 0 and (f"warning: run {short_run_id(run_id)} is marked running, but the orch "
                                       f"process that drove it (pid {proc.pid}") in text, listed.stdout  # fmt: skip
    assert f"orch run --resume ID (for {short_run_id(run_id)})" in text, listed.stdout
    item = next(i for i in orch.json("runs", "list")["items"] if i["id"] == run_id)
    assert f"pid {proc.pid}" in item["orphaned"]["warning"], item
    spool = _run_dir(host.home, run_id, "gpu-a") / "events.jsonl"
    _wait(lambda: spool.is_file() and b'"done"' in spool.read_bytes(), "the agent's done line", scaled(120))
    done_ts = json.loads(spool.read_bytes().splitlines()[-1])["ts"]
    time.sleep(1.5)  # the collection comes later than the agent's end
    done = orch.json("run", "--resume", run_id, "--suite-dir", str(suites), timeout=scaled(300))
    assert done["status"] == "completed" and done["hosts"][0]["results"] == 2, done
    after = orch.json("runs", "show", run_id)
    assert after["orphaned"] is None and after["run"]["status"] == "completed"
    assert "warning" not in orch("runs", "list").stdout
    # the run ended when its agent wrote done, not when the resume collected it (it said the collection time)
    from orchestrator.store.repo import Store

    store = Store.from_url(orch.db_url)
    try:
        detail = store.get_run(run_id)
        hr = detail.host_run("gpu-a")
        assert hr is not None and hr.finished_at is not None and detail.finished_at is not None
        assert abs(hr.finished_at.timestamp() - done_ts) < 1e-3, (hr.finished_at, done_ts)
        assert detail.finished_at == hr.finished_at
    finally:
        store.close()
