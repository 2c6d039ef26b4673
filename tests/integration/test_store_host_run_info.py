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


def test_upsert_hosts_in_one_call_leaves_what_upsert_host_calls_would(store: Store) -> None:
    store.upsert_host("n0000", address="old.example", group="old", labels={"rack": "0"}, facts={"gpu": "x"})
    before = {h.name: h for h in store.list_hosts()}["n0000"]
    rows = [(f"n{i:04d}", f"10.0.{i // 250}.{i % 250}", "fleet", {"rack": str(i % 7)}) for i in range(1203)]
    rows.append(("n0005", "again.example", "moved", {}))  # a name twice: its last row wins
    store.upsert_hosts(rows)  # more names than one IN list takes (500)
    hosts = {h.name: h for h in store.list_hosts()}
    assert len(hosts) == 1203
    kept = hosts["n0000"]  # stored before: updated, its first_seen and facts kept
    assert (kept.address, kept.group, kept.labels, kept.facts) == ("10.0.0.0", "fleet", {"rack": "0"}, {"gpu": "x"})
    assert kept.first_seen == before.first_seen and kept.last_seen >= before.last_seen
    new = hosts["n1202"]
    assert (new.address, new.group, new.labels) == ("10.0.4.202", "fleet", {"rack": "5"})
    assert new.facts is None and new.first_seen == new.last_seen
    assert (hosts["n0005"].address, hosts["n0005"].group, hosts["n0005"].labels) == ("again.example", "moved", {})
