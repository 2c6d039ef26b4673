"""Expert-parallel MoE layer: ``moe_gemm`` with ``ep`` > 1 — the routed experts sharded over ``ep`` GPUs, one
process per GPU (the ``_dist`` rank pool: NCCL on CUDA, gloo on the CPU, NVLink multicast off).

Sharding: rank r holds routed experts ``[r·E/ep, (r+1)·E/ep)`` and runs every token-expert pair routed to them
(the routing is the single-GPU bench's, computed identically on every rank from the seed: every rank sees all M
tokens, as after the dispatch). Shared experts are replicated: each rank runs them for its contiguous slice
of the M tokens. Each rank's output is its partial sum (routing weight x expert output, ``index_add_`` into
[M, H]); the combine across GPUs (an all-reduce or all-to-all) is NOT in the timed region — the ``allreduce``
suite measures that cost separately.

Timing: after a barrier each rank times its own eager calls (CUDA events on GPU, perf_counter on the CPU; no
CUDA graph and no L2 weight rotation, unlike the single-GPU path: with E/ep experts per GPU the weights touched
per call are usually well past L2, but not at M=1 on small layers — ``info`` says the bytes). Per sample the
layer's time is the slowest rank's (the step waits for it).

Metrics: ``ep_gpus`` (the ranks: ``ep``, or with ep=0 every GPU ``torch.cuda.device_count()`` reports, 2 processes
on the CPU), ``time_ms`` (slowest rank per sample) and ``distinct_experts`` = expert weight sets read summed over the
GPUs (a shared expert counts once per GPU that ran it), so the orchestrator's ``gbps`` (enrich) is the aggregate
GB/s of all GPUs and ``gbps_per_gpu`` = gbps / ep the "per GPU" figure; ``info.ranks`` has each rank's experts,
pairs, distinct experts, median ms and own GB/s.

Numerical check (first case of a run): the ranks' partial outputs for the first tokens are summed (all-reduce)
and compared on rank 0 with an fp32 reference built from the per-expert weights (each expert's weights come from
its own seeded generator, so rank 0 can rebuild any expert): this checks that every pair ran exactly once.
"""

from __future__ import annotations

from typing import Any

from ._dist import get_pool
from ._torch import resolve_device, time_cpu, time_cuda

DEFAULT_TIMEOUT_S = 900.0
CPU_RANKS = 2  # ep=0 on a host without CUDA


def expert_weights(torch: Any, g: int, H: int, inter: int, dtype: Any, device: str, seed: int) -> tuple[Any, Any]:
    """Expert ``g``'s ``(W13 [2I, H], W2 [H, I])`` from its own generator: the same on any rank."""
    gen = torch.Generator(device=device).manual_seed(seed * 1000003 + g + 1)
    w13 = torch.randn(2 * inter, H, device=device, dtype=dtype, generator=gen).mul_(H**-0.5)
    w2 = torch.randn(H, inter, device=device, dtype=dtype, generator=gen).mul_(inter**-0.5)
    return w13, w2


def local_pairs(torch: Any, routing: dict[str, Any], M: int, E: int, k: int, shared: int, rank: int, n: int) -> dict:
    """Rank ``rank``'s token-expert pairs sorted by local expert: ``tok``, ``lid`` (0..E/n-1 routed, then shared),
    ``w`` (routing weight; 1 for shared), ``counts`` per local expert; ``lo``/``hi`` its routed expert range."""
    el = E // n
    lo, hi = rank * el, (rank + 1) * el
    ex = routing["experts"][:, :k]
    mask = (ex >= lo) & (ex < hi)
    tok, slot = mask.nonzero(as_tuple=True)
    lid = ex[tok, slot] - lo
    w = routing["weights"][:, :k][tok, slot]
    t0, t1 = rank * M // n, (rank + 1) * M // n
    toks, lids, ws = [tok], [lid], [w]
    for s in range(shared):
        toks.append(torch.arange(t0, t1))
        lids.append(torch.full((t1 - t0,), el + s, dtype=lid.dtype))
        ws.append(torch.ones(t1 - t0))
    tok, lid, w = torch.cat(toks), torch.cat(lids), torch.cat(ws)
    order = torch.argsort(lid, stable=True)
    return {
        "tok": tok[order],
        "lid": lid[order],
        "w": w[order].float(),
        "counts": torch.bincount(lid, minlength=el + shared),
        "lo": lo,
        "hi": hi,
    }


def run_ep(torch: Any, p: dict[str, Any], ctx: Any) -> dict[str, Any]:
    from .moe_gemm import BYTES_PER_WEIGHT

    device = resolve_device(torch, ctx.device)
    have = int(torch.cuda.device_count()) if device == "cuda" else CPU_RANKS
    n = p["ep"] or have
    if device == "cuda" and n > have:
        raise ValueError(f"moe_gemm: ep={n} but this host has {have} GPU(s) (torch.cuda.device_count())")
    if p["E"] % n:
        raise ValueError(f"moe_gemm: E={p['E']} routed experts do not split evenly over {n} GPUs")
    pool = get_pool(ctx, n, device, DEFAULT_TIMEOUT_S)
    check = not ctx.state.get("moe_ep_checked")
    args = {"p": p, "run_seed": ctx.seed, "warmup": ctx.warmup, "repeat": ctx.repeat, "check": check}
    replies = pool.call(__name__ + ":ep_rank", args, DEFAULT_TIMEOUT_S)
    expert_bytes = 3 * p["H"] * p["I"] * BYTES_PER_WEIGHT[p["dtype"]]
    samples = [max(r["samples_ms"][i] for r in replies) for i in range(ctx.repeat)]
    ranks = []
    for r in replies:
        med = sorted(r["samples_ms"])[len(r["samples_ms"]) // 2]
        ranks.append(
            {
                "rank": r["rank"],
                "experts": r["experts"],
                "pairs": r["pairs"],
                "distinct": r["distinct"],
                "median_ms": med,
                "weight_bytes": r["distinct"] * expert_bytes,
                "gbps": r["distinct"] * expert_bytes / (med / 1e3) / 1e9 if med > 0 else None,
            }
        )
    info: dict[str, Any] = {
        "device": device,
        "device_name": replies[0]["device_name"],
        "ep": n,
        "backend": pool.backend,
        "dtype": p["dtype"],
        "impl": replies[0]["impl"],
        "torch": str(torch.__version__),
        "routing_in_timed_region": False,
        "combine_in_timed_region": False,
        "sharding": f"routed experts split {p['E'] // n} per GPU; {p['shared']} shared expert(s) replicated, "
        "each GPU runs them for its slice of the tokens",
        "timing": ("CUDA events around eager calls" if device == "cuda" else "time.perf_counter around eager calls")
        + f"; {ctx.warmup} warm-up calls; per sample the slowest rank's time; no L2 rotation",
        "ranks": ranks,
        "warmup": ctx.warmup,
        "seed": p["seed"],
    }
    if check:
        chk = replies[0]["check"]
        info["check"] = chk
        ctx.state["moe_ep_checked"] = True
        if not chk["ok"]:
            raise RuntimeError(
                f"moe_gemm ep={n} numerical check failed: max_rel_err {chk['max_rel_err']:.3g} > {chk['tolerance']:g}"
            )
    from ..stats import summarize

    return {
        "metrics": {
            "time_ms": summarize(samples, "ms"),
            "distinct_experts": {"value": sum(r["distinct"] for r in replies), "unit": "experts"},
            "ep_gpus": {"value": n, "unit": "GPUs"},
        },
        "info": info,
    }


def ep_rank(args: dict[str, Any], rc: Any) -> dict[str, Any]:
    """One rank's part of a case (see the module docstring)."""
    from .moe_gemm import CHECK_TOKENS, DTYPES, TOLERANCE, _grouped_mm_usable, route

    torch, dist = rc.torch, rc.dist
    F = torch.nn.functional
    p = args["p"]
    M, E, H, inter, k, S = p["M"], p["E"], p["H"], p["I"], p["k"], p["shared"]
    n, rank, dev = rc.world_size, rc.rank, rc.device
    dtype = getattr(torch, DTYPES[p["dtype"]])
    el = E // n
    wseed = int(args["run_seed"])
    key = (E, S, H, inter, p["dtype"], n, wseed)
    if rc.state.get("ep_key") != key:
        rc.state.clear()
        ids = list(range(rank * el, (rank + 1) * el)) + list(range(E, E + S))
        parts = [expert_weights(torch, g, H, inter, dtype, dev, wseed) for g in ids]
        rc.state["w13"] = torch.stack([a for a, _ in parts])
        rc.state["w2"] = torch.stack([b for _, b in parts])
        del parts
        rc.state["ep_key"] = key
        rc.state["impl"] = (
            "loop"
            if p["impl"] == "loop"
            else ("grouped_mm" if _grouped_mm_usable(torch, "cuda" if rc.cuda else "cpu", dtype) is None else "loop")
        )
        if p["impl"] == "grouped_mm" and rc.state["impl"] != "grouped_mm":
            raise RuntimeError("impl=grouped_mm requested but torch._grouped_mm is unusable here")
    w13, w2, impl = rc.state["w13"], rc.state["w2"], rc.state["impl"]

    routing = route(torch, M, E, k, S, p["seed"])
    lp = local_pairs(torch, routing, M, E, k, S, rank, n)
    T = int(lp["tok"].numel())
    counts = lp["counts"].tolist()
    gx = torch.Generator(device="cpu").manual_seed(p["seed"] + 1)
    x = torch.randn(M, H, generator=gx).to(device=dev, dtype=dtype)  # the same tokens as the single-GPU bench
    tok = lp["tok"].to(dev)
    wt = lp["w"].to(device=dev, dtype=dtype).unsqueeze(1)
    offs = torch.cumsum(lp["counts"], 0).to(device=dev, dtype=torch.int32)
    segments, start = [], 0
    for g, c in enumerate(counts):
        if c:
            segments.append((g, start, start + c))
        start += c
    out = torch.zeros(M, H, device=dev, dtype=dtype)

    def layer() -> None:
        out.zero_()
        if T == 0:
            return
        xs = x.index_select(0, tok)
        if impl == "grouped_mm":
            h = torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)
            y = torch._grouped_mm(F.silu(h[:, :inter]) * h[:, inter:], w2.transpose(-2, -1), offs=offs)
        else:
            y = torch.empty(T, H, device=dev, dtype=dtype)
            for g, s, e in segments:
                h = xs[s:e] @ w13[g].t()
                y[s:e] = (F.silu(h[:, :inter]) * h[:, inter:]) @ w2[g].t()
        out.index_add_(0, tok, y * wt)

    reply: dict[str, Any] = {
        "rank": rank,
        "experts": [rank * el, (rank + 1) * el],
        "pairs": T,
        "distinct": sum(1 for c in counts if c),
        "impl": impl,
        "device_name": torch.cuda.get_device_name(dev) if rc.cuda else "cpu",
    }
    if args["check"]:
        layer()
        nchk = min(M, CHECK_TOKENS)
        part = out[:nchk].float().contiguous()
        dist.all_reduce(part)
        if rank == 0:
            ref = torch.zeros(nchk, H, dtype=torch.float32, device=dev)
            experts, weights = routing["experts"].tolist(), routing["weights"].tolist()
            for t in range(nchk):
                xt = x[t].float()
                for g, w in zip(experts[t], weights[t]):  # noqa: B905 - no strict= on 3.8
                    a13, a2 = expert_weights(torch, g, H, inter, dtype, dev, wseed)
                    h = a13.float() @ xt
                    ref[t] += w * (a2.float() @ (F.silu(h[:inter]) * h[inter:]))
            err = (part - ref).abs().max().item()
            scale = max(ref.abs().max().item(), 1e-30)
            tol = TOLERANCE[p["dtype"]]
            reply["check"] = {
                "tokens": nchk,
                "max_abs_err": err,
                "max_rel_err": err / scale,
                "rel_to": "max |reference|",
                "tolerance": tol,
                "ok": err / scale <= tol,
            }
    rc.sync()
    dist.barrier()
    if rc.cuda:
        reply["samples_ms"] = time_cuda(torch, layer, int(args["warmup"]), int(args["repeat"]))
    else:
        reply["samples_ms"] = time_cpu(layer, int(args["warmup"]), int(args["repeat"]))
    return reply
