"""Benches: each module has ``run_case(case: dict, ctx: Context) -> {"metrics": {...}, "info": {...}}``.

Metrics follow the protocol's ``result`` shape (``name -> {"value", "unit", "median", "p10", "p90", "min",
"max", "n", "samples"}``; only value and unit are required). A bench raises on failure; the worker turns
that into an ``error`` event for the case and goes on with the next one. torch is imported inside the
benches, never here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

BENCHES = ("moe_gemm", "hbm", "sleep", "allreduce", "decode", "command", "overheads")


class Context:
    """What a bench gets besides its case: the run's settings, a cache that lives for the whole run, a logger.

    ``device`` is the spec's request (``auto|cuda|cpu``); benches resolve it. ``state`` survives across the
    cases of one run (weights built for one shape are reused by the next case of the same shape, the numerical
    check runs once per run). ``run_dir`` is the run's directory on the host (None outside a worker: a bench
    then keeps files in a temporary directory) and ``case_index`` the index of the case being run.
    """

    def __init__(
        self,
        *,
        repeat: int = 20,
        warmup: int = 5,
        device: str = "auto",
        seed: int = 0,
        log: Callable[[str, str], None] | None = None,
        run_dir: str | None = None,
    ) -> None:
        self.repeat = repeat
        self.warmup = warmup
        self.device = device
        self.seed = seed
        self.state: dict[str, Any] = {}
        self._log = log
        self.run_dir = run_dir
        self.case_index = 0

    def log(self, message: str, level: str = "info") -> None:
        if self._log is not None:
            self._log(level, message)


def load(name: str) -> Callable[[dict[str, Any], Context], dict[str, Any]]:
    """The ``run_case`` of bench ``name``; ValueError naming the known benches otherwise."""
    if name not in BENCHES:
        raise ValueError("unknown bench {!r} (known: {})".format(name, ", ".join(BENCHES)))
    mod = importlib.import_module("." + name, __name__)
    fn: Callable[[dict[str, Any], Context], dict[str, Any]] = mod.run_case
    return fn
