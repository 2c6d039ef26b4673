"""``info`` given to ``start_host_run``/``finish_host_run`` is merged into the host run's info in the same
transaction, as ``set_host_run_info`` merges it (the runner's one commit per host at start and at end, issue 18),
on SQLite and on a real PostgreSQL (``store`` fixture)."""

from __future__ import annotations

from orchestrator.store.repo import Store


def test_start_and_finish_merge_info_as_set_host_run_info_does(store: Store) -> None:
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    run_id = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1"], started_by="me@box",
                              started_on="box")  # fmt: skip
    store.set_host_run_info(run_id, "h1", {"earlier": 1})
    store.start_host_run(run_id, "h1", facts={"gpu": "x"}, agent_version="v1", build_sha=None,
                         info={"spec": {"bench": "noop"}, "preset": None})  # fmt: skip
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.status == "running"
    assert hr.info == {"earlier": 1, "spec": {"bench": "noop"}, "preset": None}
    store.finish_host_run(run_id, "h1", "completed", info={"reconnects": 0, "preset": "tiny"})
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.status == "completed" and hr.error is None
    assert hr.info == {"earlier": 1, "spec": {"bench": "noop"}, "preset": "tiny", "reconnects": 0}
    store.finish_host_run(run_id, "h1", "failed", "lost")  # without info: info untouched
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and (hr.status, hr.error) == ("failed", "lost")
    assert hr.info == {"earlier": 1, "spec": {"bench": "noop"}, "preset": "tiny", "reconnects": 0}
