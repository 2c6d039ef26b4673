"""Ingest from many hosts at once: does one store writer keep up? — printed, not asserted (issue 18: "the store
writer batches across hosts", "ingest keeping up (no growing queue)").

    .venv/bin/python bench/ingest_fanin.py                        # 1,000 hosts, 2 lines/s each, 20 s, SQLite
    .venv/bin/python bench/ingest_fanin.py --hosts 200 --rate 10 --db postgres

N fake followers on a real store (no SSH: bench/fanout_scale.py measures the connections). Each host has a
producer that makes one 200 B result line every ``1/rate`` s (jittered, so hosts do not tick together) and puts
its event (``ingest.SpoolLines``: parsed and checked, ``runner.enrich_event``) on the host's bounded queue, as
the runner's reader does; each host's follow loop drains its queue (``runner._drain``) and hands the batch to
the store — exactly the runner's loop, with one of two writers:

  batched:   ``store_writer.IngestWriter`` (what the runner uses): one transaction holds the queued batches of
             every host (``Store.ingest_many``);
  per-host:  each batch is its own ``Store.ingest`` transaction on the same store thread (the runner before it).

Printed per writer: the rate in (lines made per second) and out (lines committed per second), the backlog (lines
made and not yet committed: the hosts' queues, the writer's queue and the transaction being written) sampled
every 0.5 s and summarized per quarter of the run, its trend (least-squares slope over the second half, lines/s),
transactions per second and hosts per transaction, and the time to drain the backlog after the producers stop.
"Keeps up" means the backlog does not grow: its slope over the second half is under 5% of the rate in (a
group commit settles at the backlog whose transactions are large enough to carry the input; that level is printed
in seconds of input). The load average is printed with each; the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import spool  # noqa: E402
from orchestrator.ingest import SpoolLines  # noqa: E402
from orchestrator.protocol import Event  # noqa: E402
from orchestrator.runner import INGEST_BATCH_MAX, INGEST_QUEUE_MAX, StoreWriter, _drain, _StreamEnd, enrich_event  # noqa: E402
from orchestrator.store.repo import Store  # noqa: E402
from orchestrator.store_writer import IngestWriter  # noqa: E402


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _slope(points: list[tuple[float, int]]) -> float:
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def _setup(store: Store, hosts: list[str]) -> str:
    run_id = store.create_run(suite="noop", params={}, preset=None, label="fan-in bench", hosts=hosts,
                              started_by="bench", started_on="bench")  # fmt: skip
    for h in hosts:
        store.start_host_run(run_id, h, facts={}, agent_version="bench", build_sha=None)
    return run_id


async def _measure(store: Store, run_id: str, hosts: list[str], lines: list[bytes], mode: str, rate: float,
                   seconds: float) -> dict[str, Any]:  # fmt: skip
    thread = StoreWriter(store)
    writer = IngestWriter(lambda b: thread.call(store.ingest_many, b), batch_max=INGEST_BATCH_MAX)
    write: Callable[[str, list[Event]], Awaitable[int]]
    if mode == "batched":
        write = lambda host, batch: writer.write(run_id, host, batch)  # noqa: E731
    else:
        write = lambda host, batch: thread.call(store.ingest, run_id, host, batch)  # noqa: E731
    made = committed = transactions = 0
    per_host = int(rate * seconds) + 1  # lines each host makes (hello + results)

    async def produce(host: str, q: asyncio.Queue[Event | _StreamEnd], t0: float) -> None:
        nonlocal made
        spool_lines = SpoolLines(0)
        await asyncio.sleep(random.uniform(0, 1 / rate))
        for i in range(per_host):
            ev = enrich_event("noop", spool_lines.event(lines[i]), None)
            await q.put(ev)
            made += 1
            await asyncio.sleep(max(0.0, t0 + (i + 1) / rate * random.uniform(0.9, 1.1) - time.monotonic()))
        await q.put(_StreamEnd(None))

    async def follow(host: str, q: asyncio.Queue[Event | _StreamEnd]) -> None:
        nonlocal committed, transactions
        while True:
            batch, end = _drain(await q.get(), q)
            if batch:
                await write(host, batch)
                committed += len(batch)
                transactions += 1
            if end is not None:
                return

    samples: list[tuple[float, int]] = []
    t0 = time.monotonic()
    queues = {h: asyncio.Queue[Event | _StreamEnd](maxsize=INGEST_QUEUE_MAX) for h in hosts}
    tasks = [asyncio.create_task(produce(h, queues[h], t0)) for h in hosts]
    followers = [asyncio.create_task(follow(h, queues[h])) for h in hosts]

    async def sample() -> None:
        while True:
            samples.append((time.monotonic() - t0, made - committed))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    await asyncio.gather(*tasks)
    produced_s = time.monotonic() - t0
    made_at_end, committed_at_end = made, committed
    await asyncio.gather(*followers)
    drain_s = time.monotonic() - t0 - produced_s
    sampler.cancel()
    await writer.close()
    thread.close()
    return {
        "made": made_at_end, "committed_during": committed_at_end, "produced_s": produced_s, "drain_s": drain_s,
        "samples": samples, "store_calls": writer.stats.transactions if mode == "batched" else transactions,
        "batches": transactions, "max_batches": writer.stats.max_batches_per_transaction,
    }  # fmt: skip


def report(mode: str, n_hosts: int, rate: float, r: dict[str, Any]) -> bool:
    s: list[tuple[float, int]] = r["samples"]
    during = [p for p in s if p[0] <= r["produced_s"]]
    q = max(1, len(during) // 4)
    quarters = [qq for qq in (during[i * q : (i + 1) * q] for i in range(4)) if qq]
    rate_in = r["made"] / r["produced_s"]
    rate_out = r["committed_during"] / r["produced_s"]
    slope = _slope(during[len(during) // 2 :])
    last = statistics.median(b for _, b in quarters[-1])
    ok = slope < 0.05 * rate_in
    calls_s = r["store_calls"] / (r["produced_s"] + r["drain_s"])
    hosts_per = r["batches"] / r["store_calls"] if r["store_calls"] else 0
    most = r["max_batches"] or 1
    print(f"  {mode:>8}: in {rate_in:8,.0f} lines/s  out {rate_out:8,.0f} lines/s  "
          f"{calls_s:7,.1f} transactions/s ({hosts_per:.1f} host batches each, max {most})")  # fmt: skip
    backlog = "  ".join(f"{statistics.median(b for _, b in qq):,.0f}/{max(b for _, b in qq):,}" for qq in quarters)
    print("            backlog (lines made, not committed) per quarter, median/max: " + backlog
          + f" (last: {last / rate_in:.1f} s of input); slope {slope:+,.1f} lines/s; "
          f"drained {r['drain_s']:.1f} s after the last line  -> {'keeps up' if ok else 'FALLS BEHIND'}  "
          f"(load {_load()})")  # fmt: skip
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000, help="fake hosts (default 1000)")
    ap.add_argument("--rate", type=float, default=2.0, help="result lines per second per host (default 2)")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long each host makes lines (default 20)")
    ap.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--mode", choices=["batched", "per-host", "both"], default="both")
    args = ap.parse_args()
    hosts = [f"fanin-{i:04d}" for i in range(args.hosts)]
    lines = spool(200, int(args.rate * args.seconds) + 1).splitlines()
    with ExitStack() as stack:
        if args.db == "sqlite":
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="orch-bench-"))
            url = f"sqlite:///{tmp}/fanin.db"
        else:
            import psycopg

            from tests.plugins.pg import running_postgres

            pg = stack.enter_context(running_postgres())
            with psycopg.connect(pg.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE fanin")
            url = pg.url("fanin")
        store = Store.from_url(url)
        store.upgrade()
        print(f"{args.db}: {args.hosts} hosts x {args.rate:g} lines/s for {args.seconds:g} s "
              f"({args.hosts * args.rate:,.0f} lines/s offered); {os.cpu_count()} CPUs, load {_load()}")  # fmt: skip
        verdicts = []
        for mode in ("batched", "per-host") if args.mode == "both" else (args.mode,):
            run_id = _setup(store, hosts)
            r = asyncio.run(_measure(store, run_id, hosts, lines, mode, args.rate, args.seconds))
            stored = sum(h.last_seq + 1 for h in store.get_run(run_id).host_runs)
            assert stored == r["made"], (stored, r["made"])  # every line made is committed, once
            verdicts.append(report(mode, args.hosts, args.rate, r))
        store.close()


if __name__ == "__main__":
    main()
