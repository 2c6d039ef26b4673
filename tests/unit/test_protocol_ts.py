"""A line's ``ts`` must lie in ``TS_MIN`` (2000-01-01) .. orch's clock + ``TS_AHEAD_S`` (1 day): the store turns it
into a datetime (a row's time, an imported run's start), and a ts past year 9999 crashed the import while one in
year 5138 was stored as such (issue 10, F5). Out of range: one protocol error at the line's position."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from orchestrator.protocol import TS_AHEAD_S, TS_MIN, parse_line, ts_problem


def _line(typ: str, ts: Any, **fields: Any) -> str:
    return json.dumps({"v": 1, "seq": 3, "type": typ, "ts": ts, **fields})


def test_the_range_is_2000_to_a_day_past_the_clock() -> None:
    assert datetime.fromtimestamp(TS_MIN, timezone.utc) == datetime(2000, 1, 1, tzinfo=timezone.utc)
    assert TS_AHEAD_S == 24 * 3600


@pytest.mark.parametrize("typ", ["hello", "case_start", "result", "log", "error", "done"])
def test_every_line_type_with_a_ts_out_of_range_is_one_protocol_error_at_its_position(typ: str) -> None:
    for ts in (1e12, 1e300, -1e12, 1e11, 0, TS_MIN - 0.5, time.time() + TS_AHEAD_S + 3600):
        ev = parse_line(_line(typ, ts, case_index=1, case={"M": 2}), expected_seq=3)
        assert (ev.seq, ev.type, ev.data["kind"], ev.data["line_type"]) == (3, "error", "protocol", typ), ts
        assert ev.data["message"].startswith(f"agent line 3 ({typ}): ts {float(ts)!r} ("), ev.data["message"]
        assert "is outside the accepted range of ts" in ev.data["message"]
        assert (ev.data["case_index"], ev.data["case"]) == (1, {"M": 2})  # the row names its case
        assert ev.ts is None


def test_the_edges_of_the_range_are_taken() -> None:
    for ts in (TS_MIN, 1_790_000_000.25, time.time() + TS_AHEAD_S - 60):
        ev = parse_line(_line("log", ts, message="m"), expected_seq=3)
        assert (ev.type, ev.ts) == ("log", float(ts))


def test_the_sentence_names_the_date_and_the_range() -> None:
    now = 1_796_083_200.0  # 2026-12-01 00:00:00 UTC
    assert ts_problem(1e11, now) == (
        "ts 100000000000.0 (5138-11-16 09:46:40 UTC) is outside the accepted range of ts, unix seconds from "
        "946684800 (2000-01-01 00:00:00 UTC) to 1796169600 (2026-12-02 00:00:00 UTC, orch's clock + 1 day): the "
        "host's clock is wrong or the line was changed; its content is not trusted"
    )
    assert ts_problem(1e300, now).startswith("ts 1e+300 (outside the years 1-9999) is outside the accepted range")
    assert ts_problem(-1e12, now).startswith("ts -1000000000000.0 (outside the years 1-9999) is outside")
