"""A host's end of a run from its ``done`` line (pure): what is kept of the line, each disagreement's sentence, and
each verdict with its exact text — the survivors of mutation testing ``orchestrator/ingest.py`` (docs/testing.md)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.ingest import HostVerdict, coverage_problem, done_record, host_verdict, reconcile
from orchestrator.protocol import Event


def _done(seq: int = 8, **data: Any) -> dict[str, Any]:
    return done_record(Event(seq=seq, type="done", data=data))


def test_done_record_keeps_counts_status_position_and_a_reason_only_when_given() -> None:
    counts = {"lines": 8, "results": 6, "errors": 0}
    assert _done(8, counts=counts) == {**counts, "status": "completed", "position": 8}  # no status: completed
    assert _done(3, status="cancelled") == {"status": "cancelled", "position": 3}  # no counts: none invented
    assert _done(3, status="failed", counts=[1, 2]) == {"status": "failed", "position": 3}  # counts not an object
    enospc = "cannot write /home/u/.orch/runs/r/h/events.jsonl: No space left on device (ENOSPC)"
    assert _done(5, status="failed", reason=enospc)["reason"] == enospc
    assert "reason" not in _done(5, status="failed", reason="")
    assert "reason" not in _done(5, status="failed", reason=5)


def test_reconcile_sentences_name_the_host_count_and_the_stored_one() -> None:
    done = {"lines": 7, "results": 6, "errors": 0}
    assert reconcile(done, done_seq=8, results=6, errors=0) == ["7 lines on the host before done, 8 stored"]
    assert reconcile({"lines": 8, "errors": 0}, done_seq=8, results=6, errors=0) == [
        "no count of results on the host, 6 stored"
    ]


@pytest.mark.parametrize("bad", [8.0, -8, True, "8", None])
def test_a_count_that_is_not_a_non_negative_int_is_a_disagreement(bad: Any) -> None:
    """8.0, "8": JSON that is not an integer; -8: never a count; True: a bool is not a count though True == 1."""
    ok = {"lines": 8, "results": 6, "errors": 0}
    assert reconcile({**ok, "lines": bad}, done_seq=8, results=6, errors=0) == [
        f"{bad} lines on the host before done, 8 stored"
    ]
    assert reconcile({**ok, "results": bad}, done_seq=8, results=6, errors=0) == [
        f"{bad} results on the host, 6 stored"
    ]
    # a negative count never agrees, not even with a (corrupt) negative stored one
    assert reconcile({**ok, "errors": -1}, done_seq=8, results=6, errors=-1) == ["-1 errors on the host, -1 stored"]


def test_done_without_a_stored_position_never_agrees_on_lines() -> None:
    """A done record without an int position counts as position -1: no line count (never negative) matches it."""
    for position in (None, "8", 8.0):
        done = {"lines": 1, "results": 0, "errors": 0, "status": "completed", "position": position}
        v = host_verdict(done, results=0, errors=0)
        assert v == HostVerdict(
            "failed", "1 lines on the host before done, -1 stored (the store does not hold what the agent wrote)"
        )


def test_no_done_line_is_a_failed_host_with_the_reason() -> None:
    assert host_verdict(None, results=3, errors=0) == HostVerdict(
        "failed", "the agent's done line was not stored: the host's end of the run is unknown"
    )


def _rec(results: int, errors: int, status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"lines": 4, "results": results, "errors": errors, "status": status, "position": 4, **extra}


def test_the_agents_reason_comes_first_then_the_disagreements() -> None:
    why = "cannot write events.jsonl: No space left on device (ENOSPC)"
    assert host_verdict(_rec(2, 0, "failed", reason=why), results=2, errors=0) == HostVerdict("failed", why)
    assert host_verdict(_rec(2, 0, "failed", reason=why), results=1, errors=0) == HostVerdict(
        "failed", f"{why}; 2 results on the host, 1 stored"
    )
    # an empty reason is no reason: the counts agree and nothing failed
    assert host_verdict(_rec(2, 0, reason=""), results=2, errors=0) == HostVerdict("completed")


def test_disagreement_text_is_every_problem_joined() -> None:
    assert host_verdict(_rec(2, 1), results=1, errors=0) == HostVerdict(
        "failed",
        "2 results on the host, 1 stored; 1 errors on the host, 0 stored"
        " (the store does not hold what the agent wrote)",
    )


@pytest.mark.parametrize(
    ("results", "errors", "status", "want"),
    [
        (0, 0, "completed", HostVerdict("completed")),  # an empty sweep is not a failure
        (3, 0, "completed", HostVerdict("completed")),
        (3, 1, "completed", HostVerdict("partial", "1 case failed")),
        (1, 2, "completed", HostVerdict("partial", "2 cases failed")),
        (0, 1, "completed", HostVerdict("failed", "1 case failed")),  # every case failed
        (0, 2, "completed", HostVerdict("failed", "2 cases failed")),
        (3, 0, "failed", HostVerdict("failed", "the agent reported failure")),  # the agent's word wins
        (3, 1, "failed", HostVerdict("failed", "1 case failed")),
        (0, 0, "cancelled", HostVerdict("cancelled")),
    ],
)
def test_verdicts_when_the_counts_agree(results: int, errors: int, status: str, want: HostVerdict) -> None:
    assert host_verdict(_rec(results, errors, status), results=results, errors=errors) == want


def test_the_first_error_is_named_with_the_count_of_failed_cases() -> None:
    done = _done(8, counts={"lines": 8, "results": 4, "errors": 0})
    why = "parser regex found no match in the output; last output lines: oops"
    assert host_verdict(done, results=3, errors=1, judged=1, first_error=why) == HostVerdict(
        "partial", f"1 case failed: {why}"
    )
    assert host_verdict(done, results=0, errors=4, judged=4, first_error="x" * 400) == HostVerdict(
        "failed", "4 cases failed: " + "x" * 300
    )
    assert host_verdict(done, results=3, errors=1, judged=1) == HostVerdict("partial", "1 case failed")


def test_a_spool_holding_more_than_the_agent_wrote_is_not_called_a_loss() -> None:
    """A tester's ``echo junk >> events.jsonl`` mid-run: "9 lines on the host before done, 10 stored; 0 errors on
    the host, 1 stored (the store does not hold what the agent wrote)" — the store held more, not less. Every
    count larger in the store is a line the agent did not write; one count smaller is a loss, as before."""
    foreign = done_record(Event(seq=10, type="done", data={"counts": {"lines": 9, "results": 4, "errors": 0}}))
    assert host_verdict(foreign, results=4, errors=1) == HostVerdict(
        "failed",
        "9 lines on the host before done, 10 stored; 0 errors on the host, 1 stored"
        " (the spool holds lines the agent did not write)",
    )
    lost = done_record(Event(seq=8, type="done", data={"counts": {"lines": 9, "results": 4, "errors": 0}}))
    assert host_verdict(lost, results=3, errors=0).error == (
        "9 lines on the host before done, 8 stored; 4 results on the host, 3 stored"
        " (the store does not hold what the agent wrote)"
    )
    both = done_record(Event(seq=10, type="done", data={"counts": {"lines": 9, "results": 4, "errors": 0}}))
    loss = "(the store does not hold what the agent wrote)"
    assert (host_verdict(both, results=3, errors=2).error or "").endswith(loss)
    unknown = done_record(Event(seq=10, type="done", data={"counts": {"lines": 9, "results": "x", "errors": 0}}))
    assert (host_verdict(unknown, results=4, errors=1).error or "").endswith(loss)
    judged = done_record(Event(seq=10, type="done", data={"counts": {"lines": 9, "results": 4, "errors": 0}}))
    # a judged error row counts as the agent's result: 3 ok + 1 judged = the agent's 4; one foreign error more
    foreign_text = "(the spool holds lines the agent did not write)"
    assert (host_verdict(judged, results=3, errors=2, judged=1).error or "").endswith(foreign_text)


@pytest.mark.parametrize(
    ("total", "indices", "said"),
    [
        (3, [0, 1, 2], None),
        (None, [5], None),  # a spool without cases_total: nothing to judge
        (3, [0, 2], "the agent's hello announced 3 cases: no result or error stored for 1 case (1)"),
        (1, [], "the agent's hello announced 1 case: no result or error stored for 1 case (0)"),
        (2, [0, 1, 2, -1], "the agent's hello announced 2 cases: rows stored for 2 cases the run does not have "
         "(-1, 2)"),
        (3, [0, 9], "no result or error stored for 2 cases (1, 2) and rows stored for 1 case the run does not "
         "have (9)"),
        (10, [], "no result or error stored for 10 cases (0, 1, 2, 3, 4, 5, 6, 7 and 2 more)"),
    ],
)
def test_coverage_problem_names_missing_and_foreign_cases(
    total: int | None, indices: list[int], said: str | None
) -> None:
    got = coverage_problem(total, indices)
    assert got == said if said is None or said.startswith("the agent's") else got is not None and said in got


def test_counts_that_agree_with_a_case_missing_fail_the_host_and_keep_the_failed_cases_text() -> None:
    done = {"status": "completed", "results": 1, "errors": 1, "lines": 5, "position": 5}
    v = host_verdict(done, results=1, errors=1, first_error="boom", cases_total=3, case_indices=[0, 1])
    assert v.status == "failed"
    assert v.error == ("the agent's hello announced 3 cases: no result or error stored for 1 case (2); 1 case failed: "
                       "boom (the store does not hold one outcome per case)")  # fmt: skip
    assert host_verdict(done, results=1, errors=1, cases_total=2, case_indices=[0, 1]).status == "partial"
    cancelled = {**done, "status": "cancelled"}
    assert host_verdict(cancelled, results=1, errors=0, cases_total=3, case_indices=[0]).status == "cancelled"


def test_counts_that_disagree_name_the_first_error_row_as_their_likely_cause() -> None:
    done = {"status": "completed", "results": 3, "errors": 0, "lines": 4, "position": 4}
    refused = "agent line 2 (result) was not stored: metrics.t.value is 1e400, past the range of a double"
    v = host_verdict(done, results=2, errors=1, first_error=refused)
    assert v.status == "failed"
    assert v.error == ("3 results on the host, 2 stored; 0 errors on the host, 1 stored (the store does not hold "
                       f"what the agent wrote); the first error row: {refused}")  # fmt: skip
    assert host_verdict(done, results=2, errors=1).error == ("3 results on the host, 2 stored; 0 errors on the "
                                                             "host, 1 stored (the store does not hold what the "
                                                             "agent wrote)")  # fmt: skip


def test_an_error_row_for_a_line_the_agent_counted_as_another_kind_is_not_called_foreign() -> None:
    """A tester's: a log line past the 64 MiB cap is one error row; the agent counted it as a line (not an error),
    so the counts differ by that row. Every line is the agent's (the line counts agree): the verdict said "the
    spool holds lines the agent did not write", which sent the reader looking for a tampered spool."""
    done = done_record(Event(seq=9, type="done", data={"counts": {"lines": 9, "results": 4, "errors": 0}}))
    said = host_verdict(done, results=4, errors=1, first_error="agent line 5 is 67,108,865 bytes, past the cap").error
    assert said == (
        "0 errors on the host, 1 stored (a line counted as neither result nor error on the host could not be taken "
        "as written (past the line cap, not valid, or not the agent's) and is stored as an error row); the first "
        "error row: agent line 5 is 67,108,865 bytes, past the cap"
    )


def test_a_cancelled_host_s_counts_are_reconciled_too() -> None:
    """A tester's: a done line of status cancelled counting 3 results, 1 stored, ended ``cancelled`` without a word
    about the 2 results the agent wrote and the store lacks."""
    done = done_record(Event(seq=6, type="done", data={"status": "cancelled",
                                                       "counts": {"lines": 6, "results": 3, "errors": 0}}))  # fmt: skip
    assert host_verdict(done, results=1, errors=0) == HostVerdict(
        "cancelled", "3 results on the host, 1 stored (the store does not hold what the agent wrote)"
    )
    assert host_verdict(done, results=3, errors=0) == HostVerdict("cancelled")
