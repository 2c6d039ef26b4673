"""``orch cancel`` of a run whose spool was cut on the host (``head -n 2 events.jsonl > t; cat t >
events.jsonl``) after orch stored more lines than are left: the agent's cancel appended ``done`` numbered from
what was left (seq 2, a position orch had stored as a result). orch now passes its stored position and the host
says the spool changed; no ``done`` goes in. The suite's first case ends at once, its second sleeps until
cancelled."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_cancel_counts_ssh import SUITE, _kill_sleeps
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]


def test_cancel_writes_no_done_into_a_spool_cut_below_the_stored_lines(sshd_bed: SshdBed, tmp_path: Path) -> None:
    host = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [host]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = tmp_path / "suites"
    suites.mkdir()
    secs = str(random.randint(10**6, 2 * 10**6))  # never ends by itself during the test; no other sleep uses it
    (suites / "counts.yaml").write_text(SUITE.replace("SECS", secs))
    store = Store.from_url(orch.db_url)
    proc = orch.popen("run", "cancel-counts", "--hosts", "ct200", "--suite-dir", str(suites),
                      "--timeout", str(scaled(30)), "--json")  # fmt: skip

    def stored_four() -> str | None:  # hello, case_start, result, case_start (the sleeping case)
        try:
            page = store.list_runs(limit=1)
            if page.total and store.last_seq(page.items[0].id, "gpu-a") >= 3:
                return page.items[0].id
        except Exception:  # noqa: BLE001 - the run or its schema is not there yet
            return None
        return None

    try:
        run_id = wait_for(lambda: stored_four() or (proc.poll() is not None and "exited"), timeout_s=180,
                          what="the first case's result and the second's start stored")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.kill()  # the orch that started the run dies; the worker goes on sleeping
        proc.communicate()
        [spool] = (host.home / ".orch" / "runs").glob(f"{run_id}/gpu-a/events.jsonl")
        lines = spool.read_bytes().splitlines(keepends=True)
        assert len(lines) == 4, lines
        with open(spool, "r+b") as f:  # head -n 2 events.jsonl > t; cat t > events.jsonl
            f.truncate(0)
            f.write(b"".join(lines[:2]))
        res = orch("cancel", run_id, "--json", timeout=scaled(240))
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        [h] = json.loads(res.stdout)["hosts"]
        assert h["status"] == "failed" and (h["results"], h["errors"]) == (1, 0), h
        said = (f"exited with status 6: the spool {spool} has 2 lines, orch had stored 4: it was cut or rewritten on "
                "the host after orch read it; no done line written")  # fmt: skip
        assert h["error"].endswith(said), h
        assert spool.read_bytes() == b"".join(lines[:2])  # no done numbered from what was left
        assert store.last_seq(run_id, "gpu-a") == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()
        _kill_sleeps(secs)
