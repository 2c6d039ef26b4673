"""``check_outputs`` (orchestrator/runlogs.py): what ``agent logs`` fetched against what the store recorded."""

from __future__ import annotations

from typing import Any

from orchestrator.runlogs import HostLogs, check_outputs

A = {"bytes": 3, "sha256": "a" * 64}
B = {"bytes": 4, "sha256": "b" * 64}
EMPTY = {"bytes": 0, "sha256": "e" * 64}


def _fetched(case: int, runs: dict[int, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    return {"case_index": case, "runs": [{"run": k, **{s: {"text": "x", "encoding": "utf-8", **f}
                                                        for s, f in v.items()}} for k, v in runs.items()]}  # fmt: skip


def test_all_present_and_equal_is_no_problem() -> None:
    logs = HostLogs("h", cases=[_fetched(0, {0: {"stdout": A, "stderr": EMPTY}})])
    check_outputs(logs, {0: [{"stdout": A, "stderr": EMPTY}]}, None)
    assert logs.error is None and logs.problems == [] and logs.missing == []
    assert logs.cases[0]["runs"][0]["stdout"]["check"] == "ok"


def test_some_runs_of_a_case_gone_are_counted_and_the_rest_summed() -> None:
    stored = {0: [{"stdout": A, "stderr": EMPTY} for _ in range(4)]}
    logs = HostLogs("h", cases=[_fetched(0, {0: {"stdout": A, "stderr": EMPTY}})])
    check_outputs(logs, stored, None)
    assert logs.problems == [
        f"case 0: 6 of 8 outputs gone from the host; stored: run 1 stdout 3 bytes, sha256 {'a' * 64}; "
        f"run 1 stderr empty; run 2 stdout 3 bytes, sha256 {'a' * 64}; and 3 more files (3 bytes)"
    ]
    assert logs.error == "1 of 1 case: outputs gone from the host or changed" and len(logs.missing) == 6


def test_a_changed_file_and_an_unrecorded_one() -> None:
    logs = HostLogs("h", cases=[_fetched(0, {0: {"stdout": B}}), _fetched(5, {0: {"stdout": A}})])
    check_outputs(logs, {0: [{"stdout": A}]}, None)
    changed, unrecorded = logs.cases[0]["runs"][0]["stdout"], logs.cases[1]["runs"][0]["stdout"]
    assert changed["check"] == "changed" and changed["stored"] == A
    assert unrecorded["check"] == "unrecorded" and unrecorded["stored"] is None
    assert logs.problems == [f"case 0 run 0 stdout: changed on the host since it was stored: now 4 bytes, sha256 "
                             f"{'b' * 64}; stored 3 bytes, sha256 {'a' * 64}"]  # fmt: skip
    assert logs.error == "1 of 2 cases: outputs gone from the host or changed"


def test_only_the_asked_case_is_checked_for_gone_outputs() -> None:
    logs = HostLogs("h")
    check_outputs(logs, {0: [{"stdout": A}], 1: [{"stdout": B}]}, 1)
    assert [m["case_index"] for m in logs.missing] == [1]
    assert logs.problems == [f"case 1: gone from the host; stored: run 0 stdout 4 bytes, sha256 {'b' * 64}"]


def test_a_stream_that_is_not_a_regular_file_is_named_for_what_it_is_not_gone() -> None:
    """``agent logs`` names what is in the place of an output it would not read (``not_read``): the line says it,
    the file is still listed as missing (nothing of it was fetched), and a truly gone file keeps its line."""
    fetched = {"case_index": 0, "runs": [{"run": 0, "not_read": {"stdout": "a FIFO"}}]}
    logs = HostLogs("h", cases=[fetched])
    check_outputs(logs, {0: [{"stdout": A, "stderr": EMPTY}]}, None)
    assert logs.problems == [
        "case 0: 1 of 2 outputs gone from the host; stored: run 0 stderr empty",
        f"case 0 run 0 stdout: a FIFO is in its place on the host, not a regular file: not read; stored: run 0 "
        f"stdout 3 bytes, sha256 {'a' * 64}",
    ]
    assert [m["stream"] for m in logs.missing] == ["stdout", "stderr"]
    assert logs.error == "1 of 1 case: outputs gone from the host or changed"
