"""nccl-tests as a suite source end to end over real SSH (sshd test bed): a fake ``all_reduce_perf`` deployed as a
build prints, for the requested size, what the recorded samples in tests/fixtures/nccl-tests/ hold (its -J JSON
or its stdout table); the packaged ``nccl-allreduce`` suites store one row per size with the samples' values."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
SAMPLE = json.loads((FIX / "all_reduce_perf_8xh200.json").read_text())["results"]
MIB = 1048576

FAKE = '''\
#!{python}
"""A stand-in all_reduce_perf: the recorded sample's header, the line of -b SIZE, its footer (or, with -J FILE,
the recorded JSON with that size's result). Size 24 prints a malformed line / writes broken JSON."""
import argparse, json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("-b", type=int)
p.add_argument("-e", type=int)
p.add_argument("-g", type=int)
p.add_argument("-J")
a = p.parse_args()
if os.environ.get("NCCL_NVLS_ENABLE") != "0" or a.b != a.e or a.g != 8:
    sys.exit("fake all_reduce_perf: want NCCL_NVLS_ENABLE=0, -b = -e and -g 8")
lines = open(os.path.join(here, "sample.txt")).read().splitlines()
table = [i for i, ln in enumerate(lines) if ln[:1] == " "]
rows = [ln for ln in lines if ln.split()[:1] == [str(a.b)]]
if a.b == 24:
    rows = ["          24             6     float     sum      -1    1x.20    0.00    0.00       0"]
print("\\n".join(lines[: table[0]] + rows + lines[table[-1] + 1 :]))
if a.J:
    doc = json.load(open(os.path.join(here, "sample.json")))
    doc["results"] = [r for r in doc["results"] if r["size"] == a.b]
    with open(a.J, "w") as f:
        f.write(json.dumps(doc) if a.b != 24 else json.dumps(doc)[:40])
'''


@pytest.fixture
def orch(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> Orch:
    o, _ = two_hosts
    build = tmp_path / "nccl-tests-build"
    build.mkdir()
    fake = build / "all_reduce_perf"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    shutil.copy(FIX / "all_reduce_perf_8xh200.txt", build / "sample.txt")
    shutil.copy(FIX / "all_reduce_perf_8xh200.json", build / "sample.json")
    doc = o.json("deploy", "--hosts", "b300", "--build", str(build))
    assert [r["build"] for r in doc["hosts"]] == ["uploaded"]
    return o


def _rows(o: Orch, run_id: str) -> dict[int, Any]:
    return {r.case["size_bytes"]: r for r in Store.from_url(o.db_url).results(run_id, limit=100).items}


def _values(row: Any) -> dict[str, float]:
    return {k: v["value"] for k, v in row.metrics.items() if k != "wall_ms"}


@pytest.mark.parametrize("suite", ["nccl-allreduce", "nccl-allreduce-text"])
def test_one_stored_row_per_size_with_the_samples_values(orch: Orch, suite: str) -> None:
    doc = orch.json(
        "run", suite, "--hosts", "b300", "--set", "size_bytes=8,1MiB,8GiB", "--set", "binary={build}/all_reduce_perf"
    )
    assert doc["status"] == "completed", doc
    rows = _rows(orch, doc["run_id"])
    assert sorted(rows) == [8, MIB, 8 * 2**30] and all(r.status == "ok" for r in rows.values())
    r = rows[MIB]
    assert r.case == {"size_bytes": MIB, "gpus": 8, "binary": "{build}/all_reduce_perf"}
    assert r.info is not None and r.info["argv"][0].endswith("/.orch/builds/current/all_reduce_perf")
    assert {k: v["unit"] for k, v in r.metrics.items()} == {
        "wall_ms": "ms", "time_us": "us", "algbw_gbps": "GB/s", "busbw_gbps": "GB/s", "wrong": "elements",
        "time_us_inplace": "us", "algbw_gbps_inplace": "GB/s", "busbw_gbps_inplace": "GB/s",
        "wrong_inplace": "elements",
    }  # fmt: skip
    for size, row in rows.items():
        (rec,) = [s for s in SAMPLE if s["size"] == size]
        want: dict[str, float] = {}
        for key, suffix in (("out_of_place", ""), ("in_place", "_inplace")):
            body = rec[key]
            want |= {f"time_us{suffix}": body["time"], f"algbw_gbps{suffix}": body["alg_bw"]}
            want |= {f"busbw_gbps{suffix}": body["bus_bw"], f"wrong{suffix}": body["nwrong"]}
        got = _values(row)
        if suite == "nccl-allreduce":
            assert got == want
        else:  # the table prints 2 decimals
            assert got.keys() == want.keys() and all(abs(got[k] - v) <= 0.005 for k, v in want.items()), got
    series = Store.from_url(orch.db_url).series(suite=suite, metric="busbw_gbps", x="size_bytes")
    assert [p.x for p in series.lines[0].points] == [8.0, float(MIB), float(8 * 2**30)]


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        ("nccl-allreduce", "parser nccl-tests found no usable nccl-tests output (nccl-tests JSON: not JSON"),
        (
            "nccl-allreduce-text",
            "parser nccl-tests found no usable nccl-tests output (nccl-tests line 18: time '1x.20' is not a number)",
        ),
    ],
)
def test_a_malformed_output_is_a_failed_case_with_the_reason(orch: Orch, suite: str, message: str) -> None:
    res = orch(
        "run", suite, "--hosts", "b300", "--set", "size_bytes=16,24", "--set", "binary={build}/all_reduce_perf",
        "--json",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["status"] == "partial" and doc["hosts"][0]["errors"] == 1 and doc["hosts"][0]["results"] == 1
    rows = _rows(orch, doc["run_id"])
    assert rows[16].status == "ok" and rows[16].metrics["time_us"]["value"] == 13.64
    assert rows[24].status == "error" and rows[24].error is not None
    assert rows[24].error.startswith(message), rows[24].error
