"""Issue 11 end to end over real SSH (sshd test bed), one ``command`` suite per parser kind: a fake tool deployed
as a build prints the sample of the case (the inputs of the issue and recorded engine outputs) to stdout or to
``{output}``; ``orch run`` stores what the real parser makes of it, and ``orch runs show`` / ``runs compare`` show
the warnings of failed requests."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, deploy_fake_tool, run_suite_b300
from tests.unit.test_nccl_tests_parser import ERROR_COLUMN, RCCL

pytestmark = [pytest.mark.sshd]

ENGINES = Path(__file__).parents[1] / "fixtures" / "engines"
VLLM = json.loads((ENGINES / "vllm_serve.json").read_text())
SGLANG_LINE = (ENGINES / "sglang_serving.jsonl").read_text().splitlines()[0]

FAKE = '''\
#!{python}
"""A stand-in benchmark tool: `fake-tool KIND CASE OUT` prints samples/KIND-CASE.txt (OUT '-': to stdout, else
into the file OUT, as tools that write a result file do)."""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
kind, case, out = sys.argv[1:4]
if kind == "env":  # a tool that echoes its secret: in its result, and in its stderr when it fails (case 2)
    tok = os.environ.get("HF_TOKEN", "")
    print(json.dumps({{"completed": 10, "failed": 0, "duration": 1.0, "output_throughput": 5.0, "who": tok,
                      "knob": os.environ.get("PUBLIC_KNOB")}}))
    if case == "2":
        sys.stderr.write("401 Unauthorized for token " + tok + "\\n")
        sys.exit(3)
    sys.exit(0)
text = open(os.path.join(here, "samples", kind + "-" + case + ".txt")).read()
print("[fake] warming up ...", flush=True)
if out == "-":
    sys.stdout.write(text)
else:
    with open(out, "w") as f:
        f.write(text)
'''


def _vllm(num_prompts: int, completed: int, failed: int) -> str:
    doc = {**VLLM, "num_prompts": num_prompts, "completed": completed, "failed": failed}
    if completed == 0:  # what vllm bench serve writes when every request failed
        doc |= {k: 0.0 for k in doc if k.endswith("_ms") or k.endswith("_throughput")}
    return json.dumps(doc)


SAMPLES = {
    # issue 11 item 1: nccl-tests before the root column, its `error` column; a row shifted against its titles
    "nccl-1": ERROR_COLUMN,
    "nccl-2": ERROR_COLUMN.replace("sum    93.73", "sum  -1  93.73"),
    "nccl-3": RCCL,  # rccl-tests' table, without the case's size
    "nccl-4": ERROR_COLUMN + ERROR_COLUMN,  # two separate jobs each printed their table
    # issue 11 item 2: vLLM with every request failed, 99 of 100 failed, 5 of 1000 failed, the recorded run
    "vllm-1": json.dumps(VLLM),
    "vllm-2": _vllm(1000, 995, 5),
    "vllm-3": _vllm(200, 0, 200),
    "vllm-4": _vllm(100, 1, 99),
    # SGLang bench_serving: the recorded line, --output-details' errors list with 2 of 200 failed, nothing completed
    "sglang-1": SGLANG_LINE + "\n",
    "sglang-2": json.dumps({**json.loads(SGLANG_LINE.replace("Infinity", "1e999")), "completed": 198,
                            "errors": [""] * 198 + ["HTTP 500", "timeout"]}) + "\n",  # fmt: skip
    "sglang-3": json.dumps({**json.loads(SGLANG_LINE.replace("Infinity", "1e999")), "completed": 0}) + "\n",
    "onebatch-1": (ENGINES / "sglang_one_batch.jsonl").read_text(),
    "latency-1": (ENGINES / "vllm_latency.json").read_text(),
}


def _suite(name: str, kind: str, parser: str, cases: list[int], out: str, extra: str = "") -> str:
    return f"""\
name: {name}
description: the {parser} parser over the fake tool's samples
command: ["{{build}}/fake-tool", "{kind}", "{{case}}", "{out}"]
params:
  case: {{type: list, default: {cases}, help: "sample number"}}
  size_bytes: {{type: int, default: 4096, help: "nccl-tests: the message size of the case"}}
timeout_s: 60
parser: {parser}
{extra}"""


SUITES = {
    "k-nccl": _suite("k-nccl", "nccl", "nccl-tests", [1, 2, 3, 4], "-"),
    "k-vllm": _suite("k-vllm", "vllm", "vllm-serve", [1, 2, 3, 4], "{output}"),
    "k-sglang": _suite("k-sglang", "sglang", "sglang-serving", [1, 2, 3], "{output}", "max_failed_requests: 2%\n"),
    "k-onebatch": _suite("k-onebatch", "onebatch", "sglang-one-batch", [1], "{output}"),
    "k-latency": _suite("k-latency", "latency", "vllm-latency", [1], "{output}"),
    "k-secret": _suite("k-secret", "env", "vllm-serve", [1, 2], "-",
                       'env: {HF_TOKEN: "hf_SECRET_0123456789", PUBLIC_KNOB: {value: "knob-42", public: true}}\n'),
}  # fmt: skip
SECRET = "hf_SECRET_0123456789"


@pytest.fixture
def deployed(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> tuple[Orch, Path]:
    orch, _ = two_hosts
    return orch, deploy_fake_tool(orch, tmp_path, FAKE.format(python=sys.executable), SAMPLES, SUITES)


_run = run_suite_b300


def test_every_parser_kind_over_ssh(deployed: tuple[Orch, Path]) -> None:
    orch, suites = deployed

    doc, rows = _run(orch, suites, "k-nccl")
    assert doc["status"] == "partial" and doc["hosts"][0]["results"] == 1 and doc["hosts"][0]["errors"] == 3
    old = rows[1]
    assert old.status == "ok"
    assert {k: v["value"] for k, v in old.metrics.items() if k != "wall_ms"} == {
        "time_us": 93.73, "algbw_gbps": 0.04, "busbw_gbps": 0.09, "max_error": 1e-06,
        "time_us_inplace": 93.15, "algbw_gbps_inplace": 0.04, "busbw_gbps_inplace": 0.09, "max_error_inplace": 1e-06,
    }  # fmt: skip
    assert rows[2].status == "error" and rows[2].error is not None
    # the fake tool prints a log line first: the titles are on the output's line 4, the row on line 6
    assert "nccl-tests line 6: 13 columns where the column titles on line 4" in rows[2].error
    assert rows[3].status == "error" and rows[3].error is not None
    assert "0 result rows for size_bytes=4096 (sizes in the output: 1048576, 2097152); the command did not " \
        "measure that size" in rows[3].error
    assert rows[4].status == "error" and rows[4].error is not None
    assert "2 result rows for size_bytes=4096 (sizes in the output: 4096, 4096); the output holds 2 separate " \
        "tables (rows on lines 6, 13)" in rows[4].error and "-b SIZE" not in rows[4].error

    doc, rows = _run(orch, suites, "k-vllm")
    assert doc["status"] == "partial" and doc["hosts"][0]["warnings"] == 1
    assert rows[1].status == "ok" and rows[1].metrics["failed_requests"]["value"] == 0
    assert rows[2].status == "ok" and rows[2].metrics["failed_requests"]["value"] == 5
    assert rows[2].info is not None and rows[2].info["warnings"] == ["5 of 1000 requests failed (0.5%)"]
    assert rows[3].status == "error" and "0 of 200 requests completed" in (rows[3].error or "")
    assert rows[4].status == "error" and "99 of 100 requests failed (99.0%), above" in (rows[4].error or "")
    vllm_run = doc["run_id"]
    shown = orch("runs", "show", vllm_run)
    assert shown.returncode == 0, shown.stderr
    assert "warning: gpu-b case=2 size_bytes=4096: 5 of 1000 requests failed (0.5%)" in shown.stdout, shown.stdout
    again, _ = _run(orch, suites, "k-vllm")  # a second run of the same outputs: a run is never compared with itself
    cmp = orch("runs", "compare", vllm_run, again["run_id"], "--metric", "p99_ttft_ms")
    assert cmp.returncode == 0, cmp.stderr
    assert "warning: gpu-b case=2 size_bytes=4096: base: 5 failed requests; head: 5 failed requests" in cmp.stdout

    doc, rows = _run(orch, suites, "k-sglang")
    assert rows[1].status == "ok" and "failed_requests" not in rows[1].metrics  # the tool said nothing of failures
    assert rows[2].status == "ok" and rows[2].metrics["failed_requests"]["value"] == 2
    assert rows[2].info is not None and rows[2].info["warnings"] == ["2 of 200 requests failed (1.0%)"]
    assert rows[3].status == "error" and "0 of ? requests completed" in (rows[3].error or "")

    for suite, metric in (("k-onebatch", "median_decode_throughput"), ("k-latency", "avg_latency")):
        doc, rows = _run(orch, suites, suite)
        assert doc["status"] == "completed", doc
        assert rows[1].status == "ok" and metric in rows[1].metrics


def test_suite_env_secrets_stay_on_the_host(deployed: tuple[Orch, Path]) -> None:
    """Issue 11 item 6: the tool gets the secret; the store, runs show (--json), suites show and the API's data
    carry '***' — also where the tool echoed it — while a value marked public is shown."""
    orch, suites = deployed
    doc, rows = _run(orch, suites, "k-secret")
    assert rows[1].status == "ok" and rows[2].status == "error"
    assert rows[1].info is not None and '"who": "***"' in rows[1].info["output_tail"]  # it reached the tool
    assert '"knob": "knob-42"' in rows[1].info["output_tail"]
    assert "401 Unauthorized for token ***" in (rows[2].error or "")
    dump = "\n".join(sqlite3.connect(orch.db_url.removeprefix("sqlite:///")).iterdump())
    assert SECRET not in dump and "knob-42" in dump
    info = Store.from_url(orch.db_url).get_run(doc["run_id"]).host_runs[0].info
    assert info["spec"]["cases"][0]["env"] == {"HF_TOKEN": "***", "PUBLIC_KNOB": "knob-42"}
    for argv in (("runs", "show", doc["run_id"]), ("runs", "show", doc["run_id"], "--json"),
                 ("suites", "show", "k-secret", "--suite-dir", str(suites)), ("runs", "list")):  # fmt: skip
        res = orch(*argv)
        assert res.returncode == 0 and SECRET not in res.stdout + res.stderr, argv
    assert "HF_TOKEN=*** PUBLIC_KNOB=knob-42" in orch("suites", "show", "k-secret", "--suite-dir", str(suites)).stdout
