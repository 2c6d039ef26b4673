"""Ingest rate from spool lines to the store, on SQLite and PostgreSQL — printed against a floor, not asserted.

    .venv/bin/python bench/ingest.py                 # both engines, lines of 200 B, 20 KB and 2 MB
    .venv/bin/python bench/ingest.py --db sqlite --scale 0.2

orch's path, as the runner's follow loop runs it: the spool's bytes in chunks as a transport reads them
(``transport.lines.LineSplitter``), each line an event at its position (``ingest.SpoolLines``: orjson, seq, field
types and case order checked),
the runner's enrichment (``runner.enrich_event``), ``Store.ingest`` in batches of ``runner.INGEST_BATCH_MAX``,
in a process whose heap is frozen once the store is open, as the runner freezes it (``orchestrator/heap.py``).

The floor, measured in the same run on the same database and table: ``bytes.splitlines`` + ``json.loads`` of each
line + one DB-API ``executemany`` of the same rows (the same columns, JSON columns re-encoded with ``json.dumps``)
per batch — what a plain loader with no checks would do. Targets (issue 10): orch >= 0.7x the floor for every
line size, and >= 20,000 rows/s on SQLite for 200 B lines. Each figure is the best of ``--repeat`` rounds (rounds
alternate floor and orch, so that a busy machine slows both); the load average is printed with them.
PostgreSQL is a throwaway cluster from Debian's binaries (tests/plugins/pg.py), fsync off as in the tests.
For 200 B lines it also prints the time per row of each stage of both paths (where the time goes).
Figures measured here, and what they say: docs/testing.md, "Ingest rate".
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator import heap  # noqa: E402
from orchestrator.ingest import SpoolLines  # noqa: E402
from orchestrator.runner import INGEST_BATCH_MAX, enrich_event  # noqa: E402
from orchestrator.store import compute  # noqa: E402
from orchestrator.store.repo import Store  # noqa: E402
from orchestrator.transport.lines import STREAM_CHUNK_BYTES, LineSplitter  # noqa: E402

HOST = "bench-0"
SIZES = {"200 B": (200, 50_000), "20 KB": (20_000, 5_000), "2 MB": (2_000_000, 50)}  # line bytes, rows at scale 1
COLUMNS = ("run_id", "host", "seq", "case_index", "status", "case_params", "case_key", "m", "concurrency",
           "size_bytes", "metrics", "samples", "info", "error", "ts")  # fmt: skip
TARGET_RATIO, TARGET_SQLITE_200B = 0.7, 20_000


def spool(line_bytes: int, rows: int) -> bytes:
    """hello + ``rows`` result lines of ``line_bytes`` bytes each (newline included; padded in ``info.pad``)."""
    out = [json.dumps({"v": 1, "seq": 0, "type": "hello", "agent_version": "0" * 64, "facts": {}, "cases_total": rows})]
    for i in range(rows):
        doc: dict[str, Any] = {
            "v": 1, "seq": i + 1, "type": "result", "ts": 1.79e9 + i, "case_index": i, "case": {"ms": i},
            "metrics": {"time_ms": {"value": 1.0 + i % 7, "unit": "ms", "n": 1}}, "info": {"pad": ""},
        }  # fmt: skip
        short = len(json.dumps(doc, separators=(",", ":"))) + 1
        doc["info"]["pad"] = "p" * max(0, line_bytes - short)
        out.append(json.dumps(doc, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode()


def orch_path(store: Store, run_id: str, data: bytes) -> int:
    """The runner's path from stream bytes to the store; returns result rows stored."""
    splitter, spool, batch, stored = LineSplitter(), SpoolLines(0), [], 0
    for off in range(0, len(data), STREAM_CHUNK_BYTES):
        for line in splitter.feed(data[off : off + STREAM_CHUNK_BYTES]):
            batch.append(enrich_event("noop", spool.event(line), None))
            if len(batch) >= INGEST_BATCH_MAX:
                stored += store.ingest(run_id, HOST, batch)
                batch = []
    if batch:
        stored += store.ingest(run_id, HOST, batch)
    return stored


def _row(run_id: str, seq: int, doc: dict[str, Any]) -> tuple[Any, ...]:
    case = doc.get("case") or {}
    return (run_id, HOST, seq, doc.get("case_index"), "ok", json.dumps(case), compute.case_key(case), None, None,
            None, json.dumps(doc.get("metrics")), None, json.dumps(doc.get("info")), None, doc.get("ts"))  # fmt: skip


def floor_path(executemany: Callable[[list[tuple[Any, ...]]], None], run_id: str, data: bytes) -> int:
    """``json.loads`` + ``executemany`` of the same rows, in batches of the same size; returns rows written."""
    rows: list[tuple[Any, ...]] = []
    n = 0
    for seq, line in enumerate(data.splitlines()):
        doc = json.loads(line)
        if doc.get("type") != "result":
            continue
        rows.append(_row(run_id, seq, doc))
        if len(rows) >= INGEST_BATCH_MAX:
            executemany(rows)
            n += len(rows)
            rows = []
    if rows:
        executemany(rows)
        n += len(rows)
    return n


def sqlite_floor(path: str) -> tuple[Callable[[list[tuple[Any, ...]]], None], Callable[[], None]]:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # what orch's SQLite engine sets (store/session.py)
    sql = f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"

    def write(rows: list[tuple[Any, ...]]) -> None:
        with conn:
            conn.executemany(sql, rows)

    return write, conn.close


def pg_floor(dsn: str) -> tuple[Callable[[list[tuple[Any, ...]]], None], Callable[[], None]]:
    import psycopg

    conn = psycopg.connect(dsn)
    casts = {"case_params": "::json", "metrics": "::jsonb", "info": "::json"}
    values = ", ".join("to_timestamp(%s)" if c == "ts" else "%s" + casts.get(c, "") for c in COLUMNS)
    sql = f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({values})"

    def write(rows: list[tuple[Any, ...]]) -> None:
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(sql, rows)

    return write, conn.close


def stages(store: Store, write: Callable[[list[tuple[Any, ...]]], None], data: bytes, new_run: Callable[[], str],
           repeat: int) -> tuple[dict[str, float], dict[str, float]]:  # fmt: skip
    """Where the time goes, per result row (µs, best of ``repeat``): orch's path cut at its stages (split into
    lines, parse + checks, enrichment, ``Store.ingest``: rows built, encoded, INSERTed, committed) and the
    floor's (``json.loads``, the row tuples, ``executemany`` + commit), each stage timed over all rows at once."""
    orch: dict[str, float] = {}
    floor: dict[str, float] = {}

    def best(d: dict[str, float], key: str, dt: float, n: int) -> None:
        d[key] = min(d.get(key, float("inf")), dt / n * 1e6)

    for _ in range(repeat):
        t0 = time.perf_counter()
        splitter, lines = LineSplitter(), []
        for off in range(0, len(data), STREAM_CHUNK_BYTES):
            lines.extend(splitter.feed(data[off : off + STREAM_CHUNK_BYTES]))
        t1 = time.perf_counter()
        spool_lines = SpoolLines(0)
        events = [spool_lines.event(line) for line in lines]
        t2 = time.perf_counter()
        events = [enrich_event("noop", ev, None) for ev in events]
        t3 = time.perf_counter()
        rid = new_run()
        for i in range(0, len(events), INGEST_BATCH_MAX):
            store.ingest(rid, HOST, events[i : i + INGEST_BATCH_MAX])
        t4 = time.perf_counter()
        store.delete_run(rid)
        n = len(events) - 1
        for key, dt in (("split", t1 - t0), ("parse+checks", t2 - t1), ("enrich", t3 - t2), ("Store.ingest", t4 - t3)):
            best(orch, key, dt, n)
        t0 = time.perf_counter()
        docs = [json.loads(line) for line in data.splitlines()]
        t1 = time.perf_counter()
        rid = new_run()
        rows = [_row(rid, seq, doc) for seq, doc in enumerate(docs) if doc.get("type") == "result"]
        t2 = time.perf_counter()
        for i in range(0, len(rows), INGEST_BATCH_MAX):
            write(rows[i : i + INGEST_BATCH_MAX])
        t3 = time.perf_counter()
        store.delete_run(rid)
        for key, dt in (("json.loads", t1 - t0), ("rows", t2 - t1), ("executemany", t3 - t2)):
            best(floor, key, dt, len(rows))
    return orch, floor


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench(name: str, url: str, floor: tuple[Callable[[list[tuple[Any, ...]]], None], Callable[[], None]],
          scale: float, repeat: int) -> list[str]:  # fmt: skip
    """Print one engine's table; returns the targets missed."""
    store = Store.from_url(url)
    store.upgrade()
    store.upsert_host(HOST, address=None, group="bench", labels={})
    heap.settle()  # as the runner does once the store is open (orchestrator/heap.py); the floor gains from it too
    write, close = floor
    missed: list[str] = []
    stage_lines: list[str] = []
    print(f"\n{name} (load average {_load()}, {os.cpu_count()} CPUs)")
    print(f"  {'line':>6} {'rows':>7} {'MB':>6} {'floor rows/s':>13} {'orch rows/s':>12} {'ratio':>6}  verdict")
    for label, (line_bytes, rows_1) in SIZES.items():
        rows = max(2, int(rows_1 * scale))
        data = spool(line_bytes, rows)
        best = {"floor": 0.0, "orch": 0.0}
        for _ in range(repeat):
            for kind in ("floor", "orch"):
                rid = store.create_run(suite="noop", params={}, preset=None, label=f"bench {label} {kind}",
                                       hosts=[HOST], started_by="bench", started_on="bench")  # fmt: skip
                t0 = time.perf_counter()
                n = floor_path(write, rid, data) if kind == "floor" else orch_path(store, rid, data)
                dt = time.perf_counter() - t0
                assert n == rows, (kind, n, rows)
                best[kind] = max(best[kind], n / dt)
                store.delete_run(rid)
        ratio = best["orch"] / best["floor"]
        ok = ratio >= TARGET_RATIO and not (name == "SQLite" and label == "200 B" and best["orch"] < TARGET_SQLITE_200B)
        if not ok:
            missed.append(f"{name} {label}")
        print(f"  {label:>6} {rows:>7,} {len(data) / 1e6:>6.1f} {best['floor']:>13,.0f} {best['orch']:>12,.0f} "
              f"{ratio:>5.2f}x  {'ok' if ok else 'MISS'}")  # fmt: skip
        if label == "200 B":
            def new_run() -> str:
                return store.create_run(suite="noop", params={}, preset=None, label="bench stages", hosts=[HOST],
                                        started_by="bench", started_on="bench")  # fmt: skip

            o, f = stages(store, write, data, new_run, repeat)
            stage_lines.append(f"  {label} per row, us: orch " + " + ".join(f"{k} {v:.1f}" for k, v in o.items())
                               + f" = {sum(o.values()):.1f}; floor " + " + ".join(f"{k} {v:.1f}" for k, v in f.items())
                               + f" = {sum(f.values()):.1f}")  # fmt: skip
    for line in stage_lines:
        print(line)
    print(f"  targets: >= {TARGET_RATIO}x the floor; SQLite 200 B >= {TARGET_SQLITE_200B:,} rows/s; "
          f"load average after {_load()}")
    close()
    store.close()
    return missed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the default row counts (default 1)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per line size; the best is kept (default 3)")
    args = ap.parse_args()
    missed: list[str] = []
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
            path = f"{tmp}/bench.db"
            Store.from_url(f"sqlite:///{path}").upgrade()
            missed += bench("SQLite", f"sqlite:///{path}", sqlite_floor(path), args.scale, args.repeat)
    if args.db in ("postgres", "both"):
        from tests.plugins.pg import running_postgres

        with running_postgres() as pg:
            import psycopg

            with psycopg.connect(pg.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE bench")
            Store.from_url(pg.url("bench")).upgrade()
            missed += bench("PostgreSQL", pg.url("bench"), pg_floor(pg.dsn("bench")), args.scale, args.repeat)
    print("\nall targets met" if not missed else f"\ntargets missed: {', '.join(missed)}")


if __name__ == "__main__":
    main()
