"""The decode bench on the CPU with the tiny preset's model, and the decode suite's definition."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent.benches import BENCHES, Context, load
from orchestrator.analysis.enrich import enrich_result
from orchestrator.errors import SuiteError
from orchestrator.protocol import parse_metric
from orchestrator.suites.registry import get_suite, resolve

DECODE_SRC = Path(__file__).resolve().parents[2] / "agents" / "orch_agent" / "benches" / "decode.py"
METRICS = ("ttft_ms", "tpot_ms", "tpot_p99_ms", "e2e_ms", "output_tokens_per_s", "decode_tokens_per_s")


def ctx(**kw: Any) -> Context:
    return Context(**{"repeat": 2, "warmup": 1, "device": "cpu", "seed": 0, **kw})


def tiny_cases(concurrency: str = "1,4") -> list[dict[str, Any]]:
    spec = resolve("decode", {"concurrency": concurrency}, cuda=False, run_id="t")
    return [dict(c) for c in spec["cases"]]


def test_suite_presets_sweep_concurrency_and_pick_by_device() -> None:
    cpu = resolve("decode", {}, cuda=False, run_id="r")
    assert cpu["preset"] == "tiny" and cpu["bench"] == "decode" and cpu["device"] == "cpu"
    assert [c["concurrency"] for c in cpu["cases"]] == [1, 4, 16, 64]
    assert cpu["cases"][0]["dtype"] == "fp32" and cpu["cases"][0]["hidden"] == 256
    assert (cpu["repeat"], cpu["warmup"]) == (5, 1)
    gpu = resolve("decode", {"concurrency": "1..8"}, cuda=True, run_id="r")
    assert gpu["preset"] == "kimi-k2" and gpu["device"] == "cuda"
    assert [c["concurrency"] for c in gpu["cases"]] == [1, 2, 4, 8]
    case = gpu["cases"][0]
    assert (case["hidden"], case["experts"], case["top_k"], case["layers"], case["dtype"]) == (7168, 384, 8, 3, "bf16")
    assert "3 of its 61 layers" in get_suite("decode").description
    with pytest.raises(SuiteError, match="top_k=9 is larger than experts=8"):
        resolve("decode", {"experts": "8", "top_k": "9"}, cuda=False, run_id="r")
    with pytest.raises(SuiteError, match="output_len must be >= 2"):
        resolve("decode", {"output_len": "1"}, cuda=False, run_id="r")


def test_agent_source_parses_as_python_3_8() -> None:
    assert "decode" in BENCHES
    ast.parse(DECODE_SRC.read_text(), feature_version=(3, 8))


def test_enrich_passes_decode_metrics_through() -> None:
    metrics = {"output_tokens_per_s": parse_metric("output_tokens_per_s", {"value": 12.5, "unit": "tok/s"})}
    assert enrich_result("decode", {"concurrency": 4}, metrics, None) == metrics


@pytest.mark.torch
def test_decode_tiny_on_cpu_reports_ttft_tpot_and_tokens_per_s() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    c = ctx()
    c1, c4 = tiny_cases()
    bench = load("decode")
    one = bench(c1, c)
    model = c.state["decode_model"]["model"]
    four = bench(c4, c)
    assert c.state["decode_model"]["model"] is model  # built once per run, reused by the next concurrency
    for out, C in ((one, 1), (four, 4)):
        metrics, info = out["metrics"], out["info"]
        assert set(metrics) == set(METRICS)
        parsed = {name: parse_metric(name, m) for name, m in metrics.items()}
        assert all(m.value > 0 for m in parsed.values())
        assert parsed["ttft_ms"].unit == "ms" and parsed["ttft_ms"].n == 2
        # every decode step of every repeat: repeat x (output_len - 1) = 2 x 15
        assert parsed["tpot_ms"].n == 30 and parsed["tpot_ms"].samples is not None
        assert parsed["tpot_p99_ms"].value >= parsed["tpot_ms"].value
        assert parsed["output_tokens_per_s"].unit == "tok/s"
        # C x output_len tokens per generation, e2e = ttft + the decode steps
        e2e, ttft = parsed["e2e_ms"].samples, parsed["ttft_ms"].samples
        assert e2e is not None and ttft is not None
        for tps, ms in zip(parsed["output_tokens_per_s"].samples or [], e2e, strict=True):
            assert tps == pytest.approx(C * 16 / (ms / 1e3), rel=1e-4)
        assert all(t < e for t, e in zip(ttft, e2e, strict=True))
        assert info["output_tokens"] == C * 16 and info["tokens_repeatable"] is True
        assert info["device"] == "cpu" and info["architecture"] == "DeepseekV3ForCausalLM"
        assert info["params"] == 6_396_800 and "16 routed experts top-4 + 1 shared" in info["model"]
        assert len(info["distinct_experts_last_step"]) == 3  # one per MoE layer
        assert all(4 <= d <= min(16, 4 * C) for d in info["distinct_experts_last_step"])
    assert one["info"]["model_build_s"] is not None and four["info"]["model_build_s"] is None


@pytest.mark.torch
def test_decode_model_and_tokens_are_deterministic_for_a_seed() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from agents.orch_agent.benches import decode

    case = dict(tiny_cases("2")[0], output_len=5)
    runs = []
    for _ in range(2):
        c = ctx(repeat=1, warmup=0)
        load("decode")(case, c)
        m = c.state["decode_model"]
        ids = torch.randint(0, 1024, (2, 32), generator=torch.Generator().manual_seed(1))
        with torch.inference_mode():
            _, toks = decode._generate(torch, transformers, m, ids, 5, False)
        runs.append(toks)
    assert runs[0].shape == (2, 5) and torch.equal(runs[0], runs[1])


@pytest.mark.torch
def test_decode_rejects_bad_params_and_names_missing_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    base = tiny_cases("1")[0]
    with pytest.raises(ValueError, match="'output_len' must be an integer >= 2"):
        load("decode")(dict(base, output_len=1), ctx())
    with pytest.raises(ValueError, match="top_k=17 exceeds experts=16"):
        load("decode")(dict(base, top_k=17), ctx())
    with pytest.raises(ValueError, match="'concurrency'"):
        load("decode")({k: v for k, v in base.items() if k != "concurrency"}, ctx())
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` raises ImportError
    with pytest.raises(RuntimeError, match="decode needs the 'transformers' package.*pip install transformers"):
        load("decode")(dict(base), ctx())
