"""A tester's report, end to end over real SSH (sshd test bed) on SQLite and a real PostgreSQL: a command suite
whose tool printed ``{"v": 9223372036854775808}`` (2**63, one past int64) had its figure accepted by the json
parser, turned into text by the store, and the case became "malformed result: metric 'v' needs a finite number",
the host ``failed`` with "5 results on the host, 4 stored; 0 errors on the host, 1 stored". A later tester found
``9223372036854775807`` (int64's largest) stored as 9223372036854775808: the store keeps metric numbers as
doubles, which hold integers exactly only up to 2**53.

Right (orchestrator/parsers/base.py, protocol.EXACT_INT_MAX): a value no metric may hold is that case's parse
error naming the metric and the value, the other cases are stored, and the counts agree; 2**53 is a metric,
2**53 + 1 is not.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

TOOL = """\
import sys
printed = ["12", "9007199254740992", "9007199254740993", "NaN", "1e400", "9223372036854775807"]
print('{"v": ' + printed[int(sys.argv[1]) - 1] + '}')
"""
SUITE = """\
name: edge
description: a tool printing one JSON figure per case
command: ["PYTHON", "SCRIPT", "{which}"]
params:
  which: {type: list, default: [1, 2, 3, 4, 5, 6], help: "which figure the tool prints"}
timeout_s: 60
repeat: 1
parser: {name: json}
metrics:
  v: {path: v, unit: "1"}
"""


def test_an_integer_past_int64_or_a_non_finite_figure_is_that_cases_parse_error(
    one_host_any_db: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    orch, _ = one_host_any_db
    script = tmp_path / "edge.py"
    script.write_text(TOOL)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "edge.yaml").write_text(SUITE.replace("PYTHON", sys.executable).replace("SCRIPT", str(script)))
    res = orch("run", "edge", "--hosts", "ct200", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-3000:]  # a partial run: 4 of 6 cases failed to parse
    doc = json.loads(res.stdout)
    assert doc["status"] == "partial", doc
    [h] = doc["hosts"]
    assert (h["host"], h["status"], h["results"], h["errors"]) == ("gpu-a", "partial", 2, 4), h
    assert "stored" not in h["error"], h  # nothing lost: the store holds every line the agent wrote
    store = Store.from_url(orch.db_url)
    try:
        names = {1: "ok", 2: "max", 3: "over", 4: "nan", 5: "big", 6: "int64"}
        rows = {names[r.case["which"]]: r for r in store.results(doc["run_id"], limit=10).items}
    finally:
        store.close()
    rule = "an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot hold exactly"
    not_finite = "not a finite number (NaN, an infinity, or past float's range): no measurement"
    assert {k: r.status for k, r in rows.items()} == {"ok": "ok", "max": "ok", "over": "error", "nan": "error",
                                                       "big": "error", "int64": "error"}
    # 2**53 is a metric, stored exactly (the store keeps every metric value as a double, store/compute.py)
    assert (rows["ok"].metrics["v"]["value"], rows["max"].metrics["v"]["value"]) == (12.0, 2**53)
    errors = {k: r.error for k, r in rows.items() if r.status == "error"}
    assert errors == {
        "over": f"parser json: metric 'v' in the output is 9007199254740993, {rule} (a figure that large is "
        'written as a float, 1.8e19, or in a larger unit); last output lines: {"v": 9007199254740993}',
        "int64": f"parser json: metric 'v' in the output is 9223372036854775807, {rule} (a figure that large is "
        'written as a float, 1.8e19, or in a larger unit); last output lines: {"v": 9223372036854775807}',
        "nan": f'parser json: metric \'v\' in the output is nan, {not_finite}; last output lines: {{"v": NaN}}',
        "big": ("parser json: metric 'v' in the output is 1e400, past the range of a double (±1.8e308): no "
                'measurement; last output lines: {"v": 1e400}'),  # named as written, not as the inf json read
    }, errors
