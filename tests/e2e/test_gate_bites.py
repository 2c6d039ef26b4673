"""``orch runs check`` (the real CLI process, a real SQLite store) never passes what it should fail (issue 19's
new-user trial of the gate): a head run that lost cases or has failed cases, a head run whose every case
failed, and a change far outside the spread hidden as "within noise" by one wide side.
Runs are written straight into the store (``finished_run``): what is under test is the gate's reading of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.protocol import Event
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, finished_run, sqlite_db

db = pytest.fixture(sqlite_db, name="db")
HOST = "cpu-0"


def _result(seq: int, m: int, samples: list[float]) -> Event:
    xs = sorted(samples)
    p10, med, p90 = (float(np.quantile(xs, q)) for q in (0.1, 0.5, 0.9))
    return Event(seq=seq, type="result", data={
        "case": {"M": m}, "metrics": {"time_ms": {"value": med, "unit": "ms", "median": med, "p10": p10,
                                                  "p90": p90, "n": len(xs), "samples": list(samples)}}})  # fmt: skip


def _error(seq: int, m: int, text: str) -> Event:
    return Event(seq=seq, type="error", data={"case": {"M": m}, "message": text})


def _quiet(center: float, n: int = 20, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in center * (1 + 0.01 * rng.standard_normal(n))]


def _run(store: Store, events: list[Event]) -> str:
    return finished_run(store, "my-suite", HOST, events)


def _orch(url: str, *argv: str) -> tuple[int, str]:
    """The real ``orch`` process on the store at ``url``: exit status and stdout + stderr."""
    tmp = Path(url.removeprefix("sqlite:///")).parent
    inv = tmp / "inventory.yaml"
    if not inv.exists():
        inv.write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    res = Orch(inv, url, tmp)(*argv, timeout=240, columns=400)
    return res.returncode, res.stdout + res.stderr


def _check(url: str, *args: str) -> tuple[int, str, dict[str, Any] | None]:
    code, text = _orch(url, "runs", "check", *args)
    jcode, jtext = _orch(url, "runs", "check", *args, "--json")
    assert jcode == code, (code, jcode, text, jtext)
    try:
        doc = json.loads(jtext)
    except ValueError:
        doc = None
    return code, " ".join(text.split()), doc


def test_a_head_that_lost_a_case_or_failed_one_fails_the_gate(db: tuple[str, Store]) -> None:
    url, store = db
    base = _run(store, [_result(i, m, _quiet(10.0 * m, seed=i)) for i, m in enumerate((1, 2))])
    # the finding: head partial, M=2 failed ("only in base: 1") -> "pass", exit 0
    head = _run(store, [_result(0, 1, _quiet(10.0, seed=7)), _error(1, 2, "fake-tool exited 3: out of memory")])
    code, text, doc = _check(url, head, "--base", base)
    assert code == 1, text
    assert "missing in head: cpu-0 M=2" in text
    assert "failed in head: cpu-0 M=2 (fake-tool exited 3: out of memory)" in text
    assert "incomplete: head lacks 1 case of the base, 1 failed" in text and "pass:" not in text
    assert doc is not None and doc["verdict"] == "incomplete" and doc["exit_code"] == 1
    assert doc["missing"] == [{"host": HOST, "case": {"M": 2}}]
    assert doc["failed"] == [{"host": HOST, "case": {"M": 2}, "error": "fake-tool exited 3: out of memory"}]
    # the explicit opt-out judges the shared case alone, and still names what it left out
    code, text, doc = _check(url, head, "--base", base, "--allow-missing")
    assert code == 0, text
    assert "missing in head: cpu-0 M=2" in text
    assert (
        "pass (--allow-missing): no case called slower, every shared case judged; 1 case of the base "
        "missing, 1 failed" in text
    )
    assert doc is not None and doc["verdict"] == "pass" and doc["allow_missing"] is True


def test_a_rerun_missing_six_of_seven_cases_fails_the_gate(db: tuple[str, Store]) -> None:
    url, store = db
    ms = (1, 2, 4, 8, 16, 32, 64)
    base = _run(store, [_result(i, m, _quiet(float(m), seed=i)) for i, m in enumerate(ms)])
    head = _run(store, [_result(0, 8, _quiet(8.0, seed=99))])  # no error rows: the cases are just not there
    code, text, doc = _check(url, head, "--base", base)
    assert code == 1, text
    assert doc is not None and sorted(x["case"]["M"] for x in doc["missing"]) == [1, 2, 4, 16, 32, 64]
    assert doc["failed"] == [] and doc["verdict"] == "incomplete"
    assert "incomplete: head lacks 6 cases of the base, 0 failed" in text
    # a complete head of the same cases passes: the rule is about what is missing, not about the rerun
    full = _run(store, [_result(i, m, _quiet(float(m), seed=50 + i)) for i, m in enumerate(ms)])
    code, text, doc = _check(url, full, "--base", base)
    assert code == 0, text
    assert doc is not None and doc["missing"] == [] and doc["verdict"] == "pass"


def test_a_head_whose_every_case_failed_is_a_run_failure_not_a_usage_error(db: tuple[str, Store]) -> None:
    url, store = db
    base = _run(store, [_result(i, m, _quiet(10.0 * m, seed=i)) for i, m in enumerate((1, 2))])
    head = _run(store, [_error(0, 1, "boom one"), _error(1, 2, "boom two")])
    code, text = _orch(url, "runs", "check", head, "--base", base)
    assert code == 1, text  # was 2: "share no case ... head has 0"
    flat = " ".join(text.split())
    assert (
        f"head run {short_run_id(head)} measured none of the 2 cases of base run {short_run_id(base)}; 2 failed: "
        "cpu-0 M=1: boom one; "
        "cpu-0 M=2: boom two" in flat
    )
    assert "Traceback" not in text
    code, text = _orch(url, "runs", "check", head, "--base", base, "--allow-missing")
    assert code == 1, text  # nothing measured: there is nothing to allow


def _spread(center: float, tail: float, n_tail: int, n: int = 20) -> list[float]:
    """``n`` samples: ``n - n_tail`` within 4% of ``center``, ``n_tail`` near ``tail`` (a wide p90)."""
    body = [center * (0.98 + 0.04 * i / (n - n_tail - 1)) for i in range(n - n_tail)]
    return body + [tail * (1 + 0.1 * i) for i in range(n_tail)]


def test_a_change_far_outside_the_spread_is_never_within_noise(db: tuple[str, Store]) -> None:
    """The finding: M=2 went from 212 ms (182–281) to 0.230 ms (0.222–9.57), q 4.8e-07, CI 0.00103–0.00112, and
    M=1 1,379x slower — both "within noise" (a linear band 1 ± 20.3), and `runs check` printed "pass"."""
    url, store = db
    base = _run(store, [
        _result(0, 1, _spread(0.2, 600.0, 4)),  # a 0.2 ms case with a 600 ms tail on the base side
        _result(1, 2, [182.0, 182.0, 185, 190, 195, 200, 205, 208, 210, 212, 212, 214, 220, 230, 240, 250, 260,
                       270, 281, 281]),
    ])  # fmt: skip
    head = _run(store, [_result(0, 1, _quiet(275.8, seed=3)), _result(1, 2, _spread(0.226, 9.57, 3))])
    cmp = json.loads(_orch(url, "runs", "compare", base, head, "--json")[1])
    by_m = {c["case"]["M"]: c for c in cmp["cases"]}
    assert by_m[2]["ratio"] < 0.002 and by_m[2]["stats"]["call"] == "faster", by_m[2]
    assert by_m[2]["verdict"] == "improvement"
    assert by_m[1]["ratio"] > 1000 and by_m[1]["stats"]["call"] == "slower", by_m[1]
    assert by_m[1]["verdict"] == "regression"
    code, text, doc = _check(url, head, "--base", base)
    assert code == 1, text
    assert doc is not None and [s["case"] for s in doc["slower"]] == [{"M": 1}]
    assert "slower: cpu-0 M=1 head/base" in text and "pass" not in text


def test_a_case_too_noisy_to_judge_is_said_so_and_does_not_pass(db: tuple[str, Store]) -> None:
    url, store = db
    # both sides carry a 5x tail in 3 of 20 samples: a band of sqrt(p90 / p10) - 1 > 50%, and no change
    base = _run(store, [_result(0, 1, _spread(1.0, 5.0, 3)), _result(1, 2, _quiet(2.0, seed=1))])
    head = _run(store, [_result(0, 1, _spread(1.01, 5.0, 3)), _result(1, 2, _quiet(2.0, seed=2))])
    cmp = json.loads(_orch(url, "runs", "compare", base, head, "--json")[1])
    by_m = {c["case"]["M"]: c for c in cmp["cases"]}
    assert (by_m[1]["stats"]["call"], by_m[1]["verdict"]) == ("noisy", "noisy: not judged"), by_m[1]
    assert by_m[1]["stats"]["band"] > 0.5
    assert by_m[2]["verdict"] == "within noise"  # a quiet case keeps its verdict
    code, text = _orch(url, "runs", "compare", base, head)
    assert code == 0 and "noisy: not judged" in text
    code, text, doc = _check(url, head, "--base", base)
    assert code == 3, text
    assert "cannot judge: cpu-0 M=1 head/base 1.0" in text and "too noisy to judge: the noise band" in text
    assert doc is not None and [u["outcome"] for u in doc["untested"]] == ["cannot judge"]
    # an explicit rule on the medians decides it
    code, text, doc = _check(url, head, "--base", base, "--min-change", "0.05")
    assert code == 0, text


def test_compare_and_check_agree_that_a_run_against_itself_is_a_usage_error(db: tuple[str, Store]) -> None:
    """The finding: `runs compare latest latest` exit 0 (every ratio 1.000, "unchanged") while `runs check` refused
    the same pair (exit 2). Both refuse it now: two references meant to name two runs named one."""
    url, store = db
    _run(store, [_result(0, 1, _quiet(1.0, seed=1))])
    rid = _run(store, [_result(0, 1, _quiet(1.0, seed=2))])
    same = [
        ("runs", "compare", "latest", "latest"),
        ("runs", "compare", rid, rid[-8:]),
        ("runs", "compare", "latest", "latest", "--json"),
        ("runs", "check", "latest", "--base", rid),
    ]
    for argv in same:
        code, text = _orch(url, *argv)
        assert code == 2, (argv, text)
        assert "compared with itself shows nothing" in " ".join(text.split()) and "Traceback" not in text
    code, text = _orch(url, "runs", "compare", "latest~1", "latest")
    assert code == 0, text
