"""Issue 10, end to end over real SSH (sshd test bed), SQLite and PostgreSQL: a number past a double's range (a
401-digit integer) crashed ingest with OverflowError ("orch hit a bug", exit 70) and left the run ``running``.

Right: an agent line holding one, followed live by ``orch run --resume`` through the real agent, is one error row
naming its seq and field, and the run ends; a ``command`` suite whose tool prints such a JSON figure has that
case's parse error, and the run ends."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import _plant, _result, _spool
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

BIG = "1" + "0" * 400

TOOL = """\
import sys
print('{"v": ' + ["12", "BIG", "-BIG"][int(sys.argv[1]) - 1] + '}')
""".replace("BIG", BIG)
SUITE = """\
name: huge
description: a tool printing one JSON figure per case, one of them a 401-digit integer
command: ["PYTHON", "SCRIPT", "{which}"]
params:
  which: {type: list, default: [1, 2, 3], help: "which figure the tool prints"}
timeout_s: 60
repeat: 1
parser: {name: json}
metrics:
  v: {path: v, unit: "1"}
"""


def test_an_agent_line_with_a_401_digit_integer_is_one_error_row_over_ssh(
    one_host_any_db: tuple[Orch, SshdHost],
) -> None:
    orch, host = one_host_any_db
    huge = _result(2, 2).replace('"value": 2.0', f'"value": {BIG}')
    assert BIG in huge
    rid = _plant(orch, host, _spool([_result(1, 1), huge, _result(3, 3)]))
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    [h] = doc["hosts"]
    assert (doc["status"], h["status"], h["results"], h["errors"]) == ("partial", "partial", 2, 1), doc
    assert "stored" not in h["error"], h  # nothing lost: the agent's result line is stored as the error row
    store = Store.from_url(orch.db_url)
    try:
        assert store.get_run(rid).status == "partial"  # not left running
        rows = store.results(rid, limit=10).items
        assert [(r.seq, r.status) for r in rows] == [(1, "ok"), (2, "error"), (3, "ok")]
        assert (rows[1].error or "").startswith(
            "agent line 2 (result): metrics.time_ms.value is 10000000000000000000...0000000000 (401 digits), "
            "past the range of a double (±1.8e308), which no store can hold"
        ), rows[1].error
        assert rows[1].case == {"ms": 2.0} and store.last_seq(rid, host.name) == 4
    finally:
        store.close()
    again = orch("run", "--resume", rid, "--json", timeout=300)  # a second collect crashes no more
    assert "Traceback" not in again.stderr and "orch hit a bug" not in again.stderr, again.stderr[-3000:]


def test_a_tool_printing_a_401_digit_integer_fails_its_case_and_the_run_ends(
    one_host_any_db: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    orch, _ = one_host_any_db
    script = tmp_path / "huge.py"
    script.write_text(TOOL)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "huge.yaml").write_text(SUITE.replace("PYTHON", sys.executable).replace("SCRIPT", str(script)))
    res = orch("run", "huge", "--hosts", "ct200", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    [h] = doc["hosts"]
    assert (doc["status"], h["status"], h["results"], h["errors"]) == ("partial", "partial", 1, 2), doc
    store = Store.from_url(orch.db_url)
    try:
        assert store.get_run(doc["run_id"]).status == "partial"
        rows = {r.case["which"]: r for r in store.results(doc["run_id"], limit=10).items}
        assert {k: r.status for k, r in rows.items()} == {1: "ok", 2: "error", 3: "error"}
        assert rows[1].metrics["v"]["value"] == 12.0
        for k in (2, 3):
            assert "an integer past 2**53" in (rows[k].error or ""), rows[k].error
    finally:
        store.close()
