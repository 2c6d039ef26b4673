"""A run directory on the host whose worker pid file is missing, empty or garbage, over real sshd: ``orch run
--resume`` and ``orch cancel`` said the run's spool was gone although ``events.jsonl`` was there. Now the host is
named for what it is (the pid file at its path; the spool still there, collected as far as it goes; the worker's
state unknown), and the lines the spool holds are stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import _collect, _plant, _result, _spool
from tests.plugins.sshd import SshdBed, SshdHost
from tests.plugins.timing import scaled

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
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [h] = json.loads(res.stdout)["hosts"]
    assert h["status"] == "failed" and "gone" not in h["error"], h
    assert f"the worker's pid file {run_dir / 'pid'} is missing: the worker's state is unknown" in h["error"], h
    assert (run_dir / "events.jsonl").read_text().count("\n") == 2  # no done written while a worker may write
    store = Store.from_url(orch.db_url)
    try:
        assert store.get_run(rid).host_run(host.name).status == "cancelled"  # type: ignore[union-attr]
    finally:
        store.close()
