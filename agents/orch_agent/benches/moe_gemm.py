"""MoE expert layer: routed top-k experts plus shared experts, SiLU-gated MLP, timed per batch size M.

Case params: ``M`` tokens, ``E`` routed experts, ``H`` hidden size, ``I`` expert intermediate size, ``k``
experts per token, ``shared`` experts every token also goes through (default 0), ``dtype``
``bf16|fp16|fp32|fp8|int4|int4-g128`` (default bf16), ``seed`` routing seed (default the run's), ``impl``
``auto|grouped_mm|loop`` (default auto),
``ep`` GPUs to shard the routed experts over (default 1; otherwise ``moe_ep`` runs it: one process per GPU, each
holding E/ep experts; 0 = every GPU of the host).

The layer, per expert g (routed 0..E-1, shared E..E+shared-1): ``W13[g]`` ``[2I, H]`` (gate rows 0..I-1, up
rows I..2I-1) and ``W2[g]`` ``[H, I]``; ``y = W2 @ (silu(gate) * up)``; the token's output is the
routing-weighted sum over its k routed experts (softmax of the top-k logits) plus its shared experts (weight
1).

Routing (outside the timed region): iid normal logits from ``torch.Generator().manual_seed(seed)``, top-k — a
uniformly random k-subset per token. Token-expert pairs are sorted by expert once; the timed call gathers the
tokens, runs ``torch._grouped_mm`` over the sorted rows with per-expert offsets (or a loop over the touched
experts), and combines the k+shared outputs per token with one batched matmul (routing weights x outputs).
(A bf16 ``index_add_`` scatter instead measured 9% slower at M=4096 on an H200: atomics on the output rows.)

CUDA: weights are built once per (E+shared, H, I, dtype) and kept for the following cases; free memory is
checked first. The call is captured in a CUDA graph and replayed: ``warmup`` replays, then ``repeat`` samples,
each one replay between CUDA events divided by the calls it holds. When the weights one call touches are not
much larger than L2, the graph holds one call per weight copy, enough copies to exceed 2x L2, so every call
streams its weights from memory. CPU: the same math, eager, timed with time.perf_counter.

Quantized weights (``moe_quant`` describes the formats): ``fp8`` = e4m3 weights with row-wise fp32 scales and
e4m3 activations quantized per token inside the timed call, run by ``torch._scaled_grouped_mm`` (impl
``scaled_grouped_mm``); ``int4`` = W4A16 with bf16 scales per 32 inputs (``int4-g128``: per 128), bf16
activations, run by a grouped Triton kernel that dequantizes in registers (impl ``triton_w4a16_grouped``, one
launch per GEMM for all experts). Without those kernels (the CPU, or ``impl=loop``) a per-expert loop
dequantizes each touched expert inside the call (impl ``loop_dequant``: correct numbers, not a deployed
kernel). The result's ``expert_bytes`` metric is one expert's weight bytes *including the scales*; the
byte accounting is stated in ``info.byte_accounting``.

The first case of a run is checked against a plain fp32 reference (per token, loop over its experts, weights
dequantized to fp32 exactly as the kernel sees them, activations unquantized) on its first tokens, against
``TOLERANCE`` (max abs error / max |reference|); a failed check raises, which the worker reports as an error
event.
"""

from __future__ import annotations

import gc
import math
from typing import Any

from ..stats import summarize
from . import moe_quant as mq
from ._torch import GiB, check_cuda_room, device_name, import_torch, resolve_device, time_cpu, time_cuda

# Activation dtype of each weight dtype (quantized weights run with bf16 activations).
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16", "int4": "bfloat16",
          "int4-g128": "bfloat16"}  # fmt: skip
QUANT_GROUP = {"int4": 32, "int4-g128": 128}
BYTES_PER_WEIGHT = {"bf16": 2, "fp16": 2, "fp32": 4}
IMPLS = ("auto", "grouped_mm", "loop")
# Error of the layer output relative to max |reference|: bf16 keeps 8 mantissa bits (2^-8 ~ 0.4% per rounding,
# several roundings along the layer), fp16 11 bits; fp32 is exact up to summation order. The quantized formats
# are checked against their own dequantized weights, so their error is the bf16 arithmetic (int4) plus, for
# fp8, the e4m3 activations (3 mantissa bits: up to 2^-4 relative per element, averaging out over K).
TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-3, "fp8": 8e-2, "int4": 3e-2, "int4-g128": 3e-2}
QUANT_CHUNK = 16  # experts generated and quantized at a time (bounds the fp32 temporaries)
FMA_MAX_ROWS = 16  # int4: also try the CUDA-core kernel when no expert gets more rows than this
FMA_BLOCK_M = 4  # its rows per tile (a [BLOCK_M, GROUP, BLOCK_N] fp32 product must fit in registers)
GEMV_MAX_ROWS = 4  # int4: also try the one-row-per-program kernel when no expert gets more rows than this
PICK_CALLS = 5  # eager calls timed per int4 kernel variant when choosing
CHECK_TOKENS = 8
HEADROOM_BYTES = 2 * GiB
STREAM_FACTOR = 4  # "much larger than L2": at least this many times the L2 size per call
MAX_WEIGHT_COPIES = 512
ROTATION_MEMORY_FRACTION = 0.5  # weight copies for L2 rotation may take at most this share of free memory

_INT_PARAMS = ("M", "E", "H", "I", "k")


def _params(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    p: dict[str, Any] = {}
    for name in _INT_PARAMS:
        v = case.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"moe_gemm: case param {name!r} must be a positive integer, got {v!r}")
        p[name] = v
    shared = case.get("shared", 0)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise ValueError(f"moe_gemm: 'shared' must be an integer >= 0, got {shared!r}")
    p["shared"] = shared
    if p["k"] > p["E"]:
        raise ValueError(f"moe_gemm: k={p['k']} exceeds E={p['E']}")
    p["dtype"] = case.get("dtype", "bf16")
    if p["dtype"] not in DTYPES:
        raise ValueError(f"moe_gemm: dtype must be one of {', '.join(DTYPES)}, got {p['dtype']!r}")
    p["impl"] = case.get("impl", "auto")
    if p["impl"] not in IMPLS:
        raise ValueError(f"moe_gemm: impl must be one of {', '.join(IMPLS)}, got {p['impl']!r}")
    seed = case.get("seed", ctx.seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"moe_gemm: seed must be an integer, got {seed!r}")
    p["seed"] = seed
    ep = case.get("ep", 1)
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 0:
        raise ValueError(f"moe_gemm: ep must be an integer >= 0 (0 = every GPU), got {ep!r}")
    if ep and p["E"] % ep:
        raise ValueError(f"moe_gemm: E={p['E']} routed experts do not split evenly over ep={ep} GPUs")
    p["ep"] = ep
    if ep != 1 and p["dtype"] not in BYTES_PER_WEIGHT:
        raise ValueError(f"moe_gemm: dtype={p['dtype']} runs on one GPU only (ep=1); expert parallel is bf16/fp16/fp32")
    return p


def route(torch: Any, M: int, E: int, k: int, shared: int, seed: int) -> dict[str, Any]:
    """Routing on the CPU (deterministic for a seed on any device).

    Returns ``experts`` [M, k+shared] (shared ids E..E+shared-1 last), ``weights`` [M, k+shared] fp32,
    ``order`` (pairs sorted by expert, stable), ``counts`` [E+shared], ``distinct`` (routed experts touched +
    shared).
    """
    g = torch.Generator(device="cpu").manual_seed(seed)
    logits = torch.randn(M, E, generator=g)
    top_v, top_i = logits.topk(k, dim=1)
    w = torch.softmax(top_v, dim=1)
    if shared:
        top_i = torch.cat([top_i, torch.arange(E, E + shared).expand(M, shared)], dim=1)
        w = torch.cat([w, torch.ones(M, shared)], dim=1)
    flat = top_i.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E + shared)
    distinct = int(torch.unique(top_i[:, :k]).numel()) + shared
    return {"experts": top_i, "weights": w, "order": order, "counts": counts, "distinct": distinct}


def _grouped_mm_usable(torch: Any, device: str, dtype: Any) -> str | None:
    """None when torch._grouped_mm runs here for this dtype, else the reason it cannot be used."""
    if not hasattr(torch, "_grouped_mm"):
        return f"torch {torch.__version__} has no torch._grouped_mm"
    if dtype != torch.bfloat16:
        return "torch._grouped_mm supports bf16 only"
    if device == "cuda":
        cap = torch.cuda.get_device_capability()
        if cap < (9, 0):
            return f"torch._grouped_mm needs sm90+, this GPU is sm{cap[0]}{cap[1]}"
    try:
        a = torch.randn(32, 64, device=device, dtype=dtype)
        b = torch.randn(2, 128, 64, device=device, dtype=dtype)
        offs = torch.tensor([16, 32], device=device, dtype=torch.int32)
        torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:
        return f"torch._grouped_mm failed here: {type(exc).__name__}: {exc}"
    return None


def _scaled_grouped_mm_usable(torch: Any, device: str) -> str | None:
    """None when torch._scaled_grouped_mm (fp8 e4m3, row-wise scales) runs here, else the reason."""
    if not hasattr(torch, "_scaled_grouped_mm"):
        return f"torch {torch.__version__} has no torch._scaled_grouped_mm"
    if device != "cuda":
        return "torch._scaled_grouped_mm runs on CUDA only"
    cap = torch.cuda.get_device_capability()
    if cap < (9, 0):
        return f"torch._scaled_grouped_mm needs sm90+, this GPU is sm{cap[0]}{cap[1]}"
    try:
        a, sa = mq.quantize_rows_fp8(torch, torch.randn(32, 64, device=device))
        b, sb = mq.quantize_fp8(torch, torch.randn(2, 128, 64, device=device))
        offs = torch.tensor([16, 32], device=device, dtype=torch.int32)
        torch._scaled_grouped_mm(a, b.transpose(-2, -1), sa, sb, offs=offs, out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
    except Exception as exc:
        return f"torch._scaled_grouped_mm failed here: {type(exc).__name__}: {exc}"
    return None


def expert_bytes(dtype: str, H: int, inter: int) -> tuple[int, str]:
    """Bytes of one expert's weights (W13 [2I, H] and W2 [H, I]) including scales, and how they were counted."""
    n = 3 * H * inter
    if dtype in QUANT_GROUP:
        g = QUANT_GROUP[dtype]
        scales = (2 * inter * H + H * inter) // g
        return n // 2 + 2 * scales, (
            f"int4: 0.5 B per weight + one bf16 scale per {g} weights = {mq.int4_bytes_per_weight(g)} B/weight; "
            f"per expert 3·H·I/2 + 2·3·H·I/{g} = {n // 2 + 2 * scales} B"
        )
    if dtype == "fp8":
        scales = 2 * inter + H
        return n + 4 * scales, (
            "fp8 e4m3: 1 B per weight + one fp32 scale per output row (2I rows of W13, H rows of W2); "
            f"per expert 3·H·I + 4·(2I + H) = {n + 4 * scales} B"
        )
    bpw = BYTES_PER_WEIGHT[dtype]
    return n * bpw, f"{dtype}: {bpw} B per weight, no scales; per expert 3·H·I·{bpw} = {n * bpw} B"


def _quantize(torch: Any, fmt: str, w: Any) -> tuple[Any, Any]:
    if fmt == "fp8":
        return mq.quantize_fp8(torch, w)
    packed, scale, _ = mq.quantize_int4(torch, w, QUANT_GROUP[fmt])
    return packed, scale


def _weights(torch: Any, ctx: Any, key: tuple, fmt: str, G: int, H: int, inter: int, device: str, copies: int) -> list:
    """``copies`` weight sets, cached in ctx.state for later cases. A set is a dict: ``w13`` [G, 2I, H] and
    ``w2`` [G, H, I] (plain dtypes); quantized: ``w13``/``w2`` the packed or e4m3 weights and ``w13_s``/``w2_s``
    their scales. Weights are iid normal / sqrt(fan-in), generated (and quantized) QUANT_CHUNK experts at a
    time from one seeded generator."""
    cache = ctx.state.get("moe_weights")
    if cache is not None and cache["key"] != key:
        ctx.state.pop("moe_weights")
        del cache
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        cache = None
    if cache is None:
        gen = torch.Generator(device=device).manual_seed(key[-1])
        if fmt in ("bf16", "fp16", "fp32"):
            dtype = getattr(torch, DTYPES[fmt])
            w13 = torch.randn(G, 2 * inter, H, device=device, dtype=dtype, generator=gen).mul_(1.0 / math.sqrt(H))
            w2 = torch.randn(G, H, inter, device=device, dtype=dtype, generator=gen).mul_(1.0 / math.sqrt(inter))
            first = {"w13": w13, "w2": w2}
        else:
            parts: dict[str, list] = {"w13": [], "w13_s": [], "w2": [], "w2_s": []}
            for g0 in range(0, G, QUANT_CHUNK):
                n = min(QUANT_CHUNK, G - g0)
                for name, shape, fan_in in (("w13", (n, 2 * inter, H), H), ("w2", (n, H, inter), inter)):
                    w = torch.randn(*shape, device=device, dtype=torch.bfloat16, generator=gen)
                    q, sc = _quantize(torch, fmt, w.mul_(1.0 / math.sqrt(fan_in)))
                    parts[name].append(q)
                    parts[name + "_s"].append(sc)
                    del w
            first = {name: torch.cat(v) for name, v in parts.items()}
            del parts
        cache = {"key": key, "sets": [first]}
        ctx.state["moe_weights"] = cache
    sets: list = cache["sets"]
    while len(sets) < copies:
        sets.append({name: t.clone() for name, t in sets[0].items()})
    return sets[:copies]


def dequantized_expert(torch: Any, fmt: str, wset: dict[str, Any], g: int) -> tuple[Any, Any]:
    """Expert g's (W13 [2I, H], W2 [H, I]) in fp32, exactly the values the kernels multiply by."""
    if fmt in QUANT_GROUP:
        gs = QUANT_GROUP[fmt]
        return (
            mq.dequantize_int4(torch, wset["w13"][g], wset["w13_s"][g], gs),
            mq.dequantize_int4(torch, wset["w2"][g], wset["w2_s"][g], gs),
        )
    if fmt == "fp8":
        return (
            mq.dequantize_fp8(torch, wset["w13"][g], wset["w13_s"][g]),
            mq.dequantize_fp8(torch, wset["w2"][g], wset["w2_s"][g]),
        )
    return wset["w13"][g].float(), wset["w2"][g].float()


def _reference(
    torch: Any, fmt: str, x: Any, wset: dict[str, Any], routing: dict[str, Any], inter: int, n_tokens: int
) -> Any:
    """fp32 reference output for the first ``n_tokens`` tokens: a plain loop over each token's experts."""
    ref = torch.zeros(n_tokens, x.shape[1], dtype=torch.float32, device=x.device)
    experts, weights = routing["experts"].tolist(), routing["weights"].tolist()
    deq: dict[int, tuple[Any, Any]] = {}
    for t in range(n_tokens):
        xt = x[t].float()
        for e, w in zip(experts[t], weights[t]):  # noqa: B905 - no strict= on 3.8
            if e not in deq:
                deq[e] = dequantized_expert(torch, fmt, wset, e)
            w13, w2 = deq[e]
            h = w13 @ xt
            a = torch.nn.functional.silu(h[:inter]) * h[inter:]
            ref[t] += w * (w2 @ a)
    return ref


QUANT_INFO = {
    "fp8": "fp8 e4m3 weights, one fp32 scale per output row (row-wise); activations e4m3 with one fp32 scale per "
    "token, quantized inside the timed call (amax/448); output bf16",
    "int4": "int4 W4A16: signed 4-bit weights, symmetric bf16 scales per {g} inputs (group {g}), half-split "
    "nibble packing (moe_quant); activations and output bf16, fp32 accumulation",
}


def _choose_impl(torch: Any, fmt: str, want: str, device: str) -> tuple[str, str | None]:
    """(impl that runs, note or None). Raises RuntimeError when ``grouped_mm`` is asked for but unusable."""
    if fmt == "fp8":
        grouped, reason = "scaled_grouped_mm", _scaled_grouped_mm_usable(torch, device)
        fallback = "loop_dequant"
    elif fmt in QUANT_GROUP:
        grouped, reason = "triton_w4a16_grouped", mq.triton_usable(torch, device)
        fallback = "loop_dequant"
    else:
        grouped, reason = "grouped_mm", _grouped_mm_usable(torch, device, getattr(torch, DTYPES[fmt]))
        fallback = "loop"
    if want == "loop":
        return fallback, None
    if reason is None:
        return grouped, None
    if want == "grouped_mm":
        raise RuntimeError(f"moe_gemm: impl=grouped_mm requested but unusable: {reason}")
    return fallback, f"per-expert loop because {reason}"


VARIANT_TEXT = {"dot": "tensor-core tl.dot", "fma": "CUDA-core FMA", "gemv": "CUDA-core GEMV, one row per program"}


def _pick_variant(torch: Any, variants: list, chosen: dict[str, Any], call: Any) -> dict[tuple, float]:
    """Time each (variant, BLOCK_M) of the int4 kernel eagerly (after two untimed calls that also autotune
    it), keep the fastest in ``chosen``; returns ms per call of each."""
    times: dict[tuple, float] = {}
    errors = []
    for v, bm in variants:
        chosen.update(variant=v, block_m=bm)
        try:
            call()
            call()
        except Exception as exc:  # a variant that does not compile here is dropped, the error kept in info
            errors.append(f"{v}: {type(exc).__name__}: {str(exc)[:300]}")
            times[(v, bm)] = float("inf")
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(PICK_CALLS):
            call()
        end.record()
        torch.cuda.synchronize()
        times[(v, bm)] = start.elapsed_time(end) / PICK_CALLS
    best = min(times, key=lambda vb: times[vb])
    if times[best] == float("inf"):
        raise RuntimeError("moe_gemm: no int4 kernel variant ran: " + "; ".join(errors))
    chosen.update(variant=best[0], block_m=best[1])
    if errors:
        chosen["errors"] = errors
    return times


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    torch = import_torch()
    F = torch.nn.functional
    p = _params(case, ctx)
    if p["ep"] != 1:
        from .moe_ep import run_ep

        return run_ep(torch, p, ctx)
    M, E, H, inter, k, S = p["M"], p["E"], p["H"], p["I"], p["k"], p["shared"]
    G, kk = E + S, k + S
    T = M * kk
    fmt = p["dtype"]
    group = QUANT_GROUP.get(fmt)
    if group is not None and ((H // 2) % group or (inter // 2) % group or H % 2 or inter % 2):
        raise ValueError(
            f"moe_gemm: dtype={fmt} packs two int4 per byte in halves: H/2 and I/2 must be multiples of the group "
            f"{group}, got H={H}, I={inter} (e.g. H=256, I=128 with int4, multiples of 256 with int4-g128)"
        )
    if fmt == "fp8" and (H % 16 or inter % 16):
        raise ValueError(f"moe_gemm: dtype=fp8 needs H and I multiples of 16, got H={H}, I={inter}")
    device = resolve_device(torch, ctx.device)
    dtype = getattr(torch, DTYPES[fmt])  # activations
    ebytes, accounting = expert_bytes(fmt, H, inter)
    info: dict[str, Any] = {
        "device": device,
        "device_name": device_name(torch, device),
        "dtype": fmt,
        "torch": str(torch.__version__),
        "routing_in_timed_region": False,
        "routing": f"uniform random top-{k} of {E} (iid normal logits, softmax over the top-k), "
        f"seed {p['seed']}; {S} shared expert(s) with weight 1",
        "byte_accounting": accounting,
        "bytes_per_weight": ebytes / (3 * H * inter),
    }
    if fmt == "fp8":
        info["quant"] = QUANT_INFO["fp8"]
    elif group is not None:
        info["quant"] = QUANT_INFO["int4"].format(g=group)
        info["group"] = group

    impl, note = _choose_impl(torch, fmt, p["impl"], device)
    info["impl"] = impl
    if note:
        info["impl_note"] = note

    routing = route(torch, M, E, k, S, p["seed"])
    distinct = routing["distinct"]
    total_weight_bytes = G * ebytes
    call_bytes = distinct * ebytes
    act_bpe = 4 if fmt == "fp32" else 2

    # L2: stream weights from memory on every call.
    copies = 1
    if device == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0))
        if l2 and call_bytes < STREAM_FACTOR * l2:
            free = torch.cuda.mem_get_info()[0]
            room = max(1, int(free * ROTATION_MEMORY_FRACTION) // total_weight_bytes)
            copies = min(MAX_WEIGHT_COPIES, room, math.ceil(2 * l2 / call_bytes) + 1)
            info["l2"] = (
                f"weights touched per call {call_bytes / 1e6:.2f} MB not >> L2 {l2 / 1e6:.0f} MB: rotating "
                f"{copies} weight copies ({copies * call_bytes / 1e6:.1f} MB per graph replay"
                f"{'' if copies * call_bytes > 2 * l2 else ', capped: still < 2x L2'})"
            )
        else:
            l2_text = f"L2 {l2 / 1e6:.0f} MB" if l2 else "L2 (size not reported by torch)"
            info["l2"] = (
                f"weights {call_bytes / 1e9:.2f} GB touched per call (of {total_weight_bytes / 1e9:.2f} GB "
                f"resident) >> {l2_text}: every call streams from memory"
            )
        act_bytes = 2 * T * (2 * H + 3 * inter) * act_bpe + 4 * M * H * act_bpe + 64 * T
        cached = ctx.state.get("moe_weights")
        wkey = (G, H, inter, fmt, device, ctx.seed)
        have = len(cached["sets"]) if cached is not None and cached["key"] == wkey else 0
        if have == 0 and cached is not None:
            ctx.state.pop("moe_weights")
            del cached
            gc.collect()
            torch.cuda.empty_cache()
        quant_tmp = 0 if group is None and fmt != "fp8" else 6 * QUANT_CHUNK * 2 * inter * H * 4
        need = max(0, copies - have) * total_weight_bytes + act_bytes + HEADROOM_BYTES + quant_tmp
        check_cuda_room(
            torch,
            need,
            f"moe_gemm E={E}+{S} H={H} I={inter} {fmt}: {max(0, copies - have)} new weight set(s) of "
            f"{total_weight_bytes / 1e9:.2f} GB + activations {act_bytes / 1e9:.2f} GB + headroom",
        )
    else:
        info["l2"] = "cpu: caches not controlled"
    sets = _weights(torch, ctx, (G, H, inter, fmt, device, ctx.seed), fmt, G, H, inter, device, copies)
    info["weight_copies"] = copies
    info["weight_bytes_per_call"] = call_bytes
    info["weight_bytes_resident"] = total_weight_bytes * copies

    # Static inputs (everything the timed call reads is built here, outside the timed region).
    gx = torch.Generator(device="cpu").manual_seed(p["seed"] + 1)
    x = torch.randn(M, H, generator=gx).to(device=device, dtype=dtype)
    order = routing["order"]
    tok_idx = (order // kk).to(device)  # token of each expert-sorted pair
    offs = torch.cumsum(routing["counts"], 0).to(device=device, dtype=torch.int32)
    inv = torch.argsort(order).to(device)  # sorted position of pair (t, j) = t*kk + j
    comb = routing["weights"].to(device=device, dtype=dtype).unsqueeze(1)  # [M, 1, kk]
    counts = routing["counts"].tolist()
    segments = []
    start = 0
    for g, c in enumerate(counts):
        if c:
            segments.append((g, start, start + c))
        start += c
    out = torch.empty(M, H, device=device, dtype=dtype)
    if impl == "triton_w4a16_grouped":
        h_buf = torch.empty(T, 2 * inter, device=device, dtype=dtype)
        y_buf = torch.empty(T, H, device=device, dtype=dtype)
        max_rows = max(counts)
        # (variant, BLOCK_M): tensor cores always; CUDA-core FMAs too when every expert has few rows (decode)
        variants = [("dot", mq.block_m_for(max_rows))]
        if max_rows <= FMA_MAX_ROWS:
            variants.insert(0, ("fma", min(FMA_BLOCK_M, 1 << (max_rows - 1).bit_length())))
        if max_rows <= GEMV_MAX_ROWS:
            variants.insert(0, ("gemv", 1))
        tile_maps = {v: mq.tile_map(torch, counts, bm, device) for v, bm in variants}
        # CUDA: autotuned; Triton's CPU interpreter (TRITON_INTERPRET=1, tests): fixed blocks, fp32 dots
        kern: dict[str, Any] = (
            {"tuned": True} if device == "cuda" else {"tuned": False, "dot_f32": True, "block_k": group}
        )
        chosen: dict[str, Any] = {"variant": variants[0][0], "block_m": variants[0][1]}

    def w4(a_in: Any, w: Any, ws: Any, buf: Any) -> Any:
        v, bm = chosen["variant"], chosen["block_m"]
        return mq.w4a16_grouped_mm(torch, a_in, w, ws, group, tile_maps[v], bm, buf, variant=v, **kern)

    def mm_loop_dequant(xs: Any, w: Any, ws: Any, g: int) -> Any:
        if group is not None:
            wd = mq.dequantize_int4(torch, w[g], ws[g], group).to(dtype)
            return xs @ wd.t()
        xq, xsc = mq.quantize_rows_fp8(torch, xs)
        return ((xq.float() * xsc.unsqueeze(1)) @ mq.dequantize_fp8(torch, w[g], ws[g]).t()).to(dtype)

    def layer(ws: dict[str, Any]) -> None:
        w13, w2 = ws["w13"], ws["w2"]
        xs = x.index_select(0, tok_idx)  # [T, H], rows sorted by expert
        if impl == "grouped_mm":
            h = torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)  # [T, 2I]
            a = F.silu(h[:, :inter]) * h[:, inter:]
            y = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)  # [T, H]
        elif impl == "scaled_grouped_mm":
            xq, xsc = mq.quantize_rows_fp8(torch, xs)
            h = torch._scaled_grouped_mm(
                xq, w13.transpose(-2, -1), xsc, ws["w13_s"], offs=offs, out_dtype=torch.bfloat16
            )
            a = F.silu(h[:, :inter]) * h[:, inter:]
            aq, asc = mq.quantize_rows_fp8(torch, a)
            y = torch._scaled_grouped_mm(aq, w2.transpose(-2, -1), asc, ws["w2_s"], offs=offs, out_dtype=torch.bfloat16)
        elif impl == "triton_w4a16_grouped":
            h = w4(xs, w13, ws["w13_s"], h_buf)
            a = F.silu(h[:, :inter]) * h[:, inter:]
            y = w4(a, w2, ws["w2_s"], y_buf)
        else:
            y = torch.empty(T, H, device=device, dtype=dtype)
            for g, s, e in segments:
                if impl == "loop":
                    h = xs[s:e] @ w13[g].t()
                    y[s:e] = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[g].t()
                else:
                    h = mm_loop_dequant(xs[s:e], w13, ws["w13_s"], g)
                    a = F.silu(h[:, :inter]) * h[:, inter:]
                    y[s:e] = mm_loop_dequant(a, w2, ws["w2_s"], g)
        yo = y.index_select(0, inv).view(M, kk, H)  # back to token order
        out.copy_(torch.bmm(comb, yo).squeeze(1))

    def call_all() -> None:
        for ws in sets:
            layer(ws)

    if impl == "triton_w4a16_grouped" and device == "cuda" and len(variants) > 1:
        picked = _pick_variant(torch, variants, chosen, call_all)
        info["kernel_choice"] = {f"{v} BLOCK_M={bm}": round(ms, 5) for (v, bm), ms in picked.items()}
        if chosen.get("errors"):
            info["kernel_errors"] = chosen["errors"]
    if impl == "triton_w4a16_grouped":
        info["kernel"] = (
            f"Triton W4A16 grouped GEMM (moe_quant), variant {chosen['variant']} "
            f"({VARIANT_TEXT[chosen['variant']]}), "
            f"BLOCK_M={chosen['block_m']}, {tile_maps[chosen['variant']][3]} row tiles per GEMM (tile map built "
            "with the routing, outside the timed region)"
            + (", BLOCK_N/BLOCK_K/warps/stages autotuned" if device == "cuda" else ", Triton CPU interpreter")
        )

    if device == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                call_all()
        torch.cuda.current_stream().wait_stream(side)
        graph = None
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                call_all()
            step = graph.replay
            info["timing"] = (
                f"CUDA graph of {copies} layer call(s) (one per weight copy); {ctx.warmup} warm-up replays; "
                f"each sample = one replay between CUDA events / {copies}"
            )
        except Exception as exc:
            graph = None
            step = call_all
            info["timing"] = (
                f"CUDA events around eager calls ({copies} per sample, divided); graph capture failed: "
                f"{type(exc).__name__}: {exc}"
            )
        step()
        torch.cuda.synchronize()
        if impl == "triton_w4a16_grouped" and device == "cuda":
            info["autotuned"] = mq.tuned_config(chosen["variant"], chosen["block_m"])
    else:
        step = call_all
        info["timing"] = f"time.perf_counter around each eager call; {ctx.warmup} warm-up calls"
        step()

    if not ctx.state.get("moe_checked"):
        n = min(M, CHECK_TOKENS)
        ref = _reference(torch, fmt, x, sets[0], routing, inter, n)
        err = (out[:n].float() - ref).abs().max().item()
        scale = max(ref.abs().max().item(), 1e-30)
        check = {
            "tokens": n,
            "max_abs_err": err,
            "max_rel_err": err / scale,
            "rel_to": "max |reference|",
            "reference": "fp32 per-token loop over its experts"
            + (
                ""
                if fmt in BYTES_PER_WEIGHT
                else ", weights dequantized to fp32 as the kernel sees them, activations unquantized"
            ),
            "tolerance": TOLERANCE[fmt],
            "ok": err / scale <= TOLERANCE[fmt],
        }
        info["check"] = check
        ctx.state["moe_checked"] = True
        if not check["ok"]:
            raise RuntimeError(
                f"moe_gemm numerical check failed ({info['impl']}, {fmt}): max_abs_err {err:.3g}, "
                f"max_rel_err {check['max_rel_err']:.3g} > tolerance {check['tolerance']:g}"
            )

    if device == "cuda":
        samples = time_cuda(torch, step, ctx.warmup, ctx.repeat, calls_per_sample=copies)
        del graph
    else:
        samples = time_cpu(step, ctx.warmup, ctx.repeat)
    info.update({"warmup": ctx.warmup, "tokens_x_experts": T, "seed": p["seed"]})
    return {
        "metrics": {
            "time_ms": summarize(samples, "ms"),
            "distinct_experts": {"value": distinct, "unit": "experts"},
            "expert_bytes": {"value": ebytes, "unit": "B"},
        },
        "info": info,
    }
