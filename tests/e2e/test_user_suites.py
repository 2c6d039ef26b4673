"""User suites end to end over real SSH (sshd test bed): a fake engine build deployed with ``orch deploy --build``,
suite files over it run with ``orch run`` on two hosts, outputs parsed into the store, references checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

FAKE_ENGINE = '''\
#!{python}
"""A stand-in engine benchmark: prints results in the format named by argv[1] (numbers follow the arguments)."""
import argparse, json, sys

p = argparse.ArgumentParser()
p.add_argument("format")
p.add_argument("--batch", type=int, default=1)
p.add_argument("--input-len", type=int, default=128)
p.add_argument("--concurrency", type=int, default=1)
p.add_argument("--spec", action="store_true")
p.add_argument("--result-filename")
a = p.parse_args()
print("[fake] loading weights ... done", flush=True)
if a.format == "one-batch":
    rec = {{"run_name": "fake", "batch_size": a.batch, "input_len": a.input_len, "output_len": 16,
           "prefill_latency": a.input_len / 10000, "prefill_throughput": 10000.0 * a.batch,
           "median_decode_latency": 0.01, "median_decode_throughput": 100.0 * a.batch,
           "total_latency": 0.2, "overall_throughput": 80.0 * a.batch}}
    with open(a.result_filename, "a") as f:
        f.write(json.dumps(rec) + "\\n")
elif a.format == "serving":
    rec = {{"backend": "fake", "request_rate": float("inf"), "max_concurrency": a.concurrency, "duration": 10.0,
           "completed": 100, "output_throughput": 50.0 * a.concurrency, "median_ttft_ms": 20.0 + a.concurrency,
           "median_tpot_ms": 5.0, "median_itl_ms": 5.0}}
    if a.spec:
        rec["accept_length"] = 2.5
    print(json.dumps(rec))
elif a.format == "garbage":
    print("no numbers today")
else:
    sys.stderr.write("fake-engine: unknown format " + a.format + "\\n")
    sys.exit(2)
'''

ONE_BATCH = """\
name: fake-one-batch
description: fake engine's static-batch decode (SGLang bench_one_batch format, written to --result-filename)
command: ["{build}/bin/fake-engine", "one-batch", "--batch", "{batch}", "--input-len", "{input_len}",
          "--result-filename", "{output}"]
params:
  batch: {type: list, default: [1, 2, 4], help: "sequences per batch"}
  input_len: {type: int, default: 128, min: 1, help: "prompt length, tokens"}
timeout_s: 30
parser: sglang-one-batch
metrics:
  decode_tput: {path: median_decode_throughput}
  decode_step: {path: median_decode_latency}
  prefill: {path: prefill_latency}
references:
  ct200: {decode_tput: ">= 150 tok/s"}
  b300: {decode_tput: "100 tok/s ±10%", decode_step: "<= 0.02 s"}
"""

SERVING = """\
name: fake-serving
description: fake engine serving benchmark (SGLang bench_serving JSONL on stdout) per concurrency
command: ["{build}/bin/fake-engine", "{fmt}", "--concurrency", "{concurrency}", "--spec"]
params:
  concurrency: {type: list, default: [1, 4, 16], help: "requests in flight"}
  fmt: {type: str, default: serving, choices: [serving, garbage, broken], help: "what the fake engine prints"}
parser: sglang-serving
repeat: 2
"""


def _build(tmp_path: Path) -> Path:
    build = tmp_path / "fake-build"
    (build / "bin").mkdir(parents=True)
    engine = build / "bin" / "fake-engine"
    engine.write_text(FAKE_ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    return build


@pytest.fixture
def deployed(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> tuple[Orch, Path]:
    orch, _ = two_hosts
    doc = orch.json("deploy", "--hosts", "ct200,b300", "--build", str(_build(tmp_path)))
    assert [r["build"] for r in doc["hosts"]] == ["uploaded", "uploaded"]
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "one-batch.yaml").write_text(ONE_BATCH)
    (suites / "serving.yml").write_text(SERVING)
    return orch, suites


def test_user_suite_runs_on_two_hosts_with_parsed_metrics_and_references(deployed: tuple[Orch, Path]) -> None:
    orch, suites = deployed
    doc = orch.json("run", "fake-one-batch", "--hosts", "ct200,b300", "--suite-dir", str(suites))
    assert doc["status"] == "completed", doc
    assert sorted((h["host"], h["results"]) for h in doc["hosts"]) == [("gpu-a", 3), ("gpu-b", 3)]
    store = Store.from_url(orch.db_url)
    rows = store.results(doc["run_id"], limit=100).items
    by = {(r.host, r.case["batch"]): r for r in rows}
    assert len(by) == 6 and all(r.status == "ok" for r in rows)
    r = by[("gpu-a", 4)]
    assert r.case == {"input_len": 128, "batch": 4}  # the argv is in info, not in the case
    assert {k: (v["value"], v["unit"]) for k, v in r.metrics.items() if k != "wall_ms"} == {
        "decode_tput": (400.0, "tok/s"),
        "decode_step": (0.01, "s"),
        "prefill": (0.0128, "s"),
    }
    assert r.metrics["wall_ms"]["unit"] == "ms" and r.metrics["wall_ms"]["n"] == 1
    assert r.info is not None and r.info["command"][0] == "{orch_build}/bin/fake-engine"
    assert r.info["argv"][0].endswith("/.orch/builds/current/bin/fake-engine")
    passes = {k: {m: v["pass"] for m, v in row.info["references"].items()} for k, row in by.items()}  # type: ignore[index]
    assert passes == {
        ("gpu-a", 1): {"decode_tput": False},
        ("gpu-a", 2): {"decode_tput": True},
        ("gpu-a", 4): {"decode_tput": True},
        ("gpu-b", 1): {"decode_tput": True, "decode_step": True},
        ("gpu-b", 2): {"decode_tput": False, "decode_step": True},
        ("gpu-b", 4): {"decode_tput": False, "decode_step": True},
    }
    assert by[("gpu-b", 2)].info["references"]["decode_tput"] == {  # type: ignore[index]
        "bound": "100 tok/s ±10%", "lower": 90.0, "upper": 110.0, "value": 200.0, "pass": False,
    }  # fmt: skip
    series = store.series(suite="fake-one-batch", metric="decode_tput", x="batch")
    assert {(ln.host, tuple((p.x, p.y) for p in ln.points)) for ln in series.lines} == {
        ("gpu-a", ((1.0, 100.0), (2.0, 200.0), (4.0, 400.0))),
        ("gpu-b", ((1.0, 100.0), (2.0, 200.0), (4.0, 400.0))),
    }
    assert series.unit == "tok/s"
    shown = orch("runs", "show", doc["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "FAIL decode_tput 100, want >= 150" in shown.stdout and "pass" in shown.stdout


def test_suite_dir_from_the_inventory_repeats_and_series_over_concurrency(deployed: tuple[Orch, Path]) -> None:
    orch, suites = deployed
    orch.inventory.write_text(orch.inventory.read_text() + f"suite_dir: {suites}\n")
    doc = orch.json("run", "fake-serving", "--hosts", "b300", "--set", "concurrency=1,4")
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    rows = sorted(store.results(doc["run_id"], limit=100, samples=True).items, key=lambda r: r.case["concurrency"])
    assert [(r.concurrency, r.case) for r in rows] == [
        (1, {"fmt": "serving", "concurrency": 1}),
        (4, {"fmt": "serving", "concurrency": 4}),
    ]
    m = rows[1].metrics
    assert m["output_throughput"]["value"] == 200.0 and m["output_throughput"]["unit"] == "tok/s"
    assert m["output_throughput"]["samples"] == [200.0, 200.0] and m["output_throughput"]["n"] == 2
    assert (m["median_ttft_ms"]["value"], m["median_ttft_ms"]["unit"]) == (24.0, "ms")
    assert (m["accept_length"]["value"], m["accept_length"]["unit"]) == (2.5, "tok/step")
    assert m["wall_ms"]["n"] == 2
    series = store.series(suite="fake-serving", metric="output_throughput", x="concurrency")
    assert [(p.x, p.y) for p in series.lines[0].points] == [(1.0, 50.0), (4.0, 200.0)]


def test_output_without_the_metric_or_a_failing_command_is_a_failed_case(deployed: tuple[Orch, Path]) -> None:
    orch, suites = deployed
    res = orch(
        "run", "fake-serving", "--hosts", "ct200", "--suite-dir", str(suites), "--set", "fmt=garbage",
        "--set", "concurrency=1", "--json",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["status"] == "failed" and doc["hosts"][0]["errors"] == 1
    store = Store.from_url(orch.db_url)
    (row,) = store.results(doc["run_id"], limit=10).items
    assert row.status == "error" and row.case == {"fmt": "garbage", "concurrency": 1}
    assert row.error is not None and row.error.startswith(
        "parser sglang-serving found no SGLang bench_serving result line"
    ), row.error
    assert "last output lines: [fake] loading weights ... done | no numbers today" in row.error
    res = orch(
        "run", "fake-serving", "--hosts", "ct200", "--suite-dir", str(suites), "--set", "fmt=broken",
        "--set", "concurrency=1", "--json",
    )  # fmt: skip
    (row,) = store.results(json.loads(res.stdout)["run_id"], limit=10).items
    assert row.status == "error" and row.error is not None
    assert "exited with status 2; stderr: fake-engine: unknown format broken" in row.error


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("timeout_s: 30", "timeout: 30", "one-batch.yaml:8: timeout: Extra inputs are not permitted"),
        ("min: 1, help", "min: one, help", "one-batch.yaml:7: params.input_len.min: Input should be a valid number"),
        ("parser: sglang-one-batch", "parser: sglang-onebatch", "one-batch.yaml:9: parser: unknown parser"),
        ('">= 150 tok/s"', '"fast enough"', "one-batch.yaml:15: references.ct200.decode_tput: reference 'fast enough'"),
        ('"{batch}"', '"{bacth}"', "one-batch.yaml:3: command[3]: unknown placeholder {bacth}"),
    ],
)
def test_suite_file_mistakes_name_file_line_and_key(
    deployed: tuple[Orch, Path], old: str, new: str, where: str
) -> None:
    orch, suites = deployed
    assert old in ONE_BATCH
    (suites / "one-batch.yaml").write_text(ONE_BATCH.replace(old, new, 1))
    res = orch("run", "fake-one-batch", "--hosts", "ct200", "--suite-dir", str(suites))
    assert res.returncode == 2
    err = " ".join(res.stderr.split())
    assert f"{suites}/{where}" in err, err
