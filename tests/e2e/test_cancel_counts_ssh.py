"""``orch cancel RUN --json`` counts what the store holds for each host (a tester saw ``"results": 0`` for a host
whose store held 1 result): with the orch that started the run killed, and from a second shell while it runs.

The suite's first case ends at once with one result; its second sleeps until cancelled (tests/e2e/cancel_counts.py).
Nothing here waits on a clock: the cancel is sent once the store holds the first result *and* the second case's
start (so the worker is inside the sleeping case, never between cases), and every wait is a scaled deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.cancel_counts import counts_run, stored_four
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled

pytestmark = [pytest.mark.sshd]


@pytest.mark.parametrize("first_orch", ["running", "killed"])
def test_cancel_json_counts_come_from_the_store(sshd_bed: SshdBed, tmp_path: Path, first_orch: str) -> None:
    with counts_run(sshd_bed, tmp_path) as bed:
        run_id = bed.wait(stored_four, "the first case's result and the second's start stored")
        if first_orch == "killed":
            bed.proc.kill()
            bed.proc.communicate()
        res = bed.orch("cancel", run_id, "--json", "--timeout", str(scaled(30)), timeout=scaled(240))
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads(res.stdout)
        shown = bed.store.get_run(run_id)
        assert [(h.host, h.results, h.errors) for h in shown.host_runs] == [("gpu-a", 1, 0)]
        assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [
            ("gpu-a", "cancelled", 1, 0)
        ], doc
