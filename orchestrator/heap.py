"""The process's long-lived objects kept out of the cyclic garbage collector's walks while lines are ingested.

Ingest allocates a few small containers per agent line (the parsed dict, the event, the row), held in batches of up
to ``runner.INGEST_BATCH_MAX`` lines: every 700 allocations (CPython's generation-0 threshold) a young collection
runs, every tenth of those a middle one, and now and then a full collection walks every object the process holds:
SQLAlchemy's, asyncssh's, typer's, rich's and pydantic's modules and caches, which dwarf one batch.
:func:`settle` calls :func:`gc.freeze` once, after the store is open and the hosts are reached (the imports done):
what is alive then moves to the permanent generation, which no collection walks. Freezing frees nothing and keeps
nothing alive (reference counting still frees a frozen object); only a reference cycle that is already garbage at
that moment is never collected. ``bench/ingest.py`` (200 B lines, SQLite): orch's rows/s 23,483-23,973 without,
29,536-30,572 with (floor 33,065-40,567), 2026-12-03, 2 cores, load 1-3.
"""

from __future__ import annotations

import gc

_settled = False


def settle() -> None:
    """Freeze the heap as it is now (:func:`gc.freeze`), once per process; later calls do nothing."""
    global _settled
    if not _settled:
        _settled = True
        gc.freeze()
