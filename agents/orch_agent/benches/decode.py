"""Decode: greedy generation from a randomly initialised decoder-only MoE transformer, timed per concurrency C.

The model is transformers' ``DeepseekV3ForCausalLM`` (the DeepSeek-V3 architecture, which Kimi-K2 also uses:
MLA attention with low-rank q and kv projections, ``dense_layers`` dense SwiGLU layers first, then MoE layers of
``experts`` routed SwiGLU experts, top-``top_k`` sigmoid routing with one group, plus ``shared_experts`` always-on
experts), built with ``AutoModelForCausalLM.from_config`` from a config made in code — nothing is downloaded —
directly on the device, with transformers' own random initialisation (normal, std 0.02), as engines'
dummy-weight load formats do for benchmarking. Attention is SDPA; the experts run through transformers' experts
implementation (``experts_impl``: ``auto`` = transformers' choice, grouped_mm where it dispatches).

Case params (all positive integers unless said): ``concurrency`` C (sequences decoded together, one batch),
``input_len`` prompt tokens per sequence, ``output_len`` (>= 2) generated tokens per sequence, ``layers``,
``dense_layers`` (>= 0, <= layers), ``hidden``, ``intermediate`` (dense MLP), ``heads``, ``experts``,
``shared_experts``, ``top_k``, ``moe_intermediate``, ``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_dim``,
``qk_rope_dim`` (even), ``v_head_dim``, ``vocab``; ``dtype`` ``bf16|fp16|fp32``; ``experts_impl``
``auto|eager|grouped_mm|batched_mm``.

One generation: prompts of uniform random token ids (seeded, no padding), a prefill of the whole batch that
fills a ``DynamicCache`` and yields the first token (logits of the last position only), then ``output_len - 1``
decode steps each feeding the previous greedy (argmax) token of every sequence. End-of-sequence is ignored: the
loop always runs ``output_len`` tokens, so every generation yields exactly C x output_len tokens.
``warmup`` untimed generations, then ``repeat`` timed ones. CUDA: CUDA events recorded on the stream before
the prefill and after each token's argmax, one synchronize at the end of the generation (wall time of each step
as the GPU sees it, host stalls included); CPU: time.perf_counter around each step.

Metrics (ms, tokens per second):

- ``ttft_ms``: time to first token = prefill of the batch plus the first argmax, one sample per repeat.
- ``tpot_ms``: time per output token after the first = each decode step's latency, every step of every repeat.
  In lock-step batched decoding every sequence gets one token per step, so the inter-token latency (ITL) of
  any sequence is the same per-step latency: no separate ``itl_ms``.
- ``tpot_p99_ms``: the 99th percentile of those steps.
- ``e2e_ms``: prefill plus all decode steps, one per repeat.
- ``output_tokens_per_s``: C x output_len / e2e, one per repeat (vLLM's ``output_throughput`` convention).
- ``decode_tokens_per_s``: C x (output_len - 1) / (e2e - ttft), one per repeat (decode only, as SGLang's
  ``median_decode_throughput``).

The model is built once per (shape, dtype, device, seed, experts_impl) and kept for the following cases; on
CUDA free memory is checked first against the weight bytes (counted on a meta-device build) plus an estimate
of the KV cache and the prefill's activations.
"""

from __future__ import annotations

import collections
import gc
import inspect
import time
from typing import Any

from ..stats import percentile, summarize
from ._torch import GiB, check_cuda_room, device_name, import_torch, resolve_device

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp32": 4}
EXPERTS_IMPLS = ("auto", "eager", "grouped_mm", "batched_mm")
HEADROOM_BYTES = 2 * GiB
ROUTED_SCALING_FACTOR = 2.827  # Kimi-K2's config.json; scales the routed experts' sum, no effect on cost
ARCHITECTURE = "DeepseekV3ForCausalLM"

# case key -> transformers DeepseekV3Config field
SHAPE = (
    ("layers", "num_hidden_layers"),
    ("hidden", "hidden_size"),
    ("intermediate", "intermediate_size"),
    ("heads", "num_attention_heads"),
    ("experts", "n_routed_experts"),
    ("shared_experts", "n_shared_experts"),
    ("top_k", "num_experts_per_tok"),
    ("moe_intermediate", "moe_intermediate_size"),
    ("q_lora_rank", "q_lora_rank"),
    ("kv_lora_rank", "kv_lora_rank"),
    ("qk_nope_dim", "qk_nope_head_dim"),
    ("qk_rope_dim", "qk_rope_head_dim"),
    ("v_head_dim", "v_head_dim"),
    ("vocab", "vocab_size"),
)
_RUN = ("concurrency", "input_len", "output_len")


def import_transformers() -> Any:
    """``import transformers``; a RuntimeError naming the package and the interpreter when it is missing."""
    try:
        import transformers
    except ImportError as exc:
        import sys

        raise RuntimeError(
            f"decode needs the 'transformers' package, which {sys.executable} cannot import ({exc}); "
            f"install it there ({sys.executable} -m pip install transformers) or set `python:` in the inventory "
            "to an interpreter that has torch and transformers"
        ) from exc
    return transformers


def _params(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The case's shape and lengths, checked. Every one is required, as for moe_gemm: the suite registry
    (orchestrator/suites/builtin_decode.py) is the one place presets such as ``tiny`` are defined."""
    p: dict[str, Any] = {}
    for name in _RUN + tuple(k for k, _ in SHAPE) + ("dense_layers",):
        v = case.get(name)
        low = 0 if name == "dense_layers" else 2 if name == "output_len" else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"decode: case param {name!r} must be an integer >= {low}, got {v!r}")
        p[name] = v
    if p["top_k"] > p["experts"]:
        raise ValueError(f"decode: top_k={p['top_k']} exceeds experts={p['experts']}")
    if p["dense_layers"] > p["layers"]:
        raise ValueError(f"decode: dense_layers={p['dense_layers']} exceeds layers={p['layers']}")
    if p["qk_rope_dim"] % 2:
        raise ValueError(f"decode: qk_rope_dim must be even (rotary pairs), got {p['qk_rope_dim']}")
    p["dtype"] = case.get("dtype", "bf16")
    if p["dtype"] not in DTYPES:
        raise ValueError(f"decode: dtype must be one of {', '.join(DTYPES)}, got {p['dtype']!r}")
    p["experts_impl"] = case.get("experts_impl", "auto")
    if p["experts_impl"] not in EXPERTS_IMPLS:
        raise ValueError(f"decode: experts_impl must be one of {', '.join(EXPERTS_IMPLS)}, got {p['experts_impl']!r}")
    return p


def _config(transformers: Any, p: dict[str, Any]) -> Any:
    kw = {field: p[key] for key, field in SHAPE}
    return transformers.DeepseekV3Config(
        num_key_value_heads=p["heads"],
        first_k_dense_replace=p["dense_layers"],
        n_group=1,
        topk_group=1,
        norm_topk_prob=True,
        routed_scaling_factor=ROUTED_SCALING_FACTOR,
        max_position_embeddings=max(4096, p["input_len"] + p["output_len"]),
        tie_word_embeddings=False,
        **kw,
    )


def shape_text(p: dict[str, Any]) -> str:
    """One line naming the model shape, e.g. for the result's info."""
    moe = p["layers"] - p["dense_layers"]
    return (
        f"{ARCHITECTURE}: {p['layers']} layers ({p['dense_layers']} dense, {moe} MoE), hidden {p['hidden']}, "
        f"MLA {p['heads']} heads (q_lora {p['q_lora_rank']}, kv_lora {p['kv_lora_rank']}, qk {p['qk_nope_dim']}"
        f"+{p['qk_rope_dim']} rope, v {p['v_head_dim']}), dense MLP {p['intermediate']}, {p['experts']} routed "
        f"experts top-{p['top_k']} + {p['shared_experts']} shared, expert MLP {p['moe_intermediate']}, "
        f"vocab {p['vocab']}, {p['dtype']}"
    )


def _activation_bytes(p: dict[str, Any], bpe: int) -> int:
    """Upper estimate of the bytes a case needs beyond the weights: the KV cache and the prefill's peak.

    KV cache: expanded K and V per layer (heads x (qk_nope + qk_rope + v) per token), the larger of the layouts
    transformers versions keep (newer ones cache the compressed latent and expand it per step, which needs the
    same transient room). Prefill, one layer at a time: the experts' gathered rows, gate/up, gated, down and
    weighted outputs for C x input_len x top_k token-expert pairs, and attention's Q, K, V and output.
    """
    C, T = p["concurrency"], p["concurrency"] * p["input_len"]
    qk = p["qk_nope_dim"] + p["qk_rope_dim"]
    kv = C * (p["input_len"] + p["output_len"]) * p["layers"] * p["heads"] * (qk + p["v_head_dim"]) * bpe
    moe = T * p["top_k"] * (4 * p["hidden"] + 3 * p["moe_intermediate"]) * bpe
    attn = T * p["heads"] * (3 * qk + 2 * p["v_head_dim"]) * bpe
    hidden = 6 * T * max(p["hidden"], p["intermediate"]) * bpe
    return int(kv + max(moe, attn) + hidden)


def _model(torch: Any, transformers: Any, ctx: Any, p: dict[str, Any], device: str) -> dict[str, Any]:
    """The model for this case's shape, built on ``device`` or reused from an earlier case of the run."""
    key = tuple(p[k] for k, _ in SHAPE) + (p["dense_layers"], p["dtype"], p["experts_impl"], device, ctx.seed)
    cached = ctx.state.get("decode_model")
    if cached is not None and cached["key"] == key:
        return dict(cached, reused=True)
    if cached is not None:
        ctx.state.pop("decode_model")
        del cached
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    dtype = getattr(torch, DTYPES[p["dtype"]])
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": "sdpa"}
    if p["experts_impl"] != "auto":
        kwargs["experts_implementation"] = p["experts_impl"]
    auto = transformers.AutoModelForCausalLM
    with torch.device("meta"):
        meta = auto.from_config(_config(transformers, p), **kwargs)
    n_params = sum(int(t.numel()) for t in meta.parameters())
    weight_bytes = sum(int(t.numel()) * t.element_size() for t in list(meta.parameters()) + list(meta.buffers()))
    del meta
    if device == "cuda":
        need = weight_bytes + _activation_bytes(p, BYTES_PER_ELEMENT[p["dtype"]]) + HEADROOM_BYTES
        check_cuda_room(
            torch,
            need,
            f"decode model ({weight_bytes / 1e9:.1f} GB of weights) + KV cache and prefill activations at "
            f"C={p['concurrency']}, input_len={p['input_len']} + headroom",
        )
    torch.manual_seed(ctx.seed)  # transformers' init draws from the global generators (CPU and CUDA)
    t0 = time.perf_counter()
    with torch.device(device):
        model = auto.from_config(_config(transformers, p), **kwargs)
    model.eval()
    if device == "cuda":
        torch.cuda.synchronize()
    built = {
        "key": key,
        "model": model,
        "params": n_params,
        "weight_bytes": weight_bytes,
        "build_s": round(time.perf_counter() - t0, 3),
        "cache_kw": "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values",
    }
    ctx.state["decode_model"] = built
    return dict(built, reused=False)


def _new_cache(transformers: Any, model: Any) -> Any:
    try:
        return transformers.DynamicCache(config=model.config)
    except TypeError:  # transformers before 4.56 takes no config
        return transformers.DynamicCache()


def _generate(
    torch: Any, transformers: Any, m: dict[str, Any], ids: Any, output_len: int, cuda: bool
) -> tuple[list[float], Any]:
    """One greedy generation. Returns the times of ``output_len + 1`` marks in ms from the first (mark 0 =
    before the prefill, mark i = after token i's argmax) and the tokens ``[C, output_len]``."""
    model, cache = m["model"], _new_cache(transformers, m["model"])
    kw = {m["cache_kw"]: cache, "use_cache": True, "logits_to_keep": 1}
    tokens = []
    if cuda:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(output_len + 1)]
        events[0].record()
    else:
        marks = [time.perf_counter()]
    step_in = ids
    for i in range(output_len):
        logits = model(input_ids=step_in, **kw).logits
        step_in = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        tokens.append(step_in)
        if cuda:
            events[i + 1].record()
        else:
            marks.append(time.perf_counter())
    if cuda:
        torch.cuda.synchronize()
        times = [0.0] + [float(events[0].elapsed_time(e)) for e in events[1:]]
    else:
        times = [(t - marks[0]) * 1e3 for t in marks]
    return times, torch.cat(tokens, dim=1)


def _router_probe(model: Any, n_moe: int) -> tuple[collections.deque, list]:
    """Forward hooks on the MoE routers keeping the expert indices of the last ``n_moe`` router calls (the last
    decode step's MoE layers); returns (the kept index tensors, the hook handles)."""
    kept: collections.deque = collections.deque(maxlen=max(1, n_moe))

    def hook(_mod: Any, _inp: Any, out: Any) -> None:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for t in outs:
            if hasattr(t, "dtype") and not t.dtype.is_floating_point:
                kept.append(t)
                return

    handles = [mod.register_forward_hook(hook) for mod in model.modules() if type(mod).__name__.endswith("Router")]
    return kept, handles


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    torch = import_torch()
    p = _params(case, ctx)
    transformers = import_transformers()
    device = resolve_device(torch, ctx.device)
    cuda = device == "cuda"
    C, n_in, n_out = p["concurrency"], p["input_len"], p["output_len"]
    m = _model(torch, transformers, ctx, p, device)
    if cuda and m["reused"]:
        check_cuda_room(
            torch,
            _activation_bytes(p, BYTES_PER_ELEMENT[p["dtype"]]) + HEADROOM_BYTES,
            f"decode KV cache and prefill activations at C={C}, input_len={n_in} + headroom",
        )
    gen = torch.Generator(device="cpu").manual_seed(ctx.seed + 1)
    ids = torch.randint(0, p["vocab"], (C, n_in), generator=gen).to(device)
    n_moe = p["layers"] - p["dense_layers"]

    distinct = None
    with torch.inference_mode():
        for w in range(ctx.warmup):
            probe = _router_probe(m["model"], n_moe) if w == ctx.warmup - 1 else None
            try:
                _generate(torch, transformers, m, ids, n_out, cuda)
            finally:
                for h in probe[1] if probe else ():
                    h.remove()
            if probe and len(probe[0]) == n_moe:
                distinct = [int(torch.unique(t.reshape(-1)).numel()) for t in probe[0]]
        runs = [_generate(torch, transformers, m, ids, n_out, cuda) for _ in range(ctx.repeat)]

    ttft, steps, e2e, out_tps, dec_tps = [], [], [], [], []
    for times, toks in runs:
        if tuple(toks.shape) != (C, n_out):
            raise RuntimeError(f"decode: generated tokens of shape {tuple(toks.shape)}, expected {(C, n_out)}")
        ttft.append(times[1])
        steps.extend(b - a for a, b in zip(times[1:-1], times[2:]))  # noqa: B905 - 3.8 has no strict=
        e2e.append(times[-1])
        out_tps.append(C * n_out / (times[-1] / 1e3))
        dec_tps.append(C * (n_out - 1) / ((times[-1] - times[1]) / 1e3))
    first = runs[0][1]
    repeatable = all(bool(torch.equal(first, toks)) for _, toks in runs[1:])
    tpot = summarize(steps, "ms")
    info: dict[str, Any] = {
        "device": device,
        "device_name": device_name(torch, device),
        "dtype": p["dtype"],
        "torch": str(torch.__version__),
        "transformers": str(transformers.__version__),
        "model": shape_text(p),
        "architecture": ARCHITECTURE,
        "params": m["params"],
        "weight_bytes": m["weight_bytes"],
        "weights": "random (transformers' init: normal std 0.02), built with from_config on the device, seed "
        f"{ctx.seed}; nothing downloaded",
        "model_build_s": None if m["reused"] else m["build_s"],
        "attn_implementation": str(getattr(m["model"].config, "_attn_implementation", "sdpa")),
        "experts_implementation": str(getattr(m["model"].config, "_experts_implementation", p["experts_impl"])),
        "kv_cache": "transformers DynamicCache",
        "decoding": f"greedy (argmax), EOS ignored: exactly {n_out} tokens per sequence, batch of {C}",
        "input": f"{C} x {n_in} uniform random token ids (seed {ctx.seed + 1}), no padding",
        "output_tokens": C * n_out,
        "tokens_repeatable": repeatable,
        "itl": "equal to tpot: lock-step batched decoding gives every sequence one token per step",
        "timing": (
            "CUDA events on the stream before the prefill and after each token's argmax, one synchronize per generation"
            if cuda
            else "time.perf_counter before the prefill and after each token's argmax"
        )
        + f"; {ctx.warmup} warm-up generation(s), {ctx.repeat} timed",
        "warmup": ctx.warmup,
    }
    if distinct is not None:
        info["distinct_experts_last_step"] = distinct
        info["distinct_experts_note"] = (
            f"routed experts chosen by the {C} tokens of the last warm-up decode step, per MoE layer"
        )
    return {
        "metrics": {
            "ttft_ms": summarize(ttft, "ms"),
            "tpot_ms": tpot,
            "tpot_p99_ms": {"value": round(percentile(sorted(steps), 99), 6), "unit": "ms"},
            "e2e_ms": summarize(e2e, "ms"),
            "output_tokens_per_s": summarize(out_tps, "tok/s"),
            "decode_tokens_per_s": summarize(dec_tps, "tok/s"),
        },
        "info": info,
    }
