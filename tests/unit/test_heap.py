"""orchestrator.heap: the heap frozen once per process, in a fresh interpreter (gc state is per process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json
from orchestrator import heap
before = gc.get_freeze_count()
heap.settle()
first = gc.get_freeze_count()
later = [[i] for i in range(1000)]  # made after: never frozen by a second call
heap.settle()
print(json.dumps([before, first, gc.get_freeze_count()]))
"""


def test_settle_freezes_what_is_alive_once_and_nothing_made_after() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    before, first, second = json.loads(out.stdout)
    assert before == 0
    assert first > 100  # the modules orchestrator.heap's import loaded, at least
    assert second == first

