"""``orch runs compare`` through the real ``orch`` process on a SQLite store: incomparable runs are a message and
exit 2; the table has a verdict column, the summary counts the table's verdicts (and the API's), and a side whose
p10–p90 spread is wider than 20% of its median is marked noisy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")


def _run(store: Store, suite: str, figures: list[tuple[int, float, float, float]]) -> str:
    """A finished run on host h1 with one time_ms result per (M, median, p10, p90)."""
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite=suite, params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    store.ingest(rid, "h1", [
        Event(seq=i, type="result", data={"case": {"M": m}, "metrics": {
            "time_ms": {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90}}})
        for i, (m, med, p10, p90) in enumerate(figures)
    ])  # fmt: skip
    return rid


def test_runs_of_different_suites_exit_2_naming_both(orch: Orch, store: Store) -> None:
    base = _run(store, "moe-sweep", [(1, 1.0, 0.9, 1.1)])
    head = _run(store, "hbm-bandwidth", [(1, 1.0, 0.9, 1.1)])
    res = orch("runs", "compare", base, head)
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())  # rich wraps long lines
    assert "of suite 'moe-sweep'" in err and "of suite 'hbm-bandwidth'" in err and "Traceback" not in err
    assert res.stdout == ""


def test_runs_sharing_no_case_exit_2_with_counts(orch: Orch, store: Store) -> None:
    base = _run(store, "moe-sweep", [(1, 1.0, 0.9, 1.1), (2, 1.0, 0.9, 1.1)])
    head = _run(store, "moe-sweep", [(4, 1.0, 0.9, 1.1)])
    res = orch("runs", "compare", base, head)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "share no case with metric 'time_ms': base has 2 cases, head has 1" in " ".join(res.stderr.split())


def test_table_marks_cases_within_noise(orch: Orch, store: Store) -> None:
    base = _run(store, "moe-sweep", [(1, 0.10, 0.099, 0.101), (64, 0.72, 0.16, 53.0)])
    head = _run(store, "moe-sweep", [(1, 0.20, 0.199, 0.201), (64, 0.17, 0.165, 0.175)])
    res = orch("runs", "compare", base, head)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    (header,) = [line for line in lines if line.startswith("┃")]
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "host", "case", "base (p10–p90)", "head (p10–p90)", "head/base", "verdict"
    ]  # fmt: skip
    rows = [line.split("│")[1:-1] for line in lines if line.count("│") == 7]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["h1", "M=1", "0.100 (0.0990–0.101)", "0.200 (0.199–0.201)", "2.000", "regression"],
        ["h1", "M=64", "0.720 (0.160–53.0) noisy", "0.170 (0.165–0.175)", "0.236", "noisy: not judged"],
    ]
    assert "geometric mean head/base: 0.687 over 2 cases: 1 regression, 1 noisy: not judged (paired on host+case)" in (
        res.stdout
    )
    flat = " ".join(res.stdout.split())  # the note wraps at words to the width
    note = flat[flat.index("1 case marked noisy") :]
    assert note.startswith("1 case marked noisy: a p10–p90 spread wider than 20% of the median")
    assert "more --repeat" in note


def _run_samples(store: Store, figures: dict[int, tuple[float, float, int]], seed: int) -> str:
    """A finished run on h1 with one time_ms result per M: n normal raw samples of (center, relative sd, n)."""
    rng = np.random.default_rng(seed)
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    events = []
    for i, (m, (center, sd, n)) in enumerate(sorted(figures.items())):
        xs = [float(x) for x in rng.normal(center, center * sd, n)]
        p10, med, p90 = (float(q) for q in np.quantile(xs, [0.1, 0.5, 0.9]))
        metric = {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": n, "samples": xs}
        events.append(Event(seq=i, type="result", data={"case": {"M": m}, "metrics": {"time_ms": metric}}))
    store.ingest(rid, "h1", events)
    return rid


def test_summary_counts_are_the_tables_verdicts_not_the_noisy_flags(orch: Orch, store: Store) -> None:
    """The finding: 5 "within noise", 1 regression, 1 improvement in the table, "6 within noise" in the summary
    (the count of cases whose p10/p90 overlap). M=16 is 30% slower with 15% noise and 400 samples: p10–p90
    ranges overlap (noisy) but the rank test calls it slower."""
    flat = {m: (1.0 + m / 100, 0.01, 20) for m in (2, 4, 8, 32, 64)}
    base = _run_samples(store, {**flat, 1: (1.0, 0.01, 20), 16: (1.0, 0.15, 400)}, seed=1)
    head = _run_samples(store, {**flat, 1: (0.8, 0.01, 20), 16: (1.3, 0.15, 400)}, seed=2)
    cmp = store.compare(base, head)
    # M=16's p10-p90 ranges overlap, but the rank test calls it: not "within the noise", so not noisy (a script
    # dropping noisy cases kept a regression only once noisy said what the verdict says)
    assert cmp.noisy == 5 and [c.case["M"] for c in cmp.cases if c.noisy] == [2, 4, 8, 32, 64]
    verdicts = {c.case["M"]: c.verdict for c in cmp.cases}
    assert verdicts == {1: "improvement", 16: "regression", **dict.fromkeys(flat, "within noise")}
    assert cmp.verdicts == {"regression": 1, "improvement": 1, "unchanged": 0, "within noise": 5,
                            "noisy: not judged": 0, "too few samples: not judged": 0, "n/a": 0}  # fmt: skip
    res = orch("runs", "compare", base, head)
    assert res.returncode == 0, res.stderr
    out = " ".join(res.stdout.split())
    assert "over 7 cases: 1 regression, 1 improvement, 5 within noise (paired on host+case)" in out
    assert "statistics: 1 slower, 1 faster at FDR 0.05" in out
    assert "6 within noise" not in out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in res.stdout.splitlines() if line.count("│") == 10]
    assert [r[-1] for r in rows].count("within noise") == 5
    assert {r[4] for r in rows} == {"20/20", "400/400"}  # n: base/head
    m16 = next(r for r in rows if r[1] == "M=16")
    assert m16[2].endswith("noisy") and m16[3].endswith("noisy")  # 15% sd: p10–p90 ≈ 38% of the median
    js = orch("runs", "compare", base, head, "--json")
    assert js.returncode == 0, js.stderr
    doc = json.loads(js.stdout)
    assert doc["verdicts"] == cmp.verdicts and doc["wide_cases"] == 1


def test_a_side_of_one_sample_is_not_judged_and_the_summary_says_why(orch: Orch, store: Store) -> None:
    """The finding: base 20 samples whose p10–p90 spans ~30%, head one sample 27% slower: "regression" in the
    table, while the statistics line said "0 slower, 0 faster" and its noise floor "no raw samples stored"."""
    base = _run_samples(store, {1: (10.0, 0.15, 20), 2: (10.0, 0.01, 20)}, seed=1)
    head = _run_samples(store, {1: (12.7, 0.0, 1), 2: (20.0, 0.0, 2)}, seed=2)
    res = orch("runs", "compare", base, head, columns=120)
    assert res.returncode == 0, res.stderr
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in res.stdout.splitlines() if line.count("│") == 8]
    assert [(r[1], r[4], r[-1]) for r in rows] == [("M=1", "20/1", "too few samples: not judged"),
                                                   ("M=2", "20/2", "too few samples: not judged")]  # fmt: skip
    out = " ".join(res.stdout.split())
    assert "over 2 cases: 2 too few samples: not judged (paired on host+case)" in out, out
    assert "statistics: 0 slower, 0 faster; noise floor from not tested: a side has fewer than 3 samples" in out
    assert "regression" not in out and "no raw samples stored" not in out
    doc = json.loads(orch("runs", "compare", base, head, "--json").stdout)
    assert [(c["n_base"], c["n_head"], c["verdict"]) for c in doc["cases"]] == [(20, 1, TOO_FEW), (20, 2, TOO_FEW)]
    assert doc["verdicts"][TOO_FEW] == 2 and doc["slower"] == 0


TOO_FEW = "too few samples: not judged"
