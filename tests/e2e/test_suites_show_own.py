"""``orch suites show SUITE`` of a suite file (issue 21): the suite's own parameters (with repeat and warmup,
which its file sets), not the built-in GPU benches' ``device`` and ``seed``, and no "default preset: - on a CUDA
host" line for a suite that has none. The built-in suites still show theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Orch, local_orch
from tests.e2e.test_suites_doc import _example


@pytest.fixture
def orch(tmp_path: Path) -> Orch:
    (tmp_path / "my-suites").mkdir()
    (tmp_path / "my-suites" / "sha256-speed.yaml").write_text(_example(), encoding="utf-8")
    return local_orch(tmp_path)


def _keys(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(title))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return [ln.split("│")[1].strip() for ln in lines[start:end] if ln.startswith("│") and ln.split("│")[1].strip()]


def test_a_suite_file_shows_its_own_parameters(orch: Orch) -> None:
    res = orch("suites", "show", "sha256-speed", "--suite-dir", "my-suites", columns=100)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _keys(res.stdout, "Parameters") == ["size_bytes", "label", "repeat", "warmup"], res.stdout
    assert "routing" not in res.stdout and "default preset" not in res.stdout, res.stdout
    doc = orch.json("suites", "show", "sha256-speed", "--suite-dir", "my-suites")  # what a run accepts: all
    assert [p["name"] for p in doc["params"]] == ["size_bytes", "label", "repeat", "warmup", "device", "seed"]


def test_a_builtin_suite_still_shows_device_and_seed(orch: Orch) -> None:
    res = orch("suites", "show", "moe-sweep", columns=100)
    assert res.returncode == 0, res.stdout + res.stderr
    keys = _keys(res.stdout, "Parameters")
    assert {"M", "dtype", "repeat", "warmup", "device", "seed"} <= set(keys), keys
    assert "default preset: kimi-k2 on a CUDA host, tiny without CUDA" in res.stdout
