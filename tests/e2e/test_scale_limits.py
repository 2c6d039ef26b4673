"""The open-files limit at start (real processes with real limits, set by resource.setrlimit before exec):
raised to the hard maximum, and a clear refusal (exit 2, no traceback) when the hard maximum is too low."""

from __future__ import annotations

import json
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
        "error: the open-files limit is 200 (hard limit 200); --concurrency 64 needs about 297 (4 per host in "
        "flight + 41)\n"
        "hint: use --concurrency 39 or lower, or raise the hard limit (as root: `ulimit -Hn 297` in the shell that "
        "starts orch, LimitNOFILE=297 in a systemd unit, or `nofile` in /etc/security/limits.conf)\n"
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
    # 384"); one host needs 45 files, 20 hosts 121 — within 250 — and 60 hosts at once would need 281
    orch = _orch(tmp_path, hosts=max(hosts, 60))
    selector = "localhost" if hosts == 1 else ",".join(["localhost", *(f"local-{i}" for i in range(2, hosts + 1))])
    res = _limited(orch, 250, 250, "doctor", "--hosts", selector, "--json")
    assert res.returncode in (0, 1) and "open-files limit" not in res.stderr, res.stderr
    every = _limited(orch, 250, 250, "doctor", "--json")
    assert every.returncode == 2 and every.stderr.startswith(
        "error: the open-files limit is 250 (hard limit 250); 60 hosts at once need about 281"
    ), every.stderr


def test_one_host_fits_a_limit_of_100(tmp_path: Path) -> None:
    # a tester: `ulimit -Hn 100; orch doctor --hosts n001` -> exit 2, "1 hosts at once need about 132"
    res = _limited(_orch(tmp_path, hosts=3), 100, 100, "doctor", "--hosts", "localhost", "--json")
    assert res.returncode in (0, 1) and "open-files limit" not in res.stderr, res.stderr


def test_the_concurrency_the_hint_names_works(tmp_path: Path) -> None:
    orch = _orch(tmp_path, hosts=20)
    refused = _limited(orch, 80, 80, "doctor", "--json")  # 20 hosts at once need 41 + 4 * 20 = 121
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(
        "error: the open-files limit is 80 (hard limit 80); 20 hosts at once need about 121 (4 per host in flight "
        "+ 41)\nhint: use --concurrency 9 or lower, or raise the hard limit"
    ), refused.stderr
    res = _limited(orch, 80, 80, "doctor", "--concurrency", "9", "--json")
    assert res.returncode in (0, 1) and "open-files limit" not in res.stderr, res.stderr
    assert len(json.loads(res.stdout)["hosts"]) == 20
