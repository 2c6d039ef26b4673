"""docs/suites.md's complete example is a working suite: extracted from the markdown, ``orch suites show`` loads
it (the real ``orch`` process) and ``orch run`` runs it on a local host, storing its metrics and checking its
reference. A doc edit that breaks the example fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch, local_orch

DOC = Path(__file__).resolve().parents[2] / "docs" / "suites.md"


def _example() -> str:
    m = re.search(r"<!-- suites-example[^>]*-->\n```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert m is not None, "docs/suites.md lost its marked example block"
    return m.group(1)


@pytest.fixture
def orch(tmp_path: Path) -> Orch:
    (tmp_path / "my-suites").mkdir()
    (tmp_path / "my-suites" / "sha256-speed.yaml").write_text(_example(), encoding="utf-8")
    return local_orch(tmp_path)


def test_the_docs_example_loads_and_runs(orch: Orch, tmp_path: Path) -> None:
    res = orch("suites", "show", "sha256-speed", "--suite-dir", "my-suites", columns=200)
    assert res.returncode == 0, res.stdout + res.stderr
    for text in ("sha256-speed (bench command)", "size_bytes", "65536..4194304", "quick", "parser: regex",
                 "gbps", ">= 0.01 GB/s", "RUN_LABEL={label}"):  # fmt: skip
        assert text in res.stdout, (text, res.stdout)
    doc = orch.json("run", "sha256-speed", "--hosts", "local", "--suite-dir", "my-suites", "--preset", "quick",
                    timeout=300)  # fmt: skip
    assert doc["status"] == "completed", doc
    shown = orch.json("runs", "show", doc["run_id"])
    results = shown["results"]
    assert sorted(r["case"]["size_bytes"] for r in results) == [65536, 1048576]
    for r in results:
        assert r["status"] == "ok", r
        assert r["metrics"]["gbps"]["unit"] == "GB/s" and r["metrics"]["gbps"]["n"] == 5
        assert r["metrics"]["time_ms"]["median"] > 0
        assert r["info"]["references"]["gbps"]["pass"] is True
