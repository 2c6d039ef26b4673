"""Where a run's store thread spends its time (issue 18): a diagnostic, not part of orch.

With ``ORCH_STORECALLS=PREFIX`` set and this folder first on ``PYTHONPATH``, every ``orch`` process that imports
``orchestrator.runner`` appends one line per call made on the run's store thread (``StoreWriter.call``) to
``PREFIX.PID``: ``submitted queued ran name``, seconds since the process started (submitted), spent waiting
behind earlier calls (queued) and running (ran); ``CLOSE`` is the wait for the thread at the run's end. Nothing is
profiled, so the times are the calls' own. Example (the 200- and 500-host figures of docs/scale.md)::

    ORCH_STORECALLS=/tmp/sc/calls PYTHONPATH=$PWD/bench/store_thread SIZES="200:1 500:1" \\
        bash bench/fanout_scale_device.sh

Any other process (the floors, pytest) only gains an import hook that does nothing until that module is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from types import ModuleType
from typing import Any

_PREFIX = os.environ.get("ORCH_STORECALLS")
_T0 = time.perf_counter()


def _patch(runner: ModuleType) -> None:
    out = open(f"{_PREFIX}.{os.getpid()}", "a", buffering=1)  # kept open for the process's life
    writer = runner.StoreWriter
    call, close = writer.call, writer.close

    async def timed_call(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        submitted = time.perf_counter()

        def run() -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                name = getattr(fn, "__qualname__", type(fn).__name__)
                ran = time.perf_counter() - start
                out.write(f"{submitted - _T0:.4f} {start - submitted:.4f} {ran:.4f} {name}\n")

        return await call(self, run)

    def timed_close(self: Any) -> None:
        start = time.perf_counter()
        close(self)
        out.write(f"{start - _T0:.4f} 0 {time.perf_counter() - start:.4f} CLOSE\n")

    writer.call, writer.close = timed_call, timed_close


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != "orchestrator.runner":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def patched(module: ModuleType) -> None:
            exec_module(module)
            _patch(module)

        loader.exec_module = patched
        return spec


if _PREFIX:
    sys.meta_path.insert(0, _Hook())
