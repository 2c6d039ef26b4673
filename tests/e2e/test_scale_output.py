"""Grouped output at fleet size, through the real CLI against real sshd: 50 hosts (one sshd listening on 35
loopback addresses, 15 more addresses with nothing listening) with three kinds of failure."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.plugins.sshfleet import loopback_addresses, start_fleet_sshd

pytestmark = pytest.mark.sshd

OK = [f"n{i:02d}" for i in range(1, 6)]
NO_TORCH = [f"n{i:02d}" for i in range(6, 21)] + ["rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2", "login"]
UNKNOWN_KEY = [f"b300-{i}" for i in range(15)]
REFUSED = [f"gpu-{c}" for c in "abcdefghij"]


def _fleet(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Orch, Path, dict[str, str], int, str]:
    bare = tmp_path / "bare-venv"  # a Python without torch: the python check fails as on a fleet's wrong venv
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    names = OK + NO_TORCH + UNKNOWN_KEY + REFUSED
    addrs = dict(zip(names, loopback_addresses(len(names), second_octet=23, start=1), strict=True))
    listening = [addrs[n] for n in OK + NO_TORCH + UNKNOWN_KEY]
    sshd = start_fleet_sshd(sshd_bed, "fleet", listening, trusted=[addrs[n] for n in OK + NO_TORCH])[0]
    fp = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(sshd.host_keys["ed25519"]) + ".pub"],
        capture_output=True, text=True, check=True,
    ).stdout.split()[1]  # fmt: skip
    lines = [f"defaults: {{python: {sys.executable}}}", "groups:", "  fleet:", "    hosts:"]
    for n in names:
        py = f", python: {bare / 'bin' / 'python'}" if n in NO_TORCH else ""
        lines.append(f"      {n}: {{address: {addrs[n]}, port: {sshd.port}{py}}}")
    inv = tmp_path / "inventory.yaml"
    inv.write_text("\n".join(lines) + "\n")
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path), bare, addrs, sshd.port, fp


def _without_disk_warning(text: str) -> str:
    """Doctor's grouped output without its disk warning (``warn disk on N hosts`` and its detail lines): under
    20 GB free the bed's hosts, which share this machine's disk, all warn — a reading of the machine the test runs
    on, not of orch (the disk check has its own tests). A full CI machine failed this test that way."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("warn disk on "):
            skipping = True
        elif not (skipping and line.startswith("    ")):
            skipping = False
            out.append(line)
    return "".join(out)


def test_doctor_50_hosts_grouped_text_and_json_unchanged(sshd_bed: SshdBed, tmp_path: Path) -> None:
    orch, bare, addrs, port, fp = _fleet(sshd_bed, tmp_path)
    # a terminal wide enough for the longest line: the text compared whole (free text wraps at the width, and the
    # paths in it are as long as the test's tmp_path)
    res = orch("doctor", "--timeout", "30", timeout=600, columns=400)
    assert res.returncode == 1, res.stderr
    shown = _without_disk_warning(res.stdout)
    py = bare / "bin" / "python"
    ver = sys.version.split()[0]
    import torch

    assert shown == (
        "orch doctor: 50 hosts, 5 passed, 45 failed\n"
        "FAIL python on 20 hosts: login,n[06-20],rack[1-2]-gpu[1-2]\n"
        f"    Python {ver} at {py}: No module named 'torch'\n"
        f"    hint: `{py}` cannot import torch; set `python:` in the inventory for this host to the interpreter that "
        "has torch (e.g. python: /opt/torch/.venv/bin/python3)\n"
        "FAIL hostkey on 15 hosts: b300-[0-14]\n"
        f"    no known_hosts entry for [<address>]:{port}; [<address>]:{port} offered the ssh-ed25519 key "
        f"{fp}\n"
        f"    hint: confirm the fingerprint {fp} with the host's administrator, then: orch hosts trust <host>\n"
        "    (on each host: <host> its name, <address> its address; --json or --all gives them per host)\n"
        "FAIL tcp on 10 hosts: gpu-a,gpu-b,gpu-c,gpu-d,gpu-e,gpu-f,gpu-g,gpu-h,gpu-i,gpu-j\n"
        f"    connection refused on port {port} (nothing listening: sshd down, or wrong port)\n"
        "    hint: check the port in the inventory / ssh_config and that sshd runs\n"
        "warn gpus on 25 hosts: login,n[01-20],rack[1-2]-gpu[1-2]\n"
        "    no GPU: nvidia-smi not found on the host\n"
        "ok python on 5 hosts: n[01-05]\n"
        f"    Python {ver}, torch {torch.__version__} (CPU only)\n"
        "5/50 hosts passed; failed: b300-[0-14],gpu-a,gpu-b,gpu-c,gpu-d,gpu-e,gpu-f,gpu-g,gpu-h,gpu-i,gpu-j,login,"
        "n[06-20],rack[1-2]-gpu[1-2]\n"
        f"fleet fleet: torch differs: majority unknown; {torch.__version__} on 5 hosts: n[01-05]\n"
        f"fleet fleet: not compared on 15 hosts: b300-[0-14] (hostkey: no known_hosts entry for [<address>]:{port}; "
        f"[<address>]:{port} offered the ssh-ed25519 key {fp})\n"
        "fleet fleet: not compared on 10 hosts: gpu-a,gpu-b,gpu-c,gpu-d,gpu-e,gpu-f,gpu-g,gpu-h,gpu-i,gpu-j (tcp: "
        f"connection refused on port {port} (nothing listening: sshd down, or wrong port))\n"
    )
    assert "{" not in res.stdout  # no unfilled placeholder reaches a person
    assert len(shown.splitlines()) == 19  # the per-host table (50 rows and a note per failure) is not there

    # --json: every host, every check, each message with the host's own address and port (nothing grouped)
    doc = orch.json("doctor", "--timeout", "30", expect_rc=1, timeout=600)
    assert [h["host"] for h in doc["hosts"]] == OK + NO_TORCH + UNKNOWN_KEY + REFUSED
    from orchestrator.doctor import CHECK_NAMES

    by_host = {h["host"]: h for h in doc["hosts"]}
    for h in doc["hosts"]:
        assert [c["name"] for c in h["checks"]] == list(CHECK_NAMES)
        assert (h["address"], h["port"], h["ok"]) == (addrs[h["host"]], port, h["host"] in OK)
    hk = {c["name"]: c for c in by_host["b300-7"]["checks"]}["hostkey"]
    assert hk["status"] == "fail" and f"[{addrs['b300-7']}]:{port}" in hk["detail"] and hk["verdict"] == "unknown"
    tcp = {c["name"]: c for c in by_host["gpu-c"]["checks"]}["tcp"]
    assert tcp["status"] == "fail" and f"port {port}" in tcp["detail"]

    # --all: the per-host table again (a row per host), then a note per host and check
    full = orch("doctor", "--timeout", "30", "--all", timeout=600)
    assert full.returncode == 1
    assert sum(1 for ln in full.stdout.splitlines() if ln.startswith("│ b300-")) == 15
    assert sum(1 for ln in full.stdout.splitlines() if ln.startswith("gpu-") and " tcp: connection refused" in ln) == 10
    assert "\n5/50 hosts passed\n" in full.stdout


def test_deploy_and_run_12_hosts_grouped(sshd_bed: SshdBed, tmp_path: Path) -> None:
    good = [f"c{i}" for i in range(1, 11)]
    refused = ["login-a", "login-b"]
    addrs = dict(zip(good + refused, loopback_addresses(12, second_octet=25), strict=True))
    port = start_fleet_sshd(sshd_bed, "fleet", [addrs[n] for n in good])[0].port
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        f"defaults: {{python: {sys.executable}}}\ngroups:\n  ct200:\n    hosts:\n"
        + "".join(f"      {n}: {{address: {addrs[n]}, port: {port}}}\n" for n in good + refused)
    )
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    dep = orch("deploy", "--timeout", "30", timeout=600)
    assert dep.returncode == 1, dep.stderr
    lines = dep.stdout.splitlines()
    assert lines[:4] == [
        "orch deploy: 12 hosts, 10 ok, 2 failed",
        "FAIL on 2 hosts: login-a,login-b",
        f"    connection refused on port {port} (nothing listening: sshd down, or wrong port)",
        "    hint: check the port in the inventory / ssh_config and that sshd runs",
    ]
    # one shared remote HOME (as over NFS): the first hosts upload the agent, the others find it present
    heads, details = lines[4::2], lines[5::2]
    assert 1 <= len(heads) <= 2 and len(details) == len(heads), lines
    counts = [re.fullmatch(r"ok on (\d+) hosts?: c\S*", h) for h in heads]
    assert sum(int(m[1]) for m in counts if m) == 10, lines
    assert all(re.fullmatch(r"    agent [0-9a-f]{12} (uploaded|present); no build; (0|\d+\.\d{2,}) MB uploaded", d)
               for d in details), lines  # fmt: skip

    # 12 hosts, 4 at once: each connection is closed after the host's facts are read and opened again for its turn
    logs = [p.root / "sshd.log" for p in sshd_bed.hosts]
    before = sum(p.read_text().count("Accepted publickey for") for p in logs)
    run = orch("run", "noop", "--hosts", "ct200", "--timeout", "30", "--concurrency", "4", timeout=600)
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:4] == [
        "ok completed (10 results) on 10 hosts: c[1-10]",
        "FAIL failed (0 results) on 2 hosts: login-a,login-b",
        f"    connection refused on port {port} (nothing listening: sshd down, or wrong port)",
        "    hint: check the port in the inventory / ssh_config and that sshd runs",
    ]
    # the refused hosts made no directory: none is named for them
    assert re.fullmatch(r"run state on 10 hosts \(c\[1-10\]\): ~/\.orch/runs/[0-9a-f-]+/\{host\}/", lines[4]), lines
    assert re.fullmatch(
        r"run [0-9a-f]{8} noop: partial — 10 results from 12 hosts; details: orch runs show [0-9a-f]{8}", lines[5]
    ), lines
    assert len(lines) == 6
    assert "─" not in run.stdout  # no per-host result tables
    assert sum(p.read_text().count("Accepted publickey for") for p in logs) - before == 20
