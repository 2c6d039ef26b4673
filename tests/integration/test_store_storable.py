"""Values PostgreSQL (or the JSON encoder) refuses but a spool line can hold: stored alike on SQLite and a real
PostgreSQL, with a stand-in the row names — never a host's results lost for one string (a tester's report: a NUL
in a tool's output lost every result of the host on PostgreSQL, and a failed import left its run ``running``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from orchestrator.errors import StoreError
from orchestrator.ingest import SpoolLines
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry

RUN_ID = "01a2aaaa-0000-7000-8000-0000000000aa"
OK_METRICS = '{"time_ms": {"value": 1.5, "unit": "ms"}}'


def _run(store: Store) -> str:
    rid = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h"], started_by="t",
                           started_on="t")  # fmt: skip
    store.start_host_run(rid, "h", facts={}, agent_version="v", build_sha=None)
    return rid


def _store_lines(store: Store, rid: str, lines: list[str]) -> None:
    spool = SpoolLines(0)
    store.ingest(rid, "h", [spool.event(line.encode()) for line in lines])


HELLO = '{"v": 1, "seq": 0, "type": "hello", "agent_version": "v", "run_id": "x", "suite": "noop", "facts": {}}'


# (the line's fields after seq 1 as JSON text, as the agent or a tool's output puts them there) -> what is stored
@pytest.mark.parametrize(
    ("fields", "case", "info"),
    [
        ('"case": {"n": 1}, "info": {"output_tail": "v: 1\\n\\u0000junk\\n"}', {"n": 1},
         {"output_tail": "v: 1\n\u2400junk\n",
          "stored_as": ["line 1.info.output_tail: 1 NUL (U+0000) stored as U+2400 (\u2400)"]}),
        ('"case": {"n": "a\\u0000b\\u0000"}', {"n": "a\u2400b\u2400"},
         {"stored_as": ["line 1.case.n: 2 NUL (U+0000) stored as U+2400 (\u2400)"]}),
        ('"case": {"n\\u0000": 1}', {"n\u2400": 1},
         {"stored_as": ["line 1.case key 'n\\x00': 1 NUL (U+0000) stored as U+2400 (\u2400)"]}),
        ('"case": {"n": 1}, "info": {"big": 123456789012345678901234567890}', {"n": 1},
         {"big": "123456789012345678901234567890",
          "stored_as": ["line 1.info.big: an integer beyond 64 bits stored as its decimal text"]}),
        ('"case": {"n": 1}, "info": {"u": 18446744073709551615, "s": "\\u0000"}', {"n": 1},
         {"u": 18446744073709551615, "s": "\u2400",
          "stored_as": ["line 1.info.s: 1 NUL (U+0000) stored as U+2400 (\u2400)"]}),  # a number up to 2**64 - 1
        ('"case": {"M": -99999999999999999999}', {"M": "-99999999999999999999"},
         {"stored_as": ["line 1.case.M: an integer beyond 64 bits stored as its decimal text"]}),
        ('"case": {"n": NaN}, "info": {"x": -Infinity}', {"n": "NaN"},
         {"x": "-Infinity", "stored_as": ["line 1.case.n: NaN (not a JSON number) stored as the string 'NaN'",
                                          "line 1.info.x: -Infinity (not a JSON number) stored as the string "
                                          "'-Infinity'"]}),
    ],
)  # fmt: skip
def test_a_value_postgres_refuses_is_stored_alike_with_a_named_stand_in(
    store: Store, fields: str, case: dict[str, Any], info: dict[str, Any]
) -> None:
    rid = _run(store)
    line = f'{{"v": 1, "seq": 1, "type": "result", "case_index": 0, {fields}, "metrics": {OK_METRICS}}}'
    done = ('{"v": 1, "seq": 2, "type": "done", "status": "completed", '
            '"counts": {"lines": 2, "results": 1, "errors": 0}}')  # fmt: skip
    _store_lines(store, rid, [HELLO, line, done])
    [row] = store.results(rid).items
    assert (row.status, row.case, row.info, row.metrics["time_ms"]["value"]) == ("ok", case, info, 1.5)
    rec = store.get_run(rid).host_run("h")
    assert rec is not None and (rec.results, rec.errors, rec.last_seq) == (1, 0, 2)


def test_nul_in_error_log_and_hello_lines_is_stored_and_said(store: Store) -> None:
    rid = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h", "h2"], started_by="t",
                           started_on="t")  # fmt: skip
    store.start_host_run(rid, "h2", facts={"gpu_name": "H\x00200"}, agent_version="v", build_sha=None)
    rec2 = store.get_run(rid).host_run("h2")
    assert rec2 is not None and rec2.facts == {"gpu_name": "H\u2400200"}
    hello = HELLO.replace('"facts": {}', '"facts": {"hostname": "gpu\\u00000"}')
    lines = [
        hello,
        '{"v": 1, "seq": 1, "type": "log", "level": "info", "message": "x\\u0000y"}',
        '{"v": 1, "seq": 2, "type": "error", "case_index": 0, "case": {"n": 1}, "message": "bad\\u0000thing"}',
        '{"v": 1, "seq": 3, "type": "error", "message": "host\\u0000level"}',
    ]
    _store_lines(store, rid, lines)
    rows = store.results(rid).items
    assert [(r.seq, r.status, r.error) for r in rows] == [
        (2, "error", "bad\u2400thing"),
        (3, "error", "host\u2400level"),
    ]
    assert rows[0].info == {"stored_as": ["line 2.message: 1 NUL (U+0000) stored as U+2400 (\u2400)"]}
    rec = store.get_run(rid).host_run("h")
    assert rec is not None and rec.facts == {"hostname": "gpu\u24000"}
    assert "[info] x\u2400y" in (rec.log or "") and rec.error is None  # the host-level error: its row, above
    assert "orch stored line 0.facts.hostname: 1 NUL (U+0000) stored as U+2400" in (rec.log or "")


def _spool(path: Path, messages: list[str]) -> Path:
    lines = [json.dumps({"v": 1, "seq": 0, "type": "hello", "agent_version": "a" * 64, "run_id": RUN_ID,
                         "suite": "noop", "facts": {}, "cases_total": len(messages)})]  # fmt: skip
    for i, m in enumerate(messages):
        lines.append(json.dumps({"v": 1, "seq": i + 1, "type": "result", "case_index": i, "case": {"s": m},
                                 "metrics": {"time_ms": {"value": float(i), "unit": "ms"}}}))  # fmt: skip
    lines.append(json.dumps({"v": 1, "seq": len(lines), "type": "done", "status": "completed",
                             "counts": {"lines": len(lines), "results": len(messages), "errors": 0}}))  # fmt: skip
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_import_of_a_spool_holding_nul_stores_every_line(store: Store, tmp_path: Path) -> None:
    spool = _spool(tmp_path / "events.jsonl", ["a", "m\u0000s", "c"])
    assert '"m\\u0000s"' in spool.read_text()
    out = import_spool(store, spool, host="lh", registry=builtin_registry())
    assert (out.status, out.run_status, out.results, out.errors, out.error) == ("completed", "completed", 3, 0, None)
    assert [r.case["s"] for r in store.results(RUN_ID).items] == ["a", "m\u2400s", "c"]


def _refuse_case(store: Store, word: str) -> None:
    """A real refusal by the database itself (a site's constraint; SQLite's ALTER TABLE cannot add one, a trigger
    does it there): any result row whose case mentions ``word``."""
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.execute(text(f"ALTER TABLE results ADD CONSTRAINT refuse_word CHECK "
                              f"(case_params::text NOT LIKE '%{word}%')"))  # fmt: skip
        else:
            conn.execute(text(f"CREATE TRIGGER refuse_word BEFORE INSERT ON results WHEN NEW.case_params LIKE "
                              f"'%{word}%' BEGIN SELECT RAISE(ABORT, 'site policy refuses {word}'); END"))  # fmt: skip


def _drop_refusal(store: Store) -> None:
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.execute(text("ALTER TABLE results DROP CONSTRAINT refuse_word"))
        else:
            conn.execute(text("DROP TRIGGER refuse_word"))


def test_a_line_the_database_refuses_costs_that_line_not_the_host(store: Store, tmp_path: Path) -> None:
    """Lines 1 and 3 are stored, line 2 (refused by the database) is one error row at its position saying what the
    database answered; the host fails on the reconciliation, the run is not left running."""
    _refuse_case(store, "forbidden")
    spool = _spool(tmp_path / "events.jsonl", ["a", "forbidden", "c"])
    out = import_spool(store, spool, host="lh", registry=builtin_registry())
    assert (out.status, out.run_status, out.results, out.errors) == ("failed", "partial", 2, 1)
    assert "3 results on the host, 2 stored; 0 errors on the host, 1 stored" in (out.error or "")
    rows = store.results(RUN_ID).items
    assert [(r.seq, r.status) for r in rows] == [(1, "ok"), (2, "error"), (3, "ok")]
    assert (rows[1].error or "").startswith("agent line 2 (result) was not stored: database refused a write")
    refusal = ('new row for relation "results" violates check constraint "refuse_word"'
               if store.dialect == "postgresql" else "site policy refuses forbidden")  # fmt: skip
    assert f"{refusal}; the line stays in the host's spool" in (rows[1].error or "")
    assert (rows[1].case, rows[1].case_index) == ({}, None)  # the error row with the case was refused as well


def test_an_import_the_store_stops_leaves_no_run_running(store: Store, tmp_path: Path) -> None:
    """The error row is refused too (the word is in the case it keeps, then the row without a case is refused by a
    second policy): the import fails, the host run is ended failed with what is kept (the run partial, not
    running); a rerun once the database takes the lines completes it."""
    _refuse_case(store, "forbidden")
    spool = _spool(tmp_path / "events.jsonl", ["a", "forbidden", "c"])
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.execute(text("ALTER TABLE results ADD CONSTRAINT no_errors CHECK (status <> 'error')"))
        else:
            conn.execute(text("CREATE TRIGGER no_errors BEFORE INSERT ON results WHEN NEW.status = 'error' "
                              "BEGIN SELECT RAISE(ABORT, 'no error rows'); END"))  # fmt: skip
    with pytest.raises(StoreError) as err:
        import_spool(store, spool, host="lh", registry=builtin_registry())
    said = 'violates check constraint "no_errors"' if store.dialect == "postgresql" else "no error rows"
    assert err.value.message.startswith("database refused a write: ") and said in err.value.message
    detail = store.get_run(RUN_ID)
    rec = detail.host_run("lh")
    assert detail.status == "partial" and rec is not None and rec.status == "failed"  # a result was stored
    assert (rec.results, rec.errors) == (1, 0)
    assert f"the import of {spool} stopped: " in (rec.error or "")
    assert f"kept what was stored (1 row); rerun orch runs import {spool} --host lh to continue" in (rec.error or "")
    _drop_refusal(store)
    with store.engine.begin() as conn:
        if store.dialect == "postgresql":
            conn.execute(text("ALTER TABLE results DROP CONSTRAINT no_errors"))
        else:
            conn.execute(text("DROP TRIGGER no_errors"))
    again = import_spool(store, spool, host="lh", registry=builtin_registry())
    assert (again.status, again.run_status, again.results, again.errors) == ("completed", "completed", 3, 0)
