"""MoE expert layer: routed top-k experts plus shared experts, SiLU-gated MLP, timed per batch size M.

Case params: ``M`` tokens, ``E`` routed experts, ``H`` hidden size, ``I`` expert intermediate size, ``k``
experts per token, ``shared`` experts every token also goes through (default 0), ``dtype`` ``bf16|fp16|fp32``
(default bf16), ``seed`` routing seed (default the run's), ``impl`` ``auto|grouped_mm|loop`` (default auto),
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

The first case of a run is checked against a plain fp32 reference (per token, loop over its experts) on its
first tokens; a failed check raises, which the worker reports as an error event.
"""

from __future__ import annotations

import gc
import math
from typing import Any

from ..stats import summarize
from ._torch import GiB, check_cuda_room, device_name, import_torch, resolve_device, time_cpu, time_cuda

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
BYTES_PER_WEIGHT = {"bf16": 2, "fp16": 2, "fp32": 4}
IMPLS = ("auto", "grouped_mm", "loop")
# Error of the layer output relative to max |reference|: bf16 keeps 8 mantissa bits (2^-8 ~ 0.4% per rounding,
# several roundings along the layer), fp16 11 bits; fp32 is exact up to summation order.
TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-3}
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


def _weights(
    torch: Any, ctx: Any, key: tuple, G: int, H: int, inter: int, dtype: Any, device: str, copies: int
) -> list:
    """``copies`` weight sets ``(W13 [G, 2I, H], W2 [G, H, I])``, cached in ctx.state for later cases."""
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
        w13 = torch.randn(G, 2 * inter, H, device=device, dtype=dtype, generator=gen).mul_(1.0 / math.sqrt(H))
        w2 = torch.randn(G, H, inter, device=device, dtype=dtype, generator=gen).mul_(1.0 / math.sqrt(inter))
        cache = {"key": key, "sets": [(w13, w2)]}
        ctx.state["moe_weights"] = cache
    sets: list = cache["sets"]
    while len(sets) < copies:
        sets.append((sets[0][0].clone(), sets[0][1].clone()))
    return sets[:copies]


def _reference(torch: Any, x: Any, sets: list, routing: dict[str, Any], inter: int, n_tokens: int) -> Any:
    """fp32 reference output for the first ``n_tokens`` tokens: a plain loop over each token's experts."""
    w13, w2 = sets[0]
    ref = torch.zeros(n_tokens, x.shape[1], dtype=torch.float32, device=x.device)
    experts, weights = routing["experts"].tolist(), routing["weights"].tolist()
    for t in range(n_tokens):
        xt = x[t].float()
        for e, w in zip(experts[t], weights[t]):  # noqa: B905 - no strict= on 3.8
            h = w13[e].float() @ xt
            a = torch.nn.functional.silu(h[:inter]) * h[inter:]
            ref[t] += w * (w2[e].float() @ a)
    return ref


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
    device = resolve_device(torch, ctx.device)
    dtype = getattr(torch, DTYPES[p["dtype"]])
    bpw = BYTES_PER_WEIGHT[p["dtype"]]
    info: dict[str, Any] = {
        "device": device,
        "device_name": device_name(torch, device),
        "dtype": p["dtype"],
        "torch": str(torch.__version__),
        "routing_in_timed_region": False,
        "routing": f"uniform random top-{k} of {E} (iid normal logits, softmax over the top-k), "
        f"seed {p['seed']}; {S} shared expert(s) with weight 1",
    }

    # Implementation.
    reason = _grouped_mm_usable(torch, device, dtype) if p["impl"] != "loop" else "impl=loop requested"
    if p["impl"] == "grouped_mm" and reason is not None:
        raise RuntimeError(f"moe_gemm: impl=grouped_mm requested but unusable: {reason}")
    grouped = reason is None
    info["impl"] = "grouped_mm" if grouped else "loop"
    if not grouped and p["impl"] == "auto":
        info["impl_note"] = f"per-expert loop because {reason}"

    routing = route(torch, M, E, k, S, p["seed"])
    distinct = routing["distinct"]
    expert_bytes = 3 * H * inter * bpw
    total_weight_bytes = G * expert_bytes
    call_bytes = distinct * expert_bytes

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
        act_bytes = 2 * T * (2 * H + 3 * inter) * bpw + 4 * M * H * bpw + 64 * T
        cached = ctx.state.get("moe_weights")
        wkey = (G, H, inter, p["dtype"], device, ctx.seed)
        have = len(cached["sets"]) if cached is not None and cached["key"] == wkey else 0
        if have == 0 and cached is not None:
            ctx.state.pop("moe_weights")
            del cached
            gc.collect()
            torch.cuda.empty_cache()
        need = max(0, copies - have) * total_weight_bytes + act_bytes + HEADROOM_BYTES
        check_cuda_room(
            torch,
            need,
            f"moe_gemm E={E}+{S} H={H} I={inter} {p['dtype']}: {max(0, copies - have)} new weight set(s) of "
            f"{total_weight_bytes / 1e9:.2f} GB + activations {act_bytes / 1e9:.2f} GB + headroom",
        )
    else:
        info["l2"] = "cpu: caches not controlled"
    sets = _weights(
        torch, ctx, (G, H, inter, p["dtype"], device, ctx.seed), G, H, inter, dtype, device, copies
    )
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
    segments = []
    start = 0
    for g, c in enumerate(routing["counts"].tolist()):
        if c:
            segments.append((g, start, start + c))
        start += c
    out = torch.empty(M, H, device=device, dtype=dtype)

    def layer(w13: Any, w2: Any) -> None:
        xs = x.index_select(0, tok_idx)  # [T, H], rows sorted by expert
        if grouped:
            h = torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)  # [T, 2I]
            a = F.silu(h[:, :inter]) * h[:, inter:]
            y = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)  # [T, H]
        else:
            y = torch.empty(T, H, device=device, dtype=dtype)
            for g, s, e in segments:
                h = xs[s:e] @ w13[g].t()
                y[s:e] = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[g].t()
        yo = y.index_select(0, inv).view(M, kk, H)  # back to token order
        out.copy_(torch.bmm(comb, yo).squeeze(1))

    def call_all() -> None:
        for w13, w2 in sets:
            layer(w13, w2)

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
    else:
        step = call_all
        info["timing"] = f"time.perf_counter around each eager call; {ctx.warmup} warm-up calls"
        step()

    if not ctx.state.get("moe_checked"):
        n = min(M, CHECK_TOKENS)
        ref = _reference(torch, x, sets, routing, inter, n)
        err = (out[:n].float() - ref).abs().max().item()
        scale = max(ref.abs().max().item(), 1e-30)
        check = {
            "tokens": n,
            "max_abs_err": err,
            "max_rel_err": err / scale,
            "rel_to": "max |reference|",
            "tolerance": TOLERANCE[p["dtype"]],
            "ok": err / scale <= TOLERANCE[p["dtype"]],
        }
        info["check"] = check
        ctx.state["moe_checked"] = True
        if not check["ok"]:
            raise RuntimeError(
                f"moe_gemm numerical check failed ({info['impl']}, {p['dtype']}): max_abs_err {err:.3g}, "
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
        },
        "info": info,
    }
