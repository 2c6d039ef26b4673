"""Cost of the statistics of a comparison (``analysis.stats``) — printed as ratios, not asserted.

    .venv/bin/python bench/stats.py                  # 1,000 cases of 20 samples per side
    .venv/bin/python bench/stats.py --cases 2000 --samples 50

Baseline, measured in the same run on the same samples: ``compare_samples`` called once per case (one SciPy
``mannwhitneyu`` and one ``bootstrap`` per case, the first implementation). orch: ``compare_many``, which hands
every group of cases with equal sample counts to SciPy as one 2-D array. Target: orch >= 3x faster than the
baseline at 1,000 cases, and under ~1 ms per case on an idle core (so the 2,000-case limit of ``runs compare``,
``store.stats_repo.STATS_MAX_CASES``, stays near a second). Each figure is the best of ``--repeat`` rounds, the
rounds alternating baseline and orch so that a busy machine slows both; the load average is printed with them.
The baseline runs on the first ``--baseline-cases`` cases only and is scaled per case.

Seen on the shared 2-core box at load average 23-26 (2026-11-30): baseline 2.7-40 ms, orch 0.66-9 ms per case,
speed-up 4.1-8.0x; the first version (np.median, one SciPy call pair per case) took 40-87 ms per case there.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from orchestrator.analysis import stats  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000, help="cases in the comparison (default 1,000)")
    ap.add_argument("--samples", type=int, default=20, help="samples per side (default 20, orch's --repeat default)")
    ap.add_argument("--baseline-cases", type=int, default=100, help="cases the per-case baseline runs (default 100)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best of each is kept (default 3)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    cases: list[stats.CaseInput] = [
        (list(rng.normal(1.0, 0.01, args.samples)), list(rng.normal(1.0 + 0.002 * (i % 10), 0.01, args.samples)),
         0.0128, "within-run")
        for i in range(args.cases)
    ]  # fmt: skip
    few = cases[: args.baseline_cases]
    base_best = orch_best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        alone = [stats.compare_samples(b, h, band=band, band_source=src) for b, h, band, src in few]
        base_best = min(base_best, (time.perf_counter() - t0) / len(few))
        t0 = time.perf_counter()
        together = stats.compare_many(cases)
        orch_best = min(orch_best, (time.perf_counter() - t0) / len(cases))
        assert together[: len(few)] == alone, "compare_many must give each case's own figures"
    print(f"{args.cases:,} cases x {args.samples} samples per side; load average {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    print(f"  baseline (compare_samples per case): {base_best * 1000:8.2f} ms per case")
    print(f"  orch (compare_many, grouped):        {orch_best * 1000:8.2f} ms per case")
    ratio = base_best / orch_best
    print(f"  speed-up {ratio:.1f}x (target >= 3x): {'ok' if ratio >= 3 else 'MISS'}")


if __name__ == "__main__":
    main()
