"""Variants (issue 10, kind 5: spec size): huge ``--set`` sweeps start (the spec goes by stdin, not argv) and an
env value of the suite never shows in any process's command line (ps), over sshd and on a local host."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_host_side import SUITES, _latest_run_id, _orch, _wait, _write_suites
from tests.plugins.sshd import SshdBed

pytestmark = [pytest.mark.sshd]


def _in_ps(token: str) -> list[bytes]:
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in argv:
            seen.append(argv[:200])
    return seen


def _sweep_and_check(orch: Orch, suites: Path, host: str, run_dir_of, n: int, token: str) -> None:  # type: ignore[no-untyped-def]
    sweep = "n=" + ",".join(str(i) for i in range(1, n + 1))
    proc = orch.popen("run", "sleeper", "--hosts", host, "--suite-dir", str(suites), "--set", sweep,
                      "--set", "secs=0.3", "--json")  # fmt: skip
    try:
        store = Store.from_url(orch.db_url)
        seen: list[bytes] = []
        def first() -> str | None:  # noqa: E306
            seen.extend(_in_ps(token))
            rid = _latest_run_id(orch)
            return rid if rid and store.get_run(rid).results >= 1 else None
        run_id = _wait(first, "the first result", timeout=300)
        for _ in range(10):
            seen.extend(_in_ps(token))
        assert seen == [], seen
        rd = run_dir_of(run_id)
        assert len(json.loads((rd / "spec.json").read_text())["cases"]) == n
        assert orch("cancel", run_id).returncode == 0
        out, err = proc.communicate(timeout=300)
        assert "Traceback" not in err, err[-2000:]
        store.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("n", [5000, 20000])
def test_variant_huge_sweep_over_ssh_starts_and_the_env_token_is_never_in_ps(
    sshd_bed: SshdBed, tmp_path: Path, n: int
) -> None:
    """Variant of kind 5: a ``--set n=1,...,N`` sweep of 5000 and 20000 values (about 24/110 KB of --set text)
    with an env secret, over sshd. Promised: it starts, the host's spec holds every case, the secret is in no
    command line while it runs."""
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    token = f"tok-{uuid.uuid4().hex}"
    suites = _write_suites(tmp_path, {"sleeper.yaml": SUITES["sleeper.yaml"].replace("{token}", token)})
    _sweep_and_check(orch, suites, "gpu-a", lambda rid: host.home / ".orch" / "runs" / rid / "gpu-a", n, token)


def test_variant_huge_sweep_on_a_local_host_and_the_env_token_is_never_in_ps(tmp_path: Path) -> None:
    """Variant of kind 5 on a ``connection: local`` host: 5000 values and an env secret. Promised as over sshd."""
    home = tmp_path / "orchhome"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {home}}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    token = f"tok-{uuid.uuid4().hex}"
    suites = _write_suites(tmp_path, {"sleeper.yaml": SUITES["sleeper.yaml"].replace("{token}", token)})
    _sweep_and_check(orch, suites, "localhost", lambda rid: home / "runs" / rid / "localhost", 5000, token)


def test_variant_env_token_passed_by_set_is_never_in_ps(sshd_bed: SshdBed, tmp_path: Path) -> None:
    """Variant of kind 5: the secret given on orch's command line by ``--set token=...`` (it is in orch's own argv,
    the user's choice) must not show in any *host-side* process's command line (agent, worker, command)."""
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    token = f"tok-{uuid.uuid4().hex}"
    suites = _write_suites(tmp_path)
    proc = orch.popen("run", "sleeper", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", f"token={token}",
                      "--set", "secs=3", "--set", "n=1,2,3", "--json")  # fmt: skip
    try:
        seen: list[bytes] = []
        def started() -> bool:  # noqa: E306
            seen.extend(a for a in _in_ps(token) if b"orchestrator" not in a)
            rid = _latest_run_id(orch)
            return bool(rid and (host.home / ".orch" / "runs" / rid / "gpu-a" / "pid").exists())
        _wait(started, "the worker", timeout=180)
        for _ in range(20):
            seen.extend(a for a in _in_ps(token) if b"orchestrator" not in a)
        assert seen == [], seen
        out, _err = proc.communicate(timeout=300)
        assert json.loads(out)["status"] == "completed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
