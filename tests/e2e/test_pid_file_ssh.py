"""A run directory on the host whose worker pid file is missing, empty or garbage, over real sshd: ``orch run
--resume`` and ``orch cancel`` said the run's spool was gone although ``events.jsonl`` was there. Now the host is
named for what it is (the pid file at its path; the spool still there, collected as far as it goes; the worker's
state unknown), and the lines the spool holds are stored."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.cancel_counts import latest_run
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import _collect, _plant, _result, _spool
from tests.plugins.sshd import SshdBed, SshdHost
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]


@pytest.fixture
def one_host(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Orch, SshdHost]:
    """One sshd host (gpu-a in group ct200) and orch on a migrated SQLite store."""
    host = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [host]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    store = Store.from_url(orch.db_url)
    store.upgrade()
    store.close()
    return orch, host


def _planted(orch: Orch, host: SshdHost, pid_text: str | None) -> tuple[str, Path]:
    """A run whose spool on the host holds hello and one result (no done: the worker's end is not known) and whose
    ``pid`` file holds ``pid_text`` (None: no pid file)."""
    rid = _plant(orch, host, _spool([_result(1, 1), _result(2, 2)])[:2])
    run_dir = host.home / ".orch" / "runs" / rid / host.name
    if pid_text is not None:
        (run_dir / "pid").write_text(pid_text)
    return rid, run_dir


@pytest.mark.parametrize(("pid_text", "said"), [(None, "is missing"), ("", "is empty"),
                                                 ("garbage\n", "holds 'garbage', not a pid")])  # fmt: skip
def test_resume_names_the_pid_file_and_collects_the_spool(
    one_host: tuple[Orch, SshdHost], pid_text: str | None, said: str
) -> None:
    orch, host = one_host
    rid, run_dir = _planted(orch, host, pid_text)
    doc = _collect(orch, rid, 1)
    [h] = doc["hosts"]
    assert h["status"] == "failed" and h["results"] == 1, doc  # the one result the spool holds is stored
    assert h["error"].startswith(f"the worker's pid file {run_dir / 'pid'} {said}: the worker's state is unknown; "
                                 f"the spool {run_dir / 'events.jsonl'} is still there (2 lines"), h  # fmt: skip
    assert "gone" not in h["error"] and "OOM" not in h["error"] + (h["hint"] or ""), h


def test_cancel_names_the_pid_file_not_a_gone_spool(one_host: tuple[Orch, SshdHost]) -> None:
    orch, host = one_host
    rid, run_dir = _planted(orch, host, None)
    res = orch("cancel", rid, "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]  # the stop failed there: named, exit 1
    [h] = json.loads(res.stdout)["hosts"]
    assert h["status"] == "failed" and "gone" not in h["error"], h
    assert f"the worker's pid file {run_dir / 'pid'} is missing: the worker's state is unknown" in h["error"], h
    assert (run_dir / "events.jsonl").read_text().count("\n") == 2  # no done written while a worker may write
    store = Store.from_url(orch.db_url)
    try:
        assert store.get_run(rid).host_run(host.name).status == "cancelled"  # type: ignore[union-attr]
    finally:
        store.close()


SLEEPER = """\
name: pid-sleeper
description: one case that sleeps SECS
command: ["sleep", "{secs}"]
params:
  secs: {type: str, default: "1", help: "seconds the case sleeps"}
parser: {name: regex, pattern: 'tput: (?P<tput>\\d+)'}
metrics:
  tput: {path: tput, unit: tok/s}
warmup: 0
repeat: 1
timeout_s: 1800
"""


@dataclass
class _TwoRuns:
    """Two runs of pid-sleeper on one host, A then B, each with its own sleep length (so ``ps`` tells them apart):
    the running ``orch run`` processes, the run ids, the workers' pids and the sleep lengths, in that order."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    workers: list[int] = field(default_factory=list)
    secs: list[str] = field(default_factory=list)

    def dirs(self, host: SshdHost) -> list[Path]:
        return [host.home / ".orch" / "runs" / r / host.name for r in self.runs]


@pytest.fixture
def two_runs(one_host: tuple[Orch, SshdHost], tmp_path: Path) -> Iterator[tuple[Orch, SshdHost, Store, _TwoRuns]]:
    """A and B started on the one host and their workers seen; everything they started is killed at the end."""
    from tests.e2e.test_cancel_ssh import _in_sessions, _kill, _sleeps

    orch, host = one_host
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "pid-sleeper.yaml").write_text(SLEEPER)
    store = Store.from_url(orch.db_url)
    two = _TwoRuns()
    try:
        for _ in range(2):
            s = f"{1200 + random.random() * 100:.4f}"
            two.secs.append(s)
            two.procs.append(orch.popen("run", "pid-sleeper", "--hosts", "ct200", "--suite-dir", str(suites),
                                        "--set", f"secs={s}", "--timeout", str(scaled(30)), "--json"))  # fmt: skip
            proc = two.procs[-1]
            wait_for(lambda s=s, p=proc: _sleeps(s) or p.poll() is not None, timeout_s=180, what=f"sleep {s}")
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            two.runs.append(wait_for(lambda: (r := latest_run(store)) not in two.runs and r, timeout_s=60,
                                     what="the run"))  # fmt: skip
            pid_file = host.home / ".orch" / "runs" / two.runs[-1] / host.name / "pid"
            two.workers.append(int(wait_for(lambda p=pid_file: p.is_file() and p.read_text().strip(), timeout_s=60,
                                            what="the worker's pid")))  # fmt: skip
        yield orch, host, store, two
    finally:
        for proc in two.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()  # also for one that ended by itself: its pipes are closed here, not by the GC
        _kill({p[0] for p in _in_sessions(set(two.workers))} | {p for s in two.secs for p in _sleeps(s)})
        store.close()


def test_cancel_of_a_run_whose_pid_files_link_to_another_runs_leaves_that_run_alone(
    two_runs: tuple[Orch, SshdHost, Store, _TwoRuns],
) -> None:
    """Two runs on one host; B's ``pid`` and ``pid.start`` replaced by links to A's: ``orch cancel B`` SIGTERMed
    A's worker (A ended partial) and said "cancelled", exit 0, while B's ran on. Now the agent does not follow the
    links: B's pid file is named, the stop failed there (exit 1), and A runs on untouched."""
    from tests.e2e.test_cancel_ssh import _in_sessions, _sleeps

    orch, host, store, two = two_runs
    a_dir, b_dir = two.dirs(host)
    # B's orch run first (as when the machine it ran on went down): its follower polls the pid file and, under
    # load, could end on the links and store B failed before the cancel below reached the host
    two.procs[1].kill()
    two.procs[1].communicate()
    assert store.get_run(two.runs[1]).status == "running"
    for name in ("pid", "pid.start"):
        (b_dir / name).unlink()
        (b_dir / name).symlink_to(a_dir / name)

    res = orch("cancel", two.runs[1], "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    [h] = json.loads(res.stdout)["hosts"]
    assert h["status"] == "failed", h
    assert f"the worker's pid file {b_dir / 'pid'} is a symbolic link: the worker's state is unknown" in h["error"]
    # A's worker and its command are untouched, its spool has no done, its run is still running
    a_session = _in_sessions({two.workers[0]})
    assert any(p[0] == two.workers[0] for p in a_session) and _sleeps(two.secs[0]), a_session
    assert not (a_dir / "cancel").exists()
    assert '"done"' not in (a_dir / "events.jsonl").read_text()
    assert store.get_run(two.runs[0]).status == "running"
    assert two.procs[0].poll() is None
    assert _sleeps(two.secs[1])  # B's worker was not named, so it was not stopped either


def test_cancel_of_a_run_whose_pid_files_are_copies_of_a_dead_runs_names_the_live_worker(
    two_runs: tuple[Orch, SshdHost, Store, _TwoRuns],
) -> None:
    """A cancelled (its worker gone), then B's ``pid`` and ``pid.start`` overwritten with copies of A's while B's
    worker runs on (B's ``orch run`` gone, as when the machine it ran on went down: the run is still running):
    ``agent cancel`` took B's worker for dead and wrote ``done`` into B's spool while it went on writing after it.
    Now ``orch cancel B`` exits 1 naming B's live worker, B's spool gets no ``done``, and B's worker and command
    run on."""
    from tests.e2e.test_cancel_ssh import _sleeps

    orch, host, store, two = two_runs
    a_dir, b_dir = two.dirs(host)
    res = orch("cancel", two.runs[0], "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wait_for(lambda: not _sleeps(two.secs[0]) and not Path(f"/proc/{two.workers[0]}").exists(), timeout_s=120,
             what="A's worker and command gone")  # fmt: skip
    two.procs[1].kill()  # B's orch run: its follower would end on the changed pid file and store B as failed
    two.procs[1].communicate()
    assert store.get_run(two.runs[1]).status == "running"
    for name in ("pid", "pid.start"):
        shutil.copyfile(a_dir / name, b_dir / name)
    b_lines = (b_dir / "events.jsonl").read_text()

    res = orch("cancel", two.runs[1], "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    [h] = json.loads(res.stdout)["hosts"]
    assert h["status"] == "failed", h
    assert (f"the worker's pid file {b_dir / 'pid'} names pid {two.workers[0]}, a process that is gone, but pid "
            f"{two.workers[1]} is a live agent worker of run {two.runs[1]} working in {b_dir}") in h["error"], h
    assert f"kill -TERM -- -{two.workers[1]}" in h["error"], h
    assert '"done"' not in (b_dir / "events.jsonl").read_text()[len(b_lines):]
    assert "written by cancel" not in (b_dir / "events.jsonl").read_text()
    assert not (b_dir / "cancel").exists()
    assert Path(f"/proc/{two.workers[1]}").exists() and _sleeps(two.secs[1])  # nothing was signalled


def _bind(source: Path, target: Path) -> bool:
    """``mount --bind source target``; False where this machine does not allow it (not root, no mount namespace
    rights)."""
    res = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True, check=False)
    return res.returncode == 0


@pytest.mark.parametrize("how", ["symlink", "bind"])
def test_cancel_of_a_run_whose_directory_is_another_runs_leaves_that_run_alone(
    two_runs: tuple[Orch, SshdHost, Store, _TwoRuns], how: str
) -> None:
    """B's run directory replaced by a symbolic link to A's (``rm -r D; ln -s A's D``), or A's directory bind
    mounted onto B's: ``orch cancel B`` stopped A's worker. Now the agent proves the directory is B's (no link under
    the runs root, B's own spec in it): it is refused, named, exit 1; A's worker, command and spool are
    untouched."""
    from tests.e2e.test_cancel_ssh import _in_sessions, _sleeps

    orch, host, store, two = two_runs
    a_dir, b_dir = two.dirs(host)
    two.procs[1].kill()  # B's orch run: the run stays running in the store, as when orch's machine went down
    two.procs[1].communicate()
    if how == "symlink":
        shutil.rmtree(b_dir)
        b_dir.symlink_to(a_dir)
        said = (f"the run directory {b_dir} is a symbolic link (to {a_dir}), not run {two.runs[1]}'s own directory: "
                "it may hold another run's worker and spool")  # fmt: skip
    else:
        if not _bind(a_dir, b_dir):
            pytest.skip("mount --bind is not allowed here")
        said = (f"the run directory {b_dir} holds the files of run {two.runs[0]!r} ({b_dir / 'spec.json'} names run "
                f"{two.runs[0]!r}, not {two.runs[1]!r}): another run's directory, linked or mounted here")  # fmt: skip
    try:
        res = orch("cancel", two.runs[1], "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
    finally:
        if how == "bind":
            subprocess.run(["umount", str(b_dir)], check=True)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    [h] = json.loads(res.stdout)["hosts"]
    assert h["status"] == "failed", h
    assert f"{said}; nothing was signalled or written" in h["error"], h
    a_session = _in_sessions({two.workers[0]})
    assert any(p[0] == two.workers[0] for p in a_session) and _sleeps(two.secs[0]), a_session
    assert not (a_dir / "cancel").exists()
    assert '"done"' not in (a_dir / "events.jsonl").read_text()
    assert store.get_run(two.runs[0]).status == "running" and two.procs[0].poll() is None
