"""``orch runs check`` when the cases have too few samples for the rank test (the suite default ``repeat: 1``,
or ``--repeat 3``: 3 against 3 can never reach p <= 0.05), over real sshd.

A 2x slowdown with one sample each is a regression by compare's 5% threshold on the medians (``runs compare``
says ``too few samples: not judged`` of the same pair) and exits 1; a 1% change with one sample each cannot be
judged: exit 3, ``inconclusive``, naming the --repeat that would let the test judge it, unless ``--min-change``
decides on the medians; a run checked against itself is a usage error (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

SUITE = """\
name: gate
description: prints the time_ms written in a file (the test changes it between runs)
command: ["{python}", "-c", "print('time_ms:', open('{val}').read().strip())"]
params:
  k: {{type: list, default: [1, 2, 3], help: "a case"}}
timeout_s: 60
parser: {{name: regex, pattern: 'time_ms: (?P<time_ms>\\S+)'}}
metrics:
  time_ms: {{unit: ms}}
"""


def _run(orch: Orch, suites: Path, val: Path, value: str, *extra: str) -> str:
    val.write_text(value + "\n")
    doc = orch.json("run", "gate", "--hosts", "gpu-a", "--suite-dir", str(suites), *extra, timeout=300)
    assert doc["status"] == "completed", doc
    return str(doc["run_id"])


def _by_k(items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(x["case"]["k"]): x for x in items}


def _flat(text: str) -> str:
    """``text`` with its line breaks undone: free text wraps at words to the terminal's width."""
    return " ".join(text.split())


def test_check_never_passes_what_it_cannot_judge(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts
    suites, val = tmp_path / "suites", tmp_path / "gate_val"
    suites.mkdir()
    (suites / "gate.yaml").write_text(SUITE.format(python=sys.executable, val=val))
    base = _run(orch, suites, val, "10")
    head = _run(orch, suites, val, "20")

    # runs compare judges no case of one sample a side; runs check's rule on the medians calls 3 regressions by
    # compare's 5% threshold (not tested)
    cmp = orch.json("runs", "compare", base, head)
    assert sorted(c["verdict"] for c in cmp["cases"]) == ["too few samples: not judged"] * 3, cmp["cases"]
    res = orch("runs", "check", head, "--base", base, "--suite-dir", str(suites))
    assert res.returncode == 1, res.stdout + res.stderr
    assert (
        "regression by compare's 5% threshold on the medians: gpu-a k=1 head/base 2.000 (not tested: 1 sample "
        "each, the test needs >= 4 per side; rerun both runs with --repeat 4)"
    ) in _flat(res.stdout)
    assert "regression: 3 cases (0 called slower, 3 beyond the rule on the medians;" in _flat(res.stdout)
    doc = orch.json("runs", "check", head, "--base", base, expect_rc=1)
    assert doc["verdict"] == "regression" and doc["exit_code"] == 1 and doc["slower"] == []
    k1 = _by_k(doc["untested"])[1]
    assert (k1["n_base"], k1["n_head"], k1["outcome"], k1["ratio"]) == (1, 1, "regression", 2.0)

    # --confirm reruns the 3 flagged cases (one sample each again): reproduced by the same rule
    conf = orch.json("runs", "check", head, "--base", base, "--confirm", "--suite-dir", str(suites),
                     expect_rc=1, timeout=300)  # fmt: skip
    assert conf["rerun_status"] == "completed" and sorted(_by_k(conf["reproduced"])) == [1, 2, 3]

    # a 1% change with one sample each: nothing the test or the 5% rule can call -> inconclusive, exit 3
    small = _run(orch, suites, val, "10.1")
    res = orch("runs", "check", small, "--base", base)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "cannot judge: gpu-a k=2 head/base 1.010 (not tested: 1 sample each, the test needs >= 4 per side; " \
        "rerun both runs with --repeat 4)" in _flat(res.stdout)
    assert "inconclusive: 3 cases could not be judged and no case is a regression; rerun both runs with " \
        "--repeat 4, or decide on the medians with --min-change (exit 3)" in _flat(res.stdout)
    doc = orch.json("runs", "check", small, "--base", base, expect_rc=3)
    assert doc["verdict"] == "inconclusive" and not doc["regression"]
    assert {u["outcome"] for u in doc["untested"]} == {"cannot judge"}
    # an explicit threshold decides on the medians: 1% is within 5%, beyond 0.5%
    doc = orch.json("runs", "check", small, "--base", base, "--min-change", "0.05", expect_rc=0)
    assert doc["verdict"] == "pass" and {u["outcome"] for u in doc["untested"]} == {"within"}
    doc = orch.json("runs", "check", small, "--base", base, "--min-change", "0.005", expect_rc=1)
    assert doc["verdict"] == "regression"
    assert _by_k(doc["untested"])[3]["rule"] == "--min-change 0.50% on the medians"

    # a run against itself
    res = orch("runs", "check", head, "--base", head)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "HEAD and --base are the same run" in res.stderr and "Traceback" not in res.stderr


def test_check_with_three_samples_each_is_not_tested_but_still_gated(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """--repeat 3 on both: raw samples stored, but 3 against 3 is underpowered (best p = 0.1)."""
    orch, _ = two_hosts
    suites, val = tmp_path / "suites", tmp_path / "gate_val"
    suites.mkdir()
    (suites / "gate.yaml").write_text(SUITE.format(python=sys.executable, val=val))
    base = _run(orch, suites, val, "10", "--repeat", "3")
    head = _run(orch, suites, val, "20", "--repeat", "3")
    doc = orch.json("runs", "check", head, "--base", base, expect_rc=1)
    assert doc["verdict"] == "regression"
    k2 = _by_k(doc["untested"])[2]
    assert (k2["n_base"], k2["n_head"], k2["outcome"]) == (3, 3, "regression")
    assert k2["why"] == "3 samples each, the test needs >= 4 per side"
    same = _run(orch, suites, val, "20", "--repeat", "3")
    res = orch("runs", "check", same, "--base", head)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "cannot judge: gpu-a k=1 head/base 1.000 (not tested: 3 samples each" in res.stdout
