"""``orch run decode`` end to end over real SSH (sshd test bed): CPU torch + transformers, real SQLite store."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch

pytestmark = [pytest.mark.sshd, pytest.mark.torch]


def test_decode_tiny_over_ssh_lands_in_store_with_a_concurrency_series(two_hosts: tuple[Orch, list[Any]]) -> None:
    pytest.importorskip("transformers")
    orch, _ = two_hosts
    doc = orch.json(
        "run", "decode", "--hosts", "gpu-a", "--preset", "tiny", "--set", "concurrency=1,4", "--repeat", "2"
    )
    assert doc["status"] == "completed", doc
    assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [("gpu-a", "completed", 2)]
    store = Store.from_url(orch.db_url)
    page = store.results(doc["run_id"], limit=10, samples=True)
    by_c = {r.case["concurrency"]: r for r in page.items}
    assert sorted(by_c) == [1, 4]
    for c, r in by_c.items():
        assert r.metrics["output_tokens_per_s"]["unit"] == "tok/s" and r.metrics["output_tokens_per_s"]["value"] > 0
        assert r.metrics["ttft_ms"]["value"] > 0 and r.metrics["tpot_ms"]["value"] > 0
        assert len(r.metrics["tpot_ms"]["samples"]) == 2 * 15  # repeat x (output_len - 1)
        assert r.concurrency == c and r.info is not None and r.info["output_tokens"] == c * 16
    series = store.series(suite="decode", metric="output_tokens_per_s", x="concurrency")
    assert len(series.lines) == 1 and [p.x for p in series.lines[0].points] == [1, 4]
