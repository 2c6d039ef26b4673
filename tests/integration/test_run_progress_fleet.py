"""Run progress at fleet size, against real sshd: 30 hosts (27 reachable through two sshd processes listening on
16 + 11 loopback addresses, 3 addresses with nothing listening), the built-in noop suite, the live summary drawn
on a fixed-width terminal (rich Console, force_terminal) and read back frame by frame."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.cli.progress import FleetProgress
from orchestrator.inventory import parse_inventory
from orchestrator.runner import Runner, RunRequest
from orchestrator.store.repo import Store
from tests.plugins.sshd import SshdBed, _venv_python
from tests.plugins.sshfleet import loopback_addresses, start_fleet_sshd

pytestmark = pytest.mark.sshd

WIDTH = 72
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_30_hosts_summary_progress_on_a_fixed_width_terminal(sshd_bed: SshdBed, tmp_path: Path) -> None:
    good = [f"n{i:02d}" for i in range(1, 28)]
    bad = ["bad-1", "bad-2", "bad-3"]
    addrs = dict(zip(good + bad, loopback_addresses(30, second_octet=24), strict=True))
    port = start_fleet_sshd(sshd_bed, "fleet", [addrs[n] for n in good])[0].port
    inv = parse_inventory(
        f"defaults: {{python: {_venv_python()}}}\ngroups:\n  b300:\n    hosts:\n"
        + "".join(f"      {n}: {{address: {addrs[n]}, port: {port}}}\n" for n in good + bad)
    )
    store = Store.from_url(f"sqlite:///{tmp_path / 'orch.db'}")
    store.upgrade()
    buf = io.StringIO()
    term = Console(file=buf, width=WIDTH, force_terminal=True, color_system=None, highlight=False)
    progress = FleetProgress({h.name: h.group for h in inv.hosts}, console=term)
    req = RunRequest("noop", "b300", sets={"ms": "20"}, repeat=5, timeout_s=30)
    with progress:
        outcome = asyncio.run(Runner(inv, store, req, progress).run())
    assert {h.host: h.status for h in outcome.hosts} == {**dict.fromkeys(good, "completed"),
                                                         **dict.fromkeys(bad, "failed")}  # fmt: skip

    frames = [ln for ln in _CONTROL.sub("", buf.getvalue()).replace("\r", "\n").split("\n") if ln.strip()]
    assert frames, "nothing drawn"
    assert all(len(ln) <= WIDTH for ln in frames), [ln for ln in frames if len(ln) > WIDTH]
    summaries = [ln for ln in frames if ln.startswith("b300  hosts ")]
    assert summaries and all(
        re.fullmatch(r"b300  hosts \d+ done · \d+ running · \d+ failed( · \d+ waiting)? / 30  cases \d+/\d+\+?"
                     r"(  ETA \d+(s|m\d\ds))?", ln)  # fmt: skip
        for ln in summaries
    ), summaries
    assert not any(ln.startswith(("n01", "n27")) for ln in frames)  # no per-host bars at 30 hosts
    # the last frame: every host finished, the three unreachable ones named in one folded list
    last = progress.tracker.lines(0.0)
    assert last[0] == "b300  hosts 27 done · 0 running · 3 failed / 30  cases 27/27"
    assert last[1].startswith("  failed on 3 hosts: bad-[1-3]: ")
    assert len(last) == 2
    # a frame drawn while hosts were still running, with the slowest ones by name
    assert any(" running" in ln and not ln.startswith("b300  hosts 27 done") for ln in summaries)
