"""Store ingest rate and results-API latency at scale, on SQLite and PostgreSQL — printed, not asserted.

    .venv/bin/python bench/api.py                    # 1,000,000 rows: 100 runs x 10 hosts x 1,000 cases
    .venv/bin/python bench/api.py --rows 100000      # a tenth: 100 runs x 10 hosts x 100 cases
    .venv/bin/python bench/api.py --db sqlite        # one engine only

Rows go through the real path: agent JSON lines -> ``protocol.parse_line`` -> ``Store.ingest``, in batches of
one host run's events. Latencies are measured over HTTP against a real uvicorn server (httpx), p50/p95
over ``--repeat`` requests. The first run is ``hbm-bandwidth`` (the measured roof), the others ``moe-sweep``.
PostgreSQL is a throwaway cluster from Debian's binaries (tests/plugins/pg.py), fsync off as in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from orchestrator.protocol import parse_line  # noqa: E402
from orchestrator.settings import Settings  # noqa: E402
from orchestrator.store.repo import Store  # noqa: E402

RUNS, HOSTS = 100, 10
TARGETS_MS = {
    "runs?limit=50": 50,
    "runs/{id}/results (page 200)": 50,
    "series (suite, all hosts)": 100,
    "compare 10k vs 10k": 300,
}
SAMPLES = 20


def lines_for(cases: int, rng: random.Random, *, suite: str) -> list[str]:
    """One host's spool: hello, then one result line per case (kimi-k2-like metrics, 20 raw samples)."""
    out = [json.dumps({"v": 1, "seq": 0, "type": "hello", "agent_version": "0" * 64,
                       "facts": {"gpus": [{"name": "NVIDIA H200"}] * 8}, "cases_total": cases})]  # fmt: skip
    for i in range(cases):
        t = 0.3 + 10.0 * (1 - 0.99 ** (i + 1)) * rng.uniform(0.97, 1.03)
        samples = [round(t * rng.uniform(0.98, 1.02), 5) for _ in range(SAMPLES)]
        s = sorted(samples)
        metrics = {
            "time_ms": {"value": s[SAMPLES // 2], "unit": "ms", "median": s[SAMPLES // 2], "p10": s[2],
                        "p90": s[-3], "min": s[0], "max": s[-1], "n": SAMPLES, "samples": samples},
            "gbps": {"value": 3270.0 * rng.uniform(0.9, 1.0), "unit": "GB/s"},
        }  # fmt: skip
        if suite == "moe-sweep":
            metrics["us_per_token"] = {"value": t * 1000 / (i + 1), "unit": "µs"}
            metrics["tflops"] = {"value": 0.79 * (i + 1) / t, "unit": "TFLOP/s"}
            metrics["pct_peak"] = {"value": 68.0, "unit": "%"}
        case = {"M": i + 1, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16", "seed": 0}
        out.append(json.dumps({"v": 1, "seq": i + 1, "type": "result", "ts": 1.7e9 + i, "case_index": i,
                               "case": case, "metrics": metrics}))  # fmt: skip
    return out


def fill(store: Store, rows: int) -> tuple[float, list[str]]:
    """Ingest ``rows`` results; returns (rows/s, run ids oldest first)."""
    cases = max(1, rows // (RUNS * HOSTS))
    hosts = [f"node-{i:02d}" for i in range(HOSTS)]
    for h in hosts:
        store.upsert_host(h, address=None, group="bench", labels={})
    rng = random.Random(7)
    spools = {s: [lines_for(cases, rng, suite=s) for _ in range(3)] for s in ("hbm-bandwidth", "moe-sweep")}
    run_ids: list[str] = []
    inserted, busy = 0, 0.0
    for r in range(RUNS):
        suite = "hbm-bandwidth" if r == 0 else "moe-sweep"
        rid = store.create_run(suite=suite, params={}, preset="kimi-k2", label=f"bench-{r}", hosts=hosts,
                               started_by="bench@localhost", started_on="localhost")  # fmt: skip
        run_ids.append(rid)
        for j, h in enumerate(hosts):
            spool = spools[suite][j % 3]
            t0 = time.perf_counter()
            events = [parse_line(line, expected_seq=n) for n, line in enumerate(spool)]
            inserted += store.ingest(rid, h, events)
            busy += time.perf_counter() - t0
            store.finish_host_run(rid, h, "completed")
        store.finish_run(rid, "completed")
        if (r + 1) % 10 == 0:
            print(f"  {r + 1}/{RUNS} runs, {inserted:,} rows, {inserted / busy:,.0f} rows/s", file=sys.stderr)
    return inserted / busy, run_ids


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def latency(client: httpx.Client, path: str, params: dict[str, object], repeat: int) -> tuple[float, float]:
    client.get(path, params=params).raise_for_status()  # warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.get(path, params=params)
        times.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]


def bench(name: str, url: str, rows: int, repeat: int) -> None:
    from tests.integration.conftest import serve as serve_fixture

    store = Store.from_url(url)
    store.upgrade()
    print(f"[{name}] filling {rows:,} result rows ...", file=sys.stderr)
    rate, run_ids = fill(store, rows)
    gen = serve_fixture.__wrapped__()  # type: ignore[attr-defined]
    start: Callable[[Settings, Store], str] = next(gen)
    base_url = start(Settings(), store)
    print(f"\n{name}: {rows:,} rows, ingest {rate:,.0f} rows/s (target >= 20,000); load average {_load()}")
    print(f"  {'endpoint':<28} {'p50 ms':>8} {'p95 ms':>8} {'target p95':>11}")
    with httpx.Client(base_url=base_url, timeout=120) as c:
        checks = {
            "runs?limit=50": ("/api/v1/runs", {"limit": 50}),
            "runs/{id}/results (page 200)": (f"/api/v1/runs/{run_ids[50]}/results", {}),
            "series (suite, all hosts)": (
                "/api/v1/series",
                {"suite": "moe-sweep", "metric": "time_ms", "x": "M"},
            ),
            "compare 10k vs 10k": ("/api/v1/compare", {"base": run_ids[-2], "head": run_ids[-1]}),
        }
        for label, (path, params) in checks.items():
            p50, p95 = latency(c, path, params, repeat)
            verdict = "ok" if p95 <= TARGETS_MS[label] else "MISS"
            print(f"  {label:<28} {p50:>8.1f} {p95:>8.1f} {TARGETS_MS[label]:>8} ms {verdict}")
    print(f"  load average after the queries {_load()} ({os.cpu_count()} CPUs; other work on the machine counts)")
    try:
        next(gen)
    except StopIteration:
        pass
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="result rows in total (default 1,000,000)")
    ap.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--repeat", type=int, default=30, help="requests per endpoint (default 30)")
    args = ap.parse_args()
    if args.db in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
            bench("SQLite", f"sqlite:///{tmp}/bench.db", args.rows, args.repeat)
    if args.db in ("postgres", "both"):
        from tests.plugins.pg import running_postgres

        with running_postgres() as pg:
            import psycopg

            with psycopg.connect(pg.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE bench")
            bench("PostgreSQL", pg.url("bench"), args.rows, args.repeat)


if __name__ == "__main__":
    main()
