"""The built-in ``decode`` suite (agent bench ``decode``): greedy decoding of a randomly initialised MoE
transformer per concurrency — pure definitions, listed in ``builtin.BUILTIN_SUITES``.

The shapes of the ``kimi-k2`` preset are Kimi-K2's (moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3
architecture, hidden 7168, 64 MLA heads, q_lora 1536, kv_lora 512, qk 128 + 64 rope, v 128, dense MLP 18432,
384 routed experts top-8 + 1 shared, expert MLP 2048, vocab 163840, first layer dense) with 3 of its 61 layers:
in bf16 that is 37.0e9 parameters, 73.9 GB, leaving room on one H200 (141 GB) for the KV cache and the prefill
of 64 x 1024 tokens (~35 GB of expert activations in transformers' grouped_mm path).
"""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.suites.registry import Param, ParamValue, Plot, Preset, SuiteDef, run_params

CONCURRENCY = [1, 4, 16, 64]

KIMI_K2_SLICE: dict[str, ParamValue] = {
    "layers": 3,
    "dense_layers": 1,
    "hidden": 7168,
    "intermediate": 18432,
    "heads": 64,
    "experts": 384,
    "shared_experts": 1,
    "top_k": 8,
    "moe_intermediate": 2048,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_dim": 128,
    "qk_rope_dim": 64,
    "v_head_dim": 128,
    "vocab": 163840,
    "dtype": "bf16",
    "input_len": 1024,
    "output_len": 128,
    "concurrency": CONCURRENCY,
    "repeat": 3,
    "warmup": 1,
}

TINY: dict[str, ParamValue] = {
    "layers": 4,
    "dense_layers": 1,
    "hidden": 256,
    "intermediate": 512,
    "heads": 4,
    "experts": 16,
    "shared_experts": 1,
    "top_k": 4,
    "moe_intermediate": 128,
    "q_lora_rank": 96,
    "kv_lora_rank": 64,
    "qk_nope_dim": 32,
    "qk_rope_dim": 16,
    "v_head_dim": 32,
    "vocab": 1024,
    "dtype": "fp32",
    "input_len": 32,
    "output_len": 16,
    "concurrency": CONCURRENCY,
    "repeat": 5,
    "warmup": 1,
}


def _shape_ok(v: Mapping[str, ParamValue]) -> str | None:
    top_k, experts, dense, layers, rope = (
        v["top_k"],
        v["experts"],
        v["dense_layers"],
        v["layers"],
        v["qk_rope_dim"],
    )
    if isinstance(top_k, int) and isinstance(experts, int) and top_k > experts:
        return f"top_k={top_k} is larger than experts={experts}: each token picks top_k of the routed experts"
    if isinstance(dense, int) and isinstance(layers, int) and dense > layers:
        return f"dense_layers={dense} is larger than layers={layers}"
    if isinstance(rope, int) and rope % 2:
        return f"qk_rope_dim={rope} must be even (rotary dimensions come in pairs)"
    return None


def _int(name: str, default: int, text: str, low: int = 1) -> Param:
    return Param(name, "int", default, text, min=low)


DECODE = SuiteDef(
    name="decode",
    description=(
        "greedy decoding with a KV cache of a randomly initialised decoder-only MoE transformer "
        "(transformers DeepseekV3ForCausalLM built from a config in code, nothing downloaded; EOS ignored), "
        "one batch of C sequences per case; reports ttft_ms, tpot_ms (median, p10/p90) and tpot_p99_ms, "
        "e2e_ms, output_tokens_per_s and decode_tokens_per_s. Preset kimi-k2 (CUDA default): Kimi-K2's shapes "
        "with 3 of its 61 layers (1 dense + 2 MoE): hidden 7168, 64 MLA heads (q_lora 1536, kv_lora 512, "
        "qk 128+64 rope, v 128), dense MLP 18432, 384 routed experts top-8 + 1 shared, expert MLP 2048, vocab "
        "163840, bf16, 37.0e9 params = 73.9 GB; input 1024, output 128 tokens. Preset tiny (CPU default): "
        "4 layers (1 dense + 3 MoE), hidden 256, 4 heads (q_lora 96, kv_lora 64, qk 32+16, v 32), dense MLP "
        "512, 16 experts top-4 + 1 shared, expert MLP 128, vocab 1024, fp32, 6.4e6 params; input 32, output 16"
    ),
    bench="decode",
    params=(
        Param(
            "concurrency",
            "int-list",
            CONCURRENCY,
            "sequences decoded together (batch size C), one case each; A..B doubles from A to B",
            min=1,
            example="1,4,16,64",
        ),
        _int("input_len", 32, "prompt tokens per sequence"),
        _int("output_len", 16, "generated tokens per sequence (>= 2; EOS ignored)", low=2),
        _int("layers", 4, "decoder layers"),
        _int("dense_layers", 1, "leading layers with a dense MLP instead of MoE", low=0),
        _int("hidden", 256, "hidden size, elements"),
        _int("intermediate", 512, "dense MLP intermediate size, elements"),
        _int("heads", 4, "attention heads (MLA)"),
        _int("experts", 16, "routed experts per MoE layer"),
        _int("shared_experts", 1, "shared experts every token goes through"),
        _int("top_k", 4, "routed experts per token"),
        _int("moe_intermediate", 128, "expert MLP intermediate size, elements"),
        _int("q_lora_rank", 96, "MLA query low-rank dimension"),
        _int("kv_lora_rank", 64, "MLA key/value latent dimension"),
        _int("qk_nope_dim", 32, "per-head query/key dimension without rotary embedding"),
        _int("qk_rope_dim", 16, "per-head rotary query/key dimension (even)"),
        _int("v_head_dim", 32, "per-head value dimension"),
        _int("vocab", 1024, "vocabulary size (embedding and LM head rows)"),
        Param("dtype", "str", "fp32", "weight and activation dtype", ("bf16", "fp16", "fp32")),
        Param(
            "experts_impl",
            "str",
            "auto",
            "transformers experts implementation; auto = transformers' choice (grouped_mm where it dispatches)",
            ("auto", "eager", "grouped_mm", "batched_mm"),
        ),
        *run_params(repeat=5, warmup=1),
    ),
    presets=(
        Preset(
            "kimi-k2",
            "Kimi-K2 shapes, 3 of 61 layers (1 dense + 2 MoE), bf16, 73.9 GB of weights: fits one H200; "
            "C=1,4,16,64, input 1024, output 128, 3 repeats",
            KIMI_K2_SLICE,
        ),
        Preset(
            "tiny",
            "6.4e6-parameter model for CPUs and tests (seconds): 4 layers, hidden 256, 16 experts top-4 + 1 "
            "shared, fp32; C=1,4,16,64, input 32, output 16, 5 repeats",
            TINY,
        ),
    ),
    sweep="concurrency",
    default_preset_cuda="kimi-k2",
    default_preset_cpu="tiny",
    checks=(_shape_ok,),
    plots=(Plot("output_tokens_per_s"), Plot("tpot_ms"), Plot("ttft_ms"), Plot("e2e_ms")),
)
