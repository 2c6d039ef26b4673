"""A parser that never ends does not hang the run (over real SSH, SQLite and PostgreSQL): a user regex with nested
quantifiers, ``(?P<v>(\\d+\\s?)+)b`` (the loader refuses the plainer ``(\\d+)+``, not this one), on an output of
40 digits and ``!`` backtracks for ~2^40 steps. The parse runs in
a worker process stopped at the suite's ``parse_timeout_s``; that case is an error saying so, the cases before and
after it are stored, and ``orch run`` ends (``partial``) — where before it hung with the run left ``running``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

TOOL = """\
#!{python}
import sys
case = sys.argv[1]
print("1" * 40 + "!" if case == "2" else "took 12" + case + "b")
"""

SUITE = """\
name: backtrack
description: a regex that backtracks catastrophically on case 2's output
command: ["{build}/tool", "{case}"]
params:
  case: {type: list, default: [1, 2, 3], help: "which output the tool prints"}
timeout_s: 60
parse_timeout_s: 5
parser: {name: regex, pattern: '(?P<v>(\\d+\\s?)+)b'}
metrics:
  v: {path: v, unit: ms}
"""


def test_catastrophic_regex_is_one_case_error_and_the_run_ends(
    two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    orch, _ = two_hosts_any_db
    build = tmp_path / "build"
    build.mkdir()
    (build / "tool").write_text(TOOL.format(python=sys.executable))
    (build / "tool").chmod(0o755)
    assert [r["build"] for r in orch.json("deploy", "--hosts", "b300", "--build", str(build))["hosts"]] == ["uploaded"]
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "backtrack.yaml").write_text(SUITE)

    # before the fix this never returned: the subprocess deadline (300 s) is what fails the test then
    res = orch("run", "backtrack", "--hosts", "b300", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "partial", (doc, res.stderr[-3000:])
    assert doc["hosts"][0]["results"] == 2 and doc["hosts"][0]["errors"] == 1, doc
    store = Store.from_url(orch.db_url)
    try:
        rows = {r.case["case"]: r for r in store.results(doc["run_id"], limit=10).items}
    finally:
        store.close()
    assert rows[1].status == "ok" and rows[1].metrics["v"]["value"] == 121
    assert rows[3].status == "ok" and rows[3].metrics["v"]["value"] == 123
    assert rows[2].status == "error"
    assert (rows[2].error or "").startswith(
        "parser regex took longer than 5 s on 42 bytes of output (catastrophic backtracking?); it was stopped "
        "(suite key parse_timeout_s); last output lines: 1111111111111111111111111111111111111111!"
    ), rows[2].error
    shown = orch("runs", "show", doc["run_id"])
    assert shown.returncode == 0, shown.stderr
    assert "parser regex took longer than 5 s on 42 bytes of output (catastrophic backtracking?)" in shown.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "parse_timeout_s"), ("7200", "parse_timeout_s"), ("soon", "parse_timeout_s")],
)
def test_parse_timeout_out_of_range_is_refused_at_load(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path, value: str, message: str
) -> None:
    orch, _ = two_hosts
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "backtrack.yaml").write_text(SUITE.replace("parse_timeout_s: 5", f"parse_timeout_s: {value}"))
    res = orch("suites", "show", "backtrack", "--suite-dir", str(suites))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "backtrack.yaml:7" in res.stderr and message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_a_plainly_exponential_pattern_is_refused_at_load(two_hosts: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "backtrack.yaml").write_text(SUITE.replace("(\\d+\\s?)+", "(\\d+)+"))
    assert "(?P<v>(\\d+)+)b" in (suites / "backtrack.yaml").read_text()
    res = orch("run", "backtrack", "--hosts", "b300", "--suite-dir", str(suites))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "backtrack.yaml:8" in res.stderr and "like (a+)+" in res.stderr, res.stderr
    assert "(catastrophic backtracking)" in res.stderr and "Traceback" not in res.stderr
