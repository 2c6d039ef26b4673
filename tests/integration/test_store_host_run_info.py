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


def test_a_host_run_ends_when_its_agent_wrote_done_and_the_run_when_its_last_host_did(store: Store) -> None:
    """A run collected by ``orch run --resume`` long after its agents finished said it finished at the
    collection. Now a host run's ``finished_at`` is its done line's ``ts`` when that lies between the host run's
    start and now (a host clock far off is not believed), and the run's is its host runs' latest."""
    import time

    store.upsert_host("h1", address="h1.example", group="g", labels={})
    store.upsert_host("h2", address="h2.example", group="g", labels={})
    run_id = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1", "h2"],
                              started_by="me@box", started_on="box")  # fmt: skip
    for h in ("h1", "h2"):
        store.start_host_run(run_id, h, facts={}, agent_version="v1", build_sha=None)
    started = store.get_run(run_id).host_run("h1")
    assert started is not None and started.started_at is not None
    t0 = started.started_at.timestamp()
    time.sleep(0.05)
    done_ts = t0 + 0.01  # after the start, before now
    store.finish_host_run(run_id, "h1", "completed", ended_ts=done_ts)
    store.finish_host_run(run_id, "h2", "completed", ended_ts=t0 - 3600)  # before its start: the host's clock
    detail = store.get_run(run_id)
    h1, h2 = detail.host_run("h1"), detail.host_run("h2")
    assert h1 is not None and h2 is not None and h1.finished_at is not None and h2.finished_at is not None
    assert abs(h1.finished_at.timestamp() - done_ts) < 1e-5
    assert h2.finished_at.timestamp() >= t0 + 0.05  # now, not an hour before its start
    store.finish_run(run_id, "completed")
    assert store.get_run(run_id).finished_at == h2.finished_at  # the latest host end
    store.reopen_host_run(run_id, "h2")  # a host not ended: the run's end is now
    store.finish_host_run(run_id, "h2", "completed", ended_ts=time.time() + 3600)  # in the future: now
    h2 = store.get_run(run_id).host_run("h2")
    assert h2 is not None and h2.finished_at is not None and h2.finished_at.timestamp() <= time.time()


def test_a_done_ts_before_the_host_s_last_result_is_not_its_end(store: Store) -> None:
    """The variant tester: a done line whose ``ts`` lies after the host run's start but before the ``ts`` of a
    result it stored became the host run's ``finished_at`` (a host run that ended before its own last result).
    The end must be at or after every stored row's ``ts``; an earlier one is not believed (now is used)."""
    import time

    from orchestrator.protocol import Event

    store.upsert_host("h1", address="h1.example", group="g", labels={})
    run_id = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1"],
                              started_by="me@box", started_on="box")  # fmt: skip
    store.start_host_run(run_id, "h1", facts={}, agent_version="v1", build_sha=None)
    started = store.get_run(run_id).host_run("h1")
    assert started is not None and started.started_at is not None
    t0 = started.started_at.timestamp()
    time.sleep(0.05)
    metrics = {"time_ms": {"value": 1.0, "unit": "ms"}}
    result = Event(seq=1, type="result", ts=t0 + 0.04, data={"case_index": 0, "case": {"ms": 1.0}, "metrics": metrics})
    store.ingest(run_id, "h1", [Event(seq=0, type="hello", ts=t0, data={"cases_total": 1}), result])
    store.finish_host_run(run_id, "h1", "completed", ended_ts=t0 + 0.02)  # after the start, before the result
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.finished_at is not None
    assert hr.finished_at.timestamp() >= t0 + 0.04, (hr.finished_at.timestamp() - t0)
    store.reopen_host_run(run_id, "h1")
    store.finish_host_run(run_id, "h1", "completed", ended_ts=t0 + 0.045)  # after the result: believed
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.finished_at is not None and abs(hr.finished_at.timestamp() - (t0 + 0.045)) < 1e-5
