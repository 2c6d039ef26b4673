"""Issue 16 end to end over real sshd: ``orch calibrate``, then a head run whose fake tool sleeps 10% longer in one
case (an env var in the suite says which) → ``orch runs check --confirm`` exits 1 naming that case and reruns
only it; a head run without the slowdown → exit 0.

Robust on a loaded 2-core box: the tool measures its own sleep (perf_counter around time.sleep, 100 or 200 ms),
so process start-up and ssh latency are outside the figure; a load spike delays a wake-up by milliseconds, not
by the 20 ms of the injected slowdown; 8 samples per case; and a case must be called slower twice (check, then
the confirming rerun) before the gate fails."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

FAKE_TOOL = """\
import json, os, sys, time
ms = int(sys.argv[1])
slow = os.environ.get("FAKE_SLOW_MS", "0")
target = ms * (1.10 if slow == str(ms) else 1.0) / 1000.0
t0 = time.perf_counter()
time.sleep(target)
print(json.dumps({"time_ms": (time.perf_counter() - t0) * 1000.0}))
"""

SUITE = """\
name: fake-sleep
description: a tool that sleeps ms milliseconds (10% longer for the case FAKE_SLOW_MS names)
command: ["{python}", "{tool}", "{{ms}}"]
params:
  ms: {{type: list, default: [100, 200], help: "sleep, ms"}}
repeat: 8
timeout_s: 30
parser: json
metrics:
  time_ms: {{path: time_ms, unit: ms}}
env:
  FAKE_SLOW_MS: {{value: "{slow}", public: true}}
"""


def _suites(tmp_path: Path) -> tuple[Path, Path]:
    tool = tmp_path / "fake_sleep.py"
    tool.write_text(FAKE_TOOL)
    dirs = []
    for name, slow in (("suites-normal", "0"), ("suites-slow", "200")):
        d = tmp_path / name
        d.mkdir()
        (d / "fake-sleep.yaml").write_text(SUITE.format(python=sys.executable, tool=tool, slow=slow))
        dirs.append(d)
    return dirs[0], dirs[1]


def _run(orch: Orch, suites: Path) -> str:
    doc = orch.json("run", "fake-sleep", "--hosts", "gpu-a", "--suite-dir", str(suites), timeout=300)
    assert doc["status"] == "completed", doc
    return str(doc["run_id"])


def _cases(items: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return sorted((c["host"], c["case"]["ms"]) for c in items)


def test_calibrate_then_check_confirm_names_the_slowed_case(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts
    normal, slow = _suites(tmp_path)

    cal = orch.json("calibrate", "fake-sleep", "--hosts", "gpu-a", "--runs", "3", "--suite-dir", str(normal),
                    timeout=600)  # fmt: skip
    assert [r["status"] for r in cal["runs"]] == ["completed"] * 3
    timed = [c for c in cal["calibrations"] if c["metric"] == "time_ms"]
    assert sorted((c["host"], c["case"]["ms"], c["n_runs"]) for c in timed) == [("gpu-a", 100, 3), ("gpu-a", 200, 3)]
    # the injected slowdown (10%) must stand clear of the A/A spread for the gate to see it
    assert all(c["aa_spread"] is not None and 0 <= c["aa_spread"] < 0.08 for c in timed), timed

    base = _run(orch, normal)
    head = _run(orch, slow)

    # without --confirm: the statistics alone; the text names the case and says where the noise floor came from
    res = orch("runs", "check", head, "--base", base, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    slower_lines = [ln for ln in res.stdout.splitlines() if ln.startswith("slower:")]
    assert len(slower_lines) == 1 and "ms=200" in slower_lines[0], res.stdout
    assert "noise floor from calibration" in res.stdout

    doc = orch.json("runs", "check", head, "--base", base, "--confirm", "--suite-dir", str(slow),
                    expect_rc=1, timeout=600)  # fmt: skip
    assert doc["regression"] is True and doc["noise_floor"] == "calibration"
    assert _cases(doc["slower"]) == [("gpu-a", 200)]
    assert _cases(doc["reproduced"]) == [("gpu-a", 200)] and doc["not_reproduced"] == []
    assert 1.05 < doc["reproduced"][0]["ratio"] < 1.15
    # the rerun replayed only the slower case, on the same host, and says which run it replays
    store = Store.from_url(orch.db_url)
    try:
        rerun = store.get_run(doc["rerun_run_id"])
        assert rerun.info["replays"] == head and rerun.hosts == ["gpu-a"] and rerun.suite == "fake-sleep"
        assert [r.case["ms"] for r in store.results(rerun.id).items] == [200]
    finally:
        store.close()

    # no slowdown: the gate passes (with or without a confirming rerun)
    head2 = _run(orch, normal)
    doc = orch.json("runs", "check", head2, "--base", base, "--confirm", "--suite-dir", str(normal),
                    expect_rc=0, timeout=600)  # fmt: skip
    assert doc["regression"] is False and doc["reproduced"] == []


def test_check_usage_errors_exit_2(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts
    normal, _slow = _suites(tmp_path)
    run = _run(orch, normal)
    res = orch("runs", "check", run, "--base", "0000dead")
    assert res.returncode == 2 and "0000dead" in res.stderr and "Traceback" not in res.stderr, res.stderr
    res = orch("runs", "check", run)
    assert res.returncode == 2 and "--base" in res.stderr
    # a run compared with itself shows nothing: a usage error, not a pass
    res = orch("runs", "check", run, "--base", run)
    assert res.returncode == 2 and "HEAD and --base are the same run" in res.stderr, res.stderr
    # rerun: an unknown host or a case the run does not have is named
    res = orch("runs", "rerun", run, "--hosts", "gpu-b", "--suite-dir", str(normal))
    assert res.returncode == 2 and "gpu-b" in res.stderr, res.stderr
    res = orch("runs", "rerun", run, "--cases", "ms=999", "--suite-dir", str(normal))
    assert res.returncode == 2 and "ms=999" in res.stderr, res.stderr
    doc = orch.json("runs", "rerun", run, "--cases", "ms=100", "--suite-dir", str(normal), timeout=300)
    assert doc["status"] == "completed" and doc["replays"] == run
    assert [h["results"] for h in doc["hosts"]] == [1]
    assert json.loads(orch("runs", "show", doc["run_id"], "--json").stdout)["run"]["info"]["replays"] == run


def test_rerun_needs_the_replayed_runs_build(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    """A run records each host's current build sha; its rerun on a host whose current build changed fails that
    host naming both builds, and runs again once the build is deployed back."""
    orch, _ = two_hosts
    normal, _slow = _suites(tmp_path)
    builds = []
    for name in ("build-a", "build-b"):
        d = tmp_path / name
        d.mkdir()
        (d / "VERSION").write_text(name)
        builds.append(d)
    sha_a = orch.json("deploy", "--hosts", "gpu-a", "--build", str(builds[0]))["hosts"][0]["build_sha"]
    run = _run(orch, normal)
    store = Store.from_url(orch.db_url)
    try:
        hr = store.get_run(run).host_run("gpu-a")
        assert hr is not None and hr.build_sha == sha_a
    finally:
        store.close()
    sha_b = orch.json("deploy", "--hosts", "gpu-a", "--build", str(builds[1]))["hosts"][0]["build_sha"]
    assert sha_b != sha_a
    doc = orch.json("runs", "rerun", run, "--cases", "ms=100", "--suite-dir", str(normal), expect_rc=1, timeout=300)
    (host,) = doc["hosts"]
    assert host["status"] == "failed" and sha_a[:12] in host["error"] and sha_b[:12] in host["error"], host
    orch.json("deploy", "--hosts", "gpu-a", "--build", str(builds[0]))
    doc = orch.json("runs", "rerun", run, "--cases", "ms=100", "--suite-dir", str(normal), timeout=300)
    assert doc["status"] == "completed" and doc["replays"] == run
