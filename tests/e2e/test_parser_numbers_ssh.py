"""Numbers misread from engine output, end to end over real SSH (sshd test bed): a fake tool deployed as a build
writes the case's sample to ``{output}``; ``orch run`` stores what the parsers make of it. nccl-tests rows with
wrong elements and a ``-J`` file of an unexpected shape are errors of their own cases (the host partial, the
other cases stored); two runs appended to one bench_serving file give the last run's figures and a warning; a
negative failed count is a parse error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Orch, deploy_fake_tool, run_suite_b300
from tests.e2e.test_parser_kinds_ssh import FAKE

pytestmark = [pytest.mark.sshd]

FIX = Path(__file__).parents[1] / "fixtures"
GOOD_JSON = (FIX / "nccl-tests" / "all_reduce_perf_8xh200.json").read_text()
GOOD_TXT = (FIX / "nccl-tests" / "all_reduce_perf_8xh200.txt").read_text()
MIB = 1048576


def _malformed() -> str:
    doc = json.loads(GOOD_JSON)
    next(r for r in doc["results"] if r["size"] == MIB)["out_of_place"] = [1, 2]
    return json.dumps(doc)


SAMPLES = {
    "nccl-1": GOOD_JSON,
    "nccl-2": (FIX / "nccl-tests" / "all_reduce_perf_wrong.json").read_text(),
    "nccl-3": _malformed(),
    "nccl-4": GOOD_TXT,
    "nccl-5": (FIX / "nccl-tests" / "all_reduce_perf_wrong.txt").read_text(),
    "sglang-1": (FIX / "engines" / "sglang_serving_appended.jsonl").read_text(),
    "vllm-1": (FIX / "engines" / "vllm_serve_failed_negative.json").read_text(),
    "vllm-2": (FIX / "engines" / "vllm_serve.json").read_text(),
    # the tool's last JSON line holds a character str.splitlines() breaks at (JSON allows them unescaped): it was
    # cut into pieces that are not JSON and the line before it was read, t = 1.0 stored without a word
    **{f"jsonl-{i}": '{"t": 1.0}\n{"t": 2.0, "note": "a' + ch + 'b"}\n' for i, ch in enumerate("\u2028\u2029\x85", 1)},
    # the same past 64 KiB of log lines before it: an output orch reads from the host's file, not the excerpt
    "jsonl-4": "[tool] warming up\n" * 4000 + '{"t": 1.0}\n{"t": 2.0, "note": "a\u2028b"}\n',
    # a progress line overwritten by \r before the result (what a terminal shows): still read
    "jsonl-5": '{"t": 1.0}\nstep 1/2\rstep 2/2\r{"t": 2.0}\n',
    # per-iteration lines, then the pretty-printed result (its last line-sized object was read: t = 1.1)
    "json-1": '{"iter": 1, "t": 1.0}\n{"iter": 2, "t": 1.1}\n{\n  "t": 1.05,\n  "iters": 2\n}\n',
    # the result's last line cut short: an error, not the line before it
    "json-2": '{"t": 1.0}\n{\n  "t": 2.0,\n',
}


def _suite(name: str, kind: str, parser: str, cases: list[int]) -> str:
    return f"""\
name: {name}
description: the {parser} parser over misread numbers
command: ["{{build}}/fake-tool", "{kind}", "{{case}}", "{{output}}"]
params:
  case: {{type: list, default: {cases}, help: "sample number"}}
  size_bytes: {{type: int, default: {MIB}, help: "nccl-tests: the message size of the case"}}
timeout_s: 60
parser: {parser}
"""


SUITES = {
    "n-nccl": _suite("n-nccl", "nccl", "nccl-tests", [1, 2, 3, 4, 5]),
    "n-sglang": _suite("n-sglang", "sglang", "sglang-serving", [1]),
    "n-vllm": _suite("n-vllm", "vllm", "vllm-serve", [1, 2]),
    "n-jsonl": _suite("n-jsonl", "jsonl", "jsonl", [1, 2, 3, 4, 5]).replace("{output}", "-")
    + "metrics: {t: {unit: ms}}\n",
    "n-json": _suite("n-json", "json", "json", [1, 2]) + "metrics: {t: {unit: ms}}\n",
}


@pytest.fixture
def deployed(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> tuple[Orch, Path]:
    orch, _ = two_hosts
    return orch, deploy_fake_tool(orch, tmp_path, FAKE.format(python=sys.executable), SAMPLES, SUITES)


_run = run_suite_b300


def test_misread_numbers_over_ssh(deployed: tuple[Orch, Path]) -> None:
    orch, suites = deployed
    doc, rows = _run(orch, suites, "n-nccl")
    assert doc["status"] == "partial" and doc["hosts"][0]["status"] == "partial", doc
    assert [rows[i].status for i in range(1, 6)] == ["ok", "error", "error", "ok", "error"]
    assert rows[1].metrics["busbw_gbps"]["value"] == 96.732103 and rows[1].metrics["wrong"]["value"] == 0
    assert rows[4].metrics["busbw_gbps"]["value"] == 96.73 and rows[4].metrics["wrong"] == {"value": 0,
                                                                                           "unit": "elements"}
    assert "nccl-tests results[1] (size 1048576 B): #wrong is 12 out-of-place and 12 in-place" in (rows[2].error or "")
    assert "nccl-tests JSON: results[17].out_of_place must be an object with time, alg_bw, bus_bw and nwrong, got " \
        "[1, 2]" in (rows[3].error or "")
    assert "nccl-tests line 19 (size 1048576 B): #wrong is 12 out-of-place and 12 in-place" in (rows[5].error or "")
    assert not rows[2].metrics and not rows[5].metrics  # the invalid bandwidth is never stored
    shown = orch("runs", "show", doc["run_id"])
    assert shown.returncode == 0 and "internal error" not in shown.stdout + shown.stderr
    assert "│ 0 elements │" in shown.stdout, shown.stdout  # an integer count, not 0.0
    as_json = orch("runs", "show", doc["run_id"], "--json")
    assert as_json.returncode == 0 and "#wrong is 12 out-of-place and 12 in-place" in as_json.stdout

    doc, rows = _run(orch, suites, "n-sglang")
    assert rows[1].status == "ok" and rows[1].metrics["output_throughput"]["value"] == 5335.06
    assert not any(k.endswith("_ms") and k != "wall_ms" for k in rows[1].metrics), sorted(rows[1].metrics)
    assert rows[1].info is not None and rows[1].info["warnings"] == [
        "the output holds 2 sglang-serving result records (lines 1, 2): used the last one (line 2) for every metric; "
        "the others are earlier runs appended to the same file"
    ]

    doc, rows = _run(orch, suites, "n-vllm")
    assert rows[1].status == "error" and "'failed' is -3, not a request count" in (rows[1].error or "")
    assert rows[2].status == "ok" and rows[2].metrics["failed_requests"]["value"] == 0


def test_a_json_line_holding_a_unicode_line_separator_is_one_line(deployed: tuple[Orch, Path]) -> None:
    """U+2028, U+2029 and U+0085 inside the tool's last JSON line (issue 10: a figure the tool never gave as its
    result was stored, t = 1.0 from the line before, run completed, exit 0)."""
    orch, suites = deployed
    doc, rows = _run(orch, suites, "n-jsonl")
    assert doc["status"] == "completed", doc
    assert {i: rows[i].metrics["t"]["value"] for i in range(1, 6)} == dict.fromkeys(range(1, 6), 2.0)
    assert all("2 jsonl result records" in " ".join((rows[i].info or {}).get("warnings", [])) for i in range(1, 6))


def test_json_reads_the_tool_s_last_document_or_says_it_cannot(deployed: tuple[Orch, Path]) -> None:
    """A variant tester's: log lines, per-iteration JSON lines, then the pretty-printed result: its last
    one-line object was stored (t = 1.1 for a result of 1.05), completed, exit 0."""
    orch, suites = deployed
    doc, rows = _run(orch, suites, "n-json")
    assert doc["status"] == "partial", doc
    assert rows[1].status == "ok" and rows[1].metrics["t"]["value"] == 1.05
    assert "3 json result records (lines 1, 2, 3)" in " ".join((rows[1].info or {}).get("warnings", []))
    assert rows[2].status == "error" and "output line 2 starts a JSON object that is not JSON" in (rows[2].error or "")
