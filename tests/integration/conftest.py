"""Helpers shared by the store and API tests: event builders and a seeded store."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn

from orchestrator.api.app import create_app
from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store

WRITE_TOKEN = "w" * 8 + "-0123456789abcdef"


def result_event(seq: int, m: int, time_ms: float, *, gbps: float | None = None, **case: Any) -> Event:
    metrics: dict[str, Any] = {
        "time_ms": {"value": time_ms, "unit": "ms", "median": time_ms, "p10": time_ms * 0.95,
                    "p90": time_ms * 1.05, "min": time_ms * 0.9, "max": time_ms * 1.1, "n": 3,
                    "samples": [time_ms * 0.95, time_ms, time_ms * 1.05]},
    }  # fmt: skip
    if gbps is not None:
        metrics["gbps"] = {"value": gbps, "unit": "GB/s", "median": gbps}
    return Event(
        seq=seq, type="result", ts=1_700_000_000.0 + seq,
        data={"case_index": seq, "case": {"M": m, "E": 8, "seed": seq, **case}, "metrics": metrics},
    )  # fmt: skip


def hello(seq: int = 0) -> Event:
    return Event(
        seq=seq,
        type="hello",
        data={"agent_version": "a" * 64, "facts": {"gpus": [{"name": "NVIDIA H200"}]}, "cases_total": 4},
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Callable[[Settings, Store], str]]:
    """Start the app on a real uvicorn server (thread, free port); returns its base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(settings: Settings, store: Store) -> str:
        port = _free_port()
        config = uvicorn.Config(create_app(settings, store), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


def seed(store: Store) -> dict[str, str]:
    ids: dict[str, str] = {}
    for name, suite, hosts, scale in (
        ("hbm", "hbm-bandwidth", ["h1"], 1.0),
        ("base", "moe-sweep", ["h1", "h2"], 2.0),
        ("head", "moe-sweep", ["h1", "h2"], 1.0),
    ):
        rid = store.create_run(suite=suite, params={"E": 8}, preset="tiny", label=name, hosts=hosts,
                               started_by="t@box", started_on="box")  # fmt: skip
        for h in hosts:
            store.start_host_run(
                rid, h, facts={"gpus": [{"name": "NVIDIA H200"}]}, agent_version="v", build_sha=None
            )
            gbps = 4000.0 if suite == "hbm-bandwidth" else 3000.0
            store.ingest(
                rid, h, [hello(0)] + [result_event(i, 2**i, scale * i, gbps=gbps) for i in range(1, 5)]
            )
            store.finish_host_run(rid, h, "completed")
        store.finish_run(rid, "completed")
        ids[name] = rid
    return ids


def started_run(store: Store, hosts: list[str]) -> str:
    """A moe-sweep run on ``hosts``, each host run started (facts empty, agent v1): what ingest writes into."""
    run_id = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=hosts,
                              started_by="me@box", started_on="box")  # fmt: skip
    for h in hosts:
        store.start_host_run(run_id, h, facts={}, agent_version="v1", build_sha=None)
    return run_id
