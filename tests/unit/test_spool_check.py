"""The comparison of a spool's lines at stored positions with the stored rows (``orchestrator/spool_check.py``),
shared by ``orch runs import`` and ``orch run --resume``."""

from __future__ import annotations

from typing import Any

from orchestrator.protocol import Event
from orchestrator.spool_check import StoredPrefix, hello_conflicts, line_conflicts, past_done_note, shown
from orchestrator.store.records import ResultRecord

RUN = "01a23051-58d9-74ca-9b58-fc56db94ad7f"
OTHER = "01a23051-58d9-74ca-9b58-000000000000"


def _row(seq: int, *, status: str = "ok", case_index: int = 0, case: dict[str, Any] | None = None,
         wall_ms: float = 8.488603) -> ResultRecord:  # fmt: skip
    return ResultRecord(run_id=RUN, host="gpu-a", seq=seq, case_index=case_index, status=status,
                        case=case if case is not None else {"s": 0}, case_key="", m=None, concurrency=None,
                        size_bytes=None, metrics={"wall_ms": {"value": wall_ms, "unit": "ms", "median": wall_ms}},
                        info=None, error=None if status == "ok" else "boom")  # fmt: skip


def _result(seq: int, *, case_index: int = 0, case: dict[str, Any] | None = None, wall_ms: float = 8.488603) -> Event:
    return Event(seq=seq, type="result", data={"case_index": case_index, "case": case if case is not None else {"s": 0},
                                                "metrics": {"wall_ms": {"value": wall_ms, "unit": "ms",
                                                                        "median": wall_ms}}})  # fmt: skip


def _hello(run_id: str = RUN, host: str | None = "gpu-a") -> Event:
    data: dict[str, Any] = {"run_id": run_id, "suite": "slow"}
    if host is not None:
        data["host"] = host
    return Event(seq=0, type="hello", data=data)


def test_the_same_result_line_agrees_with_its_row() -> None:
    assert line_conflicts(_result(2), _result(2), _row(2), stored_done=None) == []


def test_a_rewritten_figure_names_the_line_the_field_and_both_values() -> None:
    ev = _result(2, wall_ms=123456.0)
    assert line_conflicts(ev, ev, _row(2), stored_done=None) == [
        "line 2: metric wall_ms.value is 123456.0, 8.488603 stored",
        "line 2: metric wall_ms.median is 123456.0, 8.488603 stored",
    ]


def test_the_raw_figures_are_compared_and_the_prepared_case() -> None:
    """The agent's figures come from the line as written; case and status from the line as ingest stores it."""
    raw, prepared = _result(2, wall_ms=1.0), _result(2, case={"s": 6}, wall_ms=8.488603)
    assert line_conflicts(raw, prepared, _row(2), stored_done=None) == [
        "line 2: case parameters {'s': 6} differ from the stored {'s': 0}",
        "line 2: metric wall_ms.value is 1.0, 8.488603 stored",
        "line 2: metric wall_ms.median is 1.0, 8.488603 stored",
    ]


def test_another_case_status_or_missing_row_is_named() -> None:
    assert line_conflicts(_result(2, case_index=1), _result(2, case_index=1), _row(2), stored_done=None) == [
        "line 2 is for case 1, the stored row for case 0"
    ]
    assert line_conflicts(_result(2), _result(2), _row(2, status="error"), stored_done=None) == [
        "line 2 would be an ok row, the store holds an error row there"
    ]
    assert line_conflicts(_result(2), _result(2), None, stored_done=None) == [
        "line 2 would be an ok row, the store holds no row there"
    ]
    log = Event(seq=2, type="log", data={"message": "x"})
    assert line_conflicts(log, log, _row(2), stored_done=None) == [
        "line 2 is a log line, the store holds a row of status ok there"
    ]
    assert line_conflicts(log, log, None, stored_done=None) == []


def test_a_done_line_is_compared_with_the_stored_counts() -> None:
    counts = {"lines": 6, "results": 1, "errors": 0}
    done = Event(seq=5, type="done", data={"status": "completed", "counts": counts})
    stored = {**counts, "status": "completed", "position": 5}
    assert line_conflicts(done, done, None, stored_done=stored) == []
    assert line_conflicts(done, done, None, stored_done={**stored, "results": 2}) == [
        "line 5: the done line differs (results 1 vs 2 stored)"
    ]


def test_the_hello_must_name_this_run_and_host() -> None:
    assert hello_conflicts(_hello(), run_id=RUN, host="gpu-a") == []
    assert hello_conflicts(_hello(host=None), run_id=RUN, host="gpu-a") == []  # an older agent names no host
    assert hello_conflicts(_hello(OTHER, "gpu-b"), run_id=RUN, host="gpu-a") == [
        f"its hello names run {OTHER}, not {RUN}",
        "its hello names host 'gpu-b', not 'gpu-a'",
    ]
    log = Event(seq=0, type="log", data={})
    assert hello_conflicts(log, run_id=RUN, host="gpu-a") == ["line 0 is a log line, not the agent's hello"]


def test_stored_prefix_collects_every_difference_in_order() -> None:
    prefix = StoredPrefix(RUN, "gpu-a", 3, {2: _row(2), 3: _row(3, case_index=1, case={"s": 6})})
    for ev in (_hello(OTHER), Event(seq=1, type="case_start", data={}), _result(2, wall_ms=5.0),
               _result(3, case_index=1, case={"s": 6})):  # fmt: skip
        prefix.compare(ev, ev)
    assert prefix.problems == [
        f"its hello names run {OTHER}, not {RUN}",
        "line 2: metric wall_ms.value is 5.0, 8.488603 stored",
        "line 2: metric wall_ms.median is 5.0, 8.488603 stored",
    ]


def test_shown_cuts_after_five_and_counts_the_rest() -> None:
    assert shown([f"p{i}" for i in range(7)]) == "p0; p1; p2; p3; p4; and 2 more"
    assert shown(["a"]) == "a"


def test_past_done_note_counts_the_lines() -> None:
    assert past_done_note(1, 7) == ("1 line after the done line (line 7) were not stored: the agent writes nothing "
                                    "after done, so the spool was changed or appended to")  # fmt: skip
    assert past_done_note(2, 5).startswith("2 lines after the done line (line 5)")


def test_a_result_the_store_judged_malformed_agrees_with_its_error_row() -> None:
    """``Store.ingest`` keeps a result whose metrics ``clean_metrics`` rejects as an error row: the same line read
    again (on a reconnect) is no conflict, and an ok row there would be one."""
    ev = Event(seq=2, type="result", data={"case_index": 0, "case": {"s": 0},
                                           "metrics": {"x": {"value": "fast", "unit": "ms"}}})  # fmt: skip
    assert line_conflicts(ev, ev, _row(2, status="error"), stored_done=None) == []
    assert line_conflicts(ev, ev, _row(2), stored_done=None) == [
        "line 2 would be an error row, the store holds an ok row there"
    ]


def test_a_line_the_database_refused_agrees_with_its_refusal_row() -> None:
    """A line the database refused at its place (``store.refusals``) is an error row holding none of it."""
    refusal = ResultRecord(run_id=RUN, host="gpu-a", seq=3, case_index=None, status="error", case={}, case_key="",
                           m=None, concurrency=None, size_bytes=None, metrics={}, info=None,
                           error="agent line 3 (log) was not stored: value too long; the line stays in the host's "
                           "spool, the other lines are stored")  # fmt: skip
    log = Event(seq=3, type="log", data={"message": "x" * 10})
    assert line_conflicts(log, log, refusal, stored_done=None) == []
    other = Event(seq=3, type="case_start", data={})
    assert line_conflicts(other, other, refusal, stored_done=None) == [
        "line 3 is a case_start line, the store holds a row of status error there"
    ]


def _with(ev: Event, *, samples: list[Any] | None = None, info: dict[str, Any] | None = None,
          ts: float | None = None) -> Event:  # fmt: skip
    data = {**ev.data, "metrics": {"wall_ms": {**ev.data["metrics"]["wall_ms"]}}}
    if samples is not None:
        data["metrics"]["wall_ms"]["samples"] = samples
    if info is not None:
        data["info"] = info
    return Event(seq=ev.seq, type=ev.type, ts=ts if ts is not None else ev.ts, data=data)


def _stored_with(row: ResultRecord, *, samples: list[Any] | None = None, info: dict[str, Any] | None = None
                 ) -> ResultRecord:  # fmt: skip
    from dataclasses import replace

    metrics = {"wall_ms": {**row.metrics["wall_ms"], **({"samples": samples} if samples is not None else {})}}
    return replace(row, metrics=metrics, info=info)


def test_rewritten_samples_info_and_ts_of_a_stored_line_are_conflicts() -> None:
    """The testers' finding: a stored line's samples, ``info`` or ``ts`` rewritten on the host were not compared
    (only the metric figures were), so a resume or import took the rewritten spool as the stored one."""
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(1_790_000_002.25, tz=timezone.utc)
    row = _stored_with(_row(2), samples=[8.4, 8.5, 8.6], info={"device": "cuda:0", "gpu_spec": "h200"})
    same = _with(_result(2), samples=[8.4, 8.5, 8.6], info={"device": "cuda:0"}, ts=1_790_000_002.25)
    # orch's own info keys (gpu_spec follows the inventory) are not the agent's: not compared
    assert line_conflicts(same, same, row, stored_done=None, stored_ts=stamp) == []
    cases = [
        (_with(same, samples=[8.4, 9.5, 8.6]), "line 2: metric wall_ms.samples[1] is 9.5, 8.5 stored"),
        (_with(same, samples=[8.4, 8.5]), "line 2: metric wall_ms has 2 samples, 3 stored"),
        (_with(_result(2), info={"device": "cuda:0"}, ts=1_790_000_002.25),
         "line 2: metric wall_ms has 0 samples, 3 stored"),
        (_with(same, info={"device": "cuda:1"}), "line 2: info.device is 'cuda:1', 'cuda:0' stored"),
        (_with(same, info={"device": "cuda:0", "clock": 1980}), "line 2: info.clock is 1980, missing stored"),
        (_with(same, ts=1_790_000_009.5), "line 2: ts is 1790000009.5, 1790000002.25 stored"),
    ]
    for ev, says in cases:
        assert line_conflicts(ev, ev, row, stored_done=None, stored_ts=stamp) == [says], says


def test_a_field_left_out_of_a_stored_line_is_a_conflict_too() -> None:
    """The tester removed fields instead of changing them (a figure, ``ts``, an ``info`` key) and the resume took
    the line; and an error line's message was not compared at all."""
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(1_790_000_002.25, tz=timezone.utc)
    row = _stored_with(_row(2), info={"exit_status": 0})
    same = _with(_result(2), info={"exit_status": 0}, ts=1_790_000_002.25)
    assert line_conflicts(same, same, row, stored_done=None, stored_ts=stamp) == []
    no_median = Event(seq=2, type="result", ts=1_790_000_002.25,
                      data={**same.data, "metrics": {"wall_ms": {"value": 8.488603, "unit": "ms"}}})  # fmt: skip
    no_ts = Event(seq=2, type="result", data=same.data)
    no_info = _with(_result(2), info={}, ts=1_790_000_002.25)
    for ev, says in [(no_median, "line 2: metric wall_ms.median is None, 8.488603 stored"),
                     (no_ts, "line 2: ts is missing, 1790000002.25 stored"),
                     (no_info, "line 2: info.exit_status is missing, 0 stored")]:  # fmt: skip
        assert line_conflicts(ev, ev, row, stored_done=None, stored_ts=stamp) == [says], says
    err_row = _row(3, status="error")  # its error: "boom"
    err = Event(seq=3, type="error", ts=1_790_000_003.0, data={"case_index": 0, "case": {"s": 0}, "message": "boom"})
    assert line_conflicts(err, err, err_row, stored_done=None) == []
    other = Event(seq=3, type="error", ts=err.ts, data={**err.data, "message": "all fine"})
    assert line_conflicts(other, other, err_row, stored_done=None) == [
        "line 3: its message is 'all fine', 'boom' stored"
    ]


def test_a_line_whose_outputs_stayed_on_the_host_is_compared_by_their_digests() -> None:
    """The tester's false refusal: an unchanged spool whose results left their outputs on the host (too large
    for the line) was refused by ``runs import`` on a machine that cannot reach the host ("line 2 would be an
    error row, the store holds an ok row"), and a resume fetched every stored output again, failing the host
    when one was gone. Now such a line is not parsed again: the digests it holds of its outputs (``info.files``)
    are compared with the stored ones."""
    files = [{"stdout": {"path": "outputs/0/0.stdout", "bytes": 156000, "sha256": "a" * 64}}]
    row = _stored_with(_row(2), info={"exit_status": 0, "files": files, "command": ["sh"], "output_tail": "v: 1"})
    raw = _with(_result(2), info={"exit_status": 0, "files": files, "outputs_complete": False, "stdout": "v:"})
    judged = Event(seq=2, type="error", data={"case_index": 0, "case": {"s": 0}, "kind": "parse",
                                              "message": "the full outputs stayed on the host and were not fetched"})
    assert line_conflicts(raw, judged, row, stored_done=None) == []
    changed = [{"stdout": {**files[0]["stdout"], "sha256": "b" * 64}}]
    raw2 = _with(_result(2), info={"exit_status": 0, "files": changed, "outputs_complete": False})
    assert line_conflicts(raw2, judged, row, stored_done=None) == [
        f"line 2: info.files[0].stdout.sha256 is {'b' * 64!r:.57}..., {'a' * 64!r:.57}... stored"
    ]


def test_a_hello_that_leaves_out_what_the_host_run_stored_is_a_conflict() -> None:
    """The tester deleted the hello's ``facts`` or ``agent_version`` (or set ``hostname`` to null) and the resume
    took the spool; an agent that could not read its spec (suite null, 0 cases) is still no conflict."""
    from orchestrator.spool_check import hello_record_conflicts
    from orchestrator.store.records import HostRunRecord

    facts = {"hostname": "node7", "gpu_name": None, "gpu_uuids": [], "driver": None}
    rec = HostRunRecord(host="gpu-a", status="running", facts=facts, agent_version="a" * 64, build_sha=None,
                        last_seq=3, results=1, errors=0, cases_total=3, done_counts=None, error=None, log=None,
                        info={}, started_at=None, finished_at=None)  # fmt: skip
    full = {"run_id": RUN, "host": "gpu-a", "suite": "slow", "agent_version": "a" * 64, "cases_total": 3,
            "facts": {"hostname": "node7"}}  # fmt: skip

    def hello(**over: Any) -> Event:
        data = {k: v for k, v in {**full, **over}.items() if v is not ...}
        return Event(seq=0, type="hello", data=data)

    assert hello_record_conflicts(hello(), suite="slow", rec=rec) == []
    assert hello_record_conflicts(hello(agent_version="dev"), suite="slow", rec=rec) == []
    assert hello_record_conflicts(hello(facts=...), suite="slow", rec=rec) == [
        "host fact hostname is None in the spool, 'node7' stored for gpu-a"]
    assert hello_record_conflicts(hello(facts={"hostname": None}), suite="slow", rec=rec) == [
        "host fact hostname is None in the spool, 'node7' stored for gpu-a"]
    assert hello_record_conflicts(hello(agent_version=...), suite="slow", rec=rec) == [
        "its hello names agent none, the stored host run agent aaaaaaaaaaaa"]
    assert hello_record_conflicts(hello(cases_total=...), suite="slow", rec=rec) == [
        "its hello announces no cases, the stored host run 3 cases"]
    assert hello_record_conflicts(hello(suite=...), suite="slow", rec=rec) == [
        "its hello names suite None, the stored run is of suite 'slow'"]
    gpu = {"torch": {"devices": [{"name": "NVIDIA H200"}]}, "hostname": "node7"}  # a GPU the stored run lacks
    assert hello_record_conflicts(hello(facts=gpu), suite="slow", rec=rec) == [
        "host fact gpu_name is 'NVIDIA H200' in the spool, None stored for gpu-a"]
    bad_spec = HostRunRecord(**{**rec.__dict__, "cases_total": 0})
    assert hello_record_conflicts(hello(suite=None, cases_total=0), suite="slow", rec=bad_spec) == []


def test_log_text_is_compared_as_far_as_the_store_keeps_it() -> None:
    """The store keeps a host run's log as the last characters of its entries joined by newlines, without
    positions: what it holds is compared and the first entry that does not read the same is named; entries cut
    off its start are not compared."""
    from orchestrator.spool_check import log_conflict
    from orchestrator.store.compute import append_bounded

    entries = [(3, "[info] " + "x" * 30), (5, "[info] second"), (8, "[warning] third")]
    stored = None
    for _, text in entries:
        stored = append_bounded(stored, text, 40)
    assert log_conflict(entries, stored, last_seq=9, limit=40) is None
    assert log_conflict([(3, "[info] " + "y" * 30), *entries[1:]], stored, last_seq=9, limit=40) == (
        "line 3: log text is 'yyyyyyyyyy', 'xxxxxxxxxx' stored"  # the part the store keeps
    )
    tail = None
    for _, text in entries:
        tail = append_bounded(tail, text, 29)
    assert tail == "[info] second\n[warning] third"
    assert log_conflict([(3, "[info] " + "y" * 30), *entries[1:]], tail, last_seq=9, limit=29) is None  # cut off
    assert log_conflict([entries[0], (5, "[info] secund"), entries[2]], stored, last_seq=9, limit=40) == (
        "line 5: log text is '[info] secund', '[info] second' stored"
    )
    assert log_conflict([entries[0], (5, "[info] second!"), entries[2]], stored, last_seq=9, limit=40) == (
        "line 5: log text is '[info] second!', '[info] second' stored"
    )
    whole = "\n".join(text for _, text in entries)
    assert log_conflict(entries[:2], whole, last_seq=9) == (
        "log: the store holds '[warning] third' after line 5's log text, which no line of the spool up to line 9 "
        "writes"
    )
    assert log_conflict([entries[0], (5, "[info] second!"), entries[2]], whole, last_seq=9) == (
        "line 5: log text is '[info] second!', '[info] second' stored"
    )
    assert log_conflict(entries[:2], stored, last_seq=9, limit=40) == (  # cut: aligned at the end
        "line 5: log text is '[info] second', '[warning] third' stored"
    )
    assert log_conflict([*entries, (9, "[info] more")], stored, last_seq=9, limit=40) is not None
    assert log_conflict([], None, last_seq=9) is None
