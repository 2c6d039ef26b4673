"""The open-files limit at start (real processes with real limits, set by resource.setrlimit before exec):
raised to the hard maximum, and a clear refusal (exit 2, no traceback) when the hard maximum is too low."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch


def _orch(tmp_path: Path, hosts: int = 1) -> Orch:
    """``hosts`` local hosts (localhost, local-2, ...) in group ``local``."""
    inv = tmp_path / "inventory.yaml"
    names = ["localhost", *(f"local-{i}" for i in range(2, hosts + 1))]
    inv.write_text("groups:\n  local:\n    hosts:\n" + "".join(
        f"      {n}: {{connection: local, python: {sys.executable}}}\n" for n in names))  # fmt: skip
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


def _limited(orch: Orch, soft: int, hard: int, *args: str) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.run(orch.argv(*args), cwd=orch.cwd, env=orch.env(), capture_output=True, text=True,
                          timeout=240, preexec_fn=limit)  # fmt: skip


@pytest.mark.parametrize(
    "command", [("doctor",), ("deploy",), ("run", "noop", "--hosts", "local")], ids=["doctor", "deploy", "run"]
)
def test_hard_limit_too_low_for_the_concurrency_is_a_clear_usage_error(tmp_path: Path, command: tuple[str]) -> None:
    res = _limited(_orch(tmp_path, hosts=70), 200, 200, *command, "--concurrency", "64")
    assert res.returncode == 2, res.stderr
    assert res.stderr == (
        "error: the open-files limit is 200 (hard limit 200); --concurrency 64 needs about 384 (4 per host in "
        "flight + 128)\n"
        "hint: use --concurrency 18 or lower, or raise the hard limit (as root: `ulimit -Hn 384` in the shell that "
        "starts orch, LimitNOFILE=384 in a systemd unit, or `nofile` in /etc/security/limits.conf)\n"
    )
    assert res.stdout == ""


def test_soft_limit_is_raised_to_the_hard_one(tmp_path: Path) -> None:
    # soft 256 would refuse --concurrency 500 (needs 2128); the hard limit 4096 allows it once raised
    res = _limited(_orch(tmp_path), 256, 4096, "doctor", "--concurrency", "500", "--json")
    assert res.returncode in (0, 1), res.stderr
    assert "open-files limit" not in res.stderr
    probe = "import resource; from orchestrator.limits import ensure_open_files as e; print(e(500), " \
        "resource.getrlimit(resource.RLIMIT_NOFILE))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096)))  # fmt: skip
    assert out.stdout.strip() == "4096 (4096, 4096)"



@pytest.mark.parametrize("hosts", [1, 20])
def test_the_need_counts_the_hosts_selected_not_the_default_concurrency(tmp_path: Path, hosts: int) -> None:
    # the variant tester: `ulimit -n 300; orch doctor --hosts n001` refused one host ("--concurrency 64 needs about
    # 384"); one host needs 132 files, 20 hosts 208 — within 300 — and 50 hosts at once would need 328
    orch = _orch(tmp_path, hosts=max(hosts, 50))
    selector = "localhost" if hosts == 1 else ",".join(["localhost", *(f"local-{i}" for i in range(2, hosts + 1))])
    res = _limited(orch, 300, 300, "doctor", "--hosts", selector, "--json")
    assert res.returncode in (0, 1) and "open-files limit" not in res.stderr, res.stderr
    every = _limited(orch, 300, 300, "doctor", "--json")
    assert every.returncode == 2 and every.stderr.startswith(
        "error: the open-files limit is 300 (hard limit 300); 50 hosts at once need about 328"
    ), every.stderr
