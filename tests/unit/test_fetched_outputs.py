"""A command suite's output fetched from the host is parsed only when it is the file its result line describes
(``agentctl.fetched_outputs_differ``): same count of timed runs, each the same size and sha256."""

from __future__ import annotations

from typing import Any

from orchestrator.agentctl import fetched_outputs_differ

A = {"path": "outputs/1/0.stdout", "bytes": 70007, "sha256": "a" * 64}
B = {"path": "outputs/1/1.stdout", "bytes": 12, "sha256": "b" * 64}
INFO: dict[str, Any] = {"parsed": "stdout", "files": [{"stdout": A}, {"stdout": B}]}


def _got(*files: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"run": k, "bytes": f["bytes"], "sha256": f["sha256"]} for k, f in enumerate(files)]


def test_the_same_files_are_parsed() -> None:
    assert fetched_outputs_differ(INFO, _got(A, B), 1) is None


def test_a_file_appended_to_or_rewritten_is_named_with_both_digests() -> None:
    said = fetched_outputs_differ(INFO, _got(A, {**B, "bytes": 19}), 1)
    assert said is not None and said.startswith("case 1 run 1 stdout: the file on the host is 19 bytes, sha256 bbbb")
    assert f"the result line says 12 bytes, sha256 {'b' * 64}" in said
    assert fetched_outputs_differ(INFO, _got({**A, "sha256": "c" * 64}, B), 1) is not None  # same size


def test_a_run_more_or_less_or_no_digests_is_not_parsed() -> None:
    assert "holds 1 stdout file(s) of its timed runs, its result line describes 2" in str(
        fetched_outputs_differ(INFO, _got(A), 1)
    )
    assert fetched_outputs_differ(INFO, _got(A, B, B), 1) is not None
    assert fetched_outputs_differ(INFO, None, 1) is not None  # an answer without the files read
    assert fetched_outputs_differ({"parsed": "output", "files": [{"stdout": A}]}, _got(A), 1) is not None
