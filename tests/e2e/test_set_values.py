"""``orch run --set`` values the store or the agent could not hold, or that Python alone would misread, are usage
errors (exit 2) before any run is created or any host is touched — on SQLite and on a real PostgreSQL, over a
real sshd host. Before: a 23-digit int failed each host with "database error: Integer exceeds 64-bit range"
(SQLite) or "internal error: TypeError" (PostgreSQL), exit 1, leaving a failed run; '١٢' ran as 12."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd]

SUITE = """\
name: ec
description: echoes its parameters
command: [echo, "v: {n} {x}"]
params:
  n: {type: int, default: 1, help: "a count"}
  x: {type: float, default: 1.5, help: "a factor"}
parser: {name: regex, pattern: 'v: \\S+ (?P<v>\\S+)'}  # x: n may be past what a metric holds (2**53)
metrics:
  v: {unit: ms}
"""

RANGE = "-9223372036854775808..9223372036854775807"


BAD = [
    ("n=99999999999999999999999", f"ec: n is outside the 64-bit signed range {RANGE}, got 99999999999999999999999"),
    ("n=-9223372036854775809", f"ec: n is outside the 64-bit signed range {RANGE}, got -9223372036854775809"),
    ("n=\u0661\u0662", "ec: n must be an integer written in ASCII digits 0-9, got '\u0661\u0662'"),
    ("x=\u0661\u066b\u0665", "ec: x must be a number written in ASCII digits 0-9, got '\u0661\u066b\u0665'"),
    ("x=1e400", "ec: x must be finite, got inf"),
    ("x=1e-400", "ec: x is '1e-400', not zero but below the smallest double (4.9e-324), which holds it only as 0; "
                 "write 0 if 0 is meant"),
]


def test_bad_set_values_exit_2_before_any_run(two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "ec.yaml").write_text(SUITE)
    for value, message in BAD:
        res = orch("run", "ec", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", value, timeout=120)
        assert res.returncode == 2, value + res.stdout + res.stderr
        assert res.stderr.splitlines()[0] == f"error: {message}", res.stderr
        assert "--set" in res.stderr and "Traceback" not in res.stderr and "database" not in res.stderr
    # the largest int64 is accepted and runs; it is the only run stored
    ok = orch.json("run", "ec", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", "n=9223372036854775807",
                   timeout=300)  # fmt: skip
    assert ok["status"] == "completed", ok
    runs = orch.json("runs", "list")
    assert [r["id"] for r in runs["items"]] == [ok["run_id"]], runs


YAML_BAD = [
    ("1.0e-400", "the number 1.0e-400 is not zero but below the smallest double (4.9e-324), which holds it only as "
                 "0; write 0 if 0 is meant"),
    ("-0.5e-330", "the number -0.5e-330 is not zero but below the smallest double"),
    ("1e400", "the number 1e400 is past the range of a double (±1.8e308)"),
    ("1.8e+309", "the number 1.8e+309 is past the range of a double (±1.8e308)"),
]


def test_suite_file_numbers_a_double_cannot_hold_name_their_line_never_a_silent_0_or_inf(
    two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """A suite file's ``default: 1.0e-400`` was read as 0.0 and ran every case with 0; ``1e400`` said "must be
    finite, got inf" of a number the user never wrote as inf. Both now name the file, line and the number, exit
    2. YAML 1.2 exponent forms (``1e5``, ``2.5E3``), which PyYAML read as strings ("x must be a number, got
    '1e5'"), are numbers: the run's case holds 100000.0."""
    orch, _ = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    path = suites / "ec.yaml"
    for written, message in YAML_BAD:
        path.write_text(SUITE.replace("default: 1.5,", f"default: {written},"))
        res = orch("suites", "show", "ec", "--suite-dir", str(suites), timeout=120)
        assert res.returncode == 2, written + res.stdout + res.stderr
        first = res.stderr.splitlines()[0]
        assert first.startswith(f"error: {path}:6: {message}"), res.stderr
        assert "not valid YAML" not in res.stderr and "Traceback" not in res.stderr
    path.write_text(SUITE.replace("default: 1.5,", "default: 1e5,").replace("default: 1,", "default: 2.5E3,"))
    res = orch("suites", "show", "ec", "--suite-dir", str(suites), timeout=120)
    assert res.returncode == 2 and "n must be an integer" in res.stderr, res.stderr  # 2500.0 is not an int param's
    path.write_text(SUITE.replace("default: 1.5,", "default: 1e5,"))
    ok = orch.json("run", "ec", "--hosts", "gpu-a", "--suite-dir", str(suites), timeout=300)
    assert ok["status"] == "completed", ok
    store = Store.from_url(orch.db_url)
    try:
        [row] = store.results(ok["run_id"], limit=10).items
    finally:
        store.close()
    assert row.case["x"] == 100000.0 and row.case["n"] == 1, row.case
