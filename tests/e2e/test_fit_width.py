"""``orch runs show`` in 100 columns (the real ``orch``, piped, ``COLUMNS=100``; and piped without COLUMNS,
which is 100 too): the Hosts table broke words (``localhos|t``, ``complete|d``, ids split) while columns holding
only ``-`` took the room. All-empty columns are dropped; host names, statuses and ids are never broken."""

from __future__ import annotations

import subprocess

import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")

HOST = "localhost-with-a-long-name-0"


def _run(store: Store) -> str:
    store.upsert_host(HOST, address=None, group="g", labels={})
    rid = store.create_run(suite="my-suite", params={}, preset=None, label=None, hosts=[HOST],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, HOST, facts={"gpus": []}, agent_version="3528d01221c0e24d0e79", build_sha=None)
    metric = {"value": 1.0, "unit": "ms", "median": 1.0, "p10": 0.99, "p90": 1.01, "n": 5}
    store.ingest(rid, HOST, [Event(seq=i, type="result", data={"case": {"M": 2**i, "E": 16, "H": 256},
                                                               "metrics": {"time_ms": metric}}) for i in range(3)])
    store.finish_host_run(rid, HOST, "completed")
    store.finish_run(rid, "completed")
    return rid


def _hosts_table(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("Hosts") if "Hosts" in lines else next(i for i, ln in enumerate(lines) if ln.strip() == "Hosts")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("└"))
    return lines[start + 1 : end + 1]


@pytest.mark.parametrize("columns", [100, None])
def test_the_hosts_table_fits_100_columns_without_breaking_words(
    orch: Orch, store: Store, columns: int | None
) -> None:
    rid = _run(store)
    if columns is None:  # piped, COLUMNS unset: a fixed 100
        env = {k: v for k, v in orch.env().items() if k != "COLUMNS"}
        res = subprocess.run(orch.argv("runs", "show", rid), cwd=orch.cwd, env=env, capture_output=True, text=True,
                             timeout=240)  # fmt: skip
    else:
        res = orch("runs", "show", rid, columns=columns)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) <= 100, res.stdout
    table = _hosts_table(res.stdout)
    header = [c.strip() for c in table[1].split("┃")[1:-1]]
    assert header == ["host", "status", "results", "errors", "warnings", "agent"], header  # GPU, roof, plateau,
    row = [c.strip() for c in table[3].split("│")[1:-1]]                                   # error: all empty
    assert row == [HOST, "completed", "3", "0", "0", "3528d01221c0"], table
