"""The fixed costs of a decode step on one host, each in µs with median/p10/p90 over ``repeat`` samples.

Case params: ``H`` hidden size (all-reduce messages are M·H·2 bytes, bf16), ``tokens`` the M values of the
all-reduce rows, ``world_size`` GPUs in the all-reduce (0 = every GPU of the host), ``launches`` kernels per
launch sample, ``graph_nodes`` kernels per CUDA graph, ``timeout_s`` deadline of the all-reduce ranks.

Items (metric names; ``info.methods`` states each one's method again, ``info.skipped`` names what did not
apply here and why — on a CPU host every GPU item is skipped):

- ``dispatch_us``: per-op Python + dispatcher cost of a tiny op (``torch.add(a, b, out=c)`` on 1-element CPU
  tensors): time.perf_counter around ``launches`` calls / ``launches``. Runs on any host.
- ``launch_issue_us``: eager launch of a tiny CUDA kernel as the CPU issues it (``x.add_(1)`` on a 1-element
  CUDA tensor): time.perf_counter around ``launches`` launches, no synchronisation inside, / ``launches``.
- ``launch_gpu_us``: the same launches as seen on the GPU: CUDA events around the ``launches`` back-to-back
  launches / ``launches`` (the GPU-side spacing of eagerly launched tiny kernels).
- ``graph_node_us``: one CUDA graph of ``graph_nodes`` tiny kernels, replayed between CUDA events,
  / ``graph_nodes``: the per-node cost once launches are captured.
- ``sync_us``: a tiny kernel launch followed by ``torch.cuda.synchronize()``, time.perf_counter around both:
  the host-GPU round trip a step pays when it waits for the GPU.
- ``h2d_<size>_us`` / ``d2h_<size>_us`` for 4 KiB, 64 KiB, 1 MiB, 4 MiB: one pinned-memory copy
  (``non_blocking=True``) between CUDA events.
- ``allreduce_eager_M<M>_us`` / ``allreduce_graph_M<M>_us``: all-reduce (sum, bf16, in place) of M·H·2 bytes
  over ``world_size`` GPUs through NCCL, one process per GPU (NVLink multicast off, as the allreduce suite):
  eager = CUDA events around one ``all_reduce``; graph = ``GRAPH_ALLREDUCES`` all-reduces captured in one CUDA
  graph, replay between CUDA events / ``GRAPH_ALLREDUCES``; per sample the slowest rank. Skipped with one GPU.
"""

from __future__ import annotations

import time
from typing import Any

from ..stats import summarize
from ._dist import NO_MULTICAST_ENV, get_pool
from ._torch import device_name, import_torch, resolve_device

COPY_SIZES = ((4 << 10, "4KiB"), (64 << 10, "64KiB"), (1 << 20, "1MiB"), (4 << 20, "4MiB"))
GRAPH_ALLREDUCES = 20

METHODS = {
    "dispatch_us": "time.perf_counter around {launches} torch.add(a, b, out=c) on 1-element CPU tensors, / {launches}",
    "launch_issue_us": "time.perf_counter around {launches} eager x.add_(1) on a 1-element CUDA tensor, no sync, "
    "/ {launches}",
    "launch_gpu_us": "CUDA events around the same {launches} back-to-back eager launches, / {launches}",
    "graph_node_us": "CUDA graph of {graph_nodes} x.add_(1) kernels, one replay between CUDA events, / {graph_nodes}",
    "sync_us": "time.perf_counter around one tiny launch + torch.cuda.synchronize()",
    "h2d_us": "one pinned host->device copy (non_blocking) between CUDA events, sizes 4 KiB..4 MiB",
    "d2h_us": "one device->pinned host copy (non_blocking) between CUDA events, sizes 4 KiB..4 MiB",
    "allreduce_eager_us": "NCCL all_reduce (sum, bf16, in place) of M*H*2 bytes over {world} GPUs, one process per "
    "GPU, CUDA events around one call, slowest rank per sample",
    "allreduce_graph_us": "the same, {n} all_reduces captured in one CUDA graph, replay between CUDA events / {n}",
}


def _params(case: dict[str, Any]) -> dict[str, Any]:
    p: dict[str, Any] = {}
    for name, default, lo in (("H", 7168, 1), ("world_size", 0, 0), ("launches", 200, 1), ("graph_nodes", 100, 1)):
        v = case.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"overheads: {name} must be an integer >= {lo}, got {v!r}")
        p[name] = v
    tokens = case.get("tokens", [1, 2, 4, 8, 16, 32, 64, 128, 256])
    if not isinstance(tokens, list) or not tokens or any(isinstance(t, bool) or not isinstance(t, int) or t < 1
                                                         for t in tokens):  # fmt: skip
        raise ValueError(f"overheads: tokens must be a non-empty list of positive integers, got {tokens!r}")
    p["tokens"] = tokens
    t = case.get("timeout_s", 300.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
        raise ValueError(f"overheads: timeout_s must be a positive number, got {t!r}")
    p["timeout_s"] = float(t)
    return p


def _cpu_samples(fn: Any, n: int, warmup: int, repeat: int) -> list[float]:
    """µs per call: ``repeat`` samples of time.perf_counter around ``n`` calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) * 1e6 / n)
    return out


def _dispatch(torch: Any, p: dict[str, Any], ctx: Any) -> list[float]:
    a, b, c = torch.ones(1), torch.ones(1), torch.empty(1)
    return _cpu_samples(lambda: torch.add(a, b, out=c), p["launches"], ctx.warmup, ctx.repeat)


def _cuda_items(torch: Any, p: dict[str, Any], ctx: Any, metrics: dict[str, Any]) -> None:
    n = p["launches"]
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    issue, gpu = [], []
    for i in range(ctx.warmup + ctx.repeat):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        for _ in range(n):
            x.add_(1)
        e.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if i >= ctx.warmup:
            issue.append((t1 - t0) * 1e6 / n)
            gpu.append(s.elapsed_time(e) * 1e3 / n)
    metrics["launch_issue_us"] = summarize(issue, "us")
    metrics["launch_gpu_us"] = summarize(gpu, "us")

    nodes = p["graph_nodes"]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(nodes):
            x.add_(1)
    metrics["graph_node_us"] = summarize(
        [t * 1e3 / nodes for t in _event_samples(torch, graph.replay, ctx.warmup, ctx.repeat)], "us"
    )
    del graph

    def sync() -> None:
        x.add_(1)
        torch.cuda.synchronize()

    metrics["sync_us"] = summarize(_cpu_samples(sync, 1, ctx.warmup, ctx.repeat), "us")

    for size, label in COPY_SIZES:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(size, dtype=torch.uint8, device="cuda")
        metrics[f"h2d_{label}_us"] = summarize(
            [t * 1e3 for t in _event_samples(torch, lambda h=host, d=dev: d.copy_(h, non_blocking=True),
                                             ctx.warmup, ctx.repeat)], "us")  # fmt: skip
        metrics[f"d2h_{label}_us"] = summarize(
            [t * 1e3 for t in _event_samples(torch, lambda h=host, d=dev: h.copy_(d, non_blocking=True),
                                             ctx.warmup, ctx.repeat)], "us")  # fmt: skip


def _event_samples(torch: Any, fn: Any, warmup: int, repeat: int) -> list[float]:
    """ms of one ``fn()`` between CUDA events, ``repeat`` samples, synchronised before each."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e))
    return out


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    torch = import_torch()
    p = _params(case)
    device = resolve_device(torch, ctx.device)
    fmt = {"launches": p["launches"], "graph_nodes": p["graph_nodes"]}
    metrics: dict[str, Any] = {"dispatch_us": summarize(_dispatch(torch, p, ctx), "us")}
    methods = {"dispatch_us": METHODS["dispatch_us"].format(**fmt)}
    skipped: dict[str, str] = {}
    gpu_items = ("launch_issue_us", "launch_gpu_us", "graph_node_us", "sync_us", "h2d_us", "d2h_us")
    info: dict[str, Any] = {
        "device": device,
        "device_name": device_name(torch, device),
        "torch": str(torch.__version__),
    }
    if device == "cuda":
        _cuda_items(torch, p, ctx, metrics)
        methods.update({k: METHODS[k].format(**fmt) for k in gpu_items})
    else:
        skipped.update(dict.fromkeys(gpu_items, "no CUDA device on this host (or device=cpu)"))
    world = p["world_size"] or (torch.cuda.device_count() if device == "cuda" else 0)
    if device != "cuda":
        skipped["allreduce_us"] = "no CUDA device: the all-reduce rows are NCCL over the host's GPUs"
    elif world < 2:
        skipped["allreduce_us"] = f"{world} GPU on this host: nothing to all-reduce across"
    else:
        _allreduce(torch, p, ctx, world, metrics)
        methods["allreduce_eager_us"] = METHODS["allreduce_eager_us"].format(world=world)
        methods["allreduce_graph_us"] = METHODS["allreduce_graph_us"].format(n=GRAPH_ALLREDUCES)
        info["allreduce"] = {"world_size": world, "backend": "nccl", "dtype": "bf16", "env": dict(NO_MULTICAST_ENV),
                             "bytes": {str(m): m * p["H"] * 2 for m in p["tokens"]}}  # fmt: skip
    info.update({"methods": methods, "skipped": skipped, "warmup": ctx.warmup, "repeat": ctx.repeat})
    return {"metrics": metrics, "info": info}


def _allreduce(torch: Any, p: dict[str, Any], ctx: Any, world: int, metrics: dict[str, Any]) -> None:
    pool = get_pool(ctx, world, "cuda", p["timeout_s"])
    args = {"tokens": p["tokens"], "H": p["H"], "warmup": ctx.warmup, "repeat": ctx.repeat}
    replies = pool.call(__name__ + ":allreduce_latency_rank", args, p["timeout_s"])
    for m in p["tokens"]:
        for mode in ("eager", "graph"):
            per_rank = [r[str(m)][mode] for r in replies]
            samples = [max(r[i] for r in per_rank) * 1e3 for i in range(ctx.repeat)]
            metrics[f"allreduce_{mode}_M{m}_us"] = summarize(samples, "us")


def allreduce_latency_rank(args: dict[str, Any], rc: Any) -> dict[str, Any]:
    """One rank: for each M, ms per all_reduce of M·H bf16 elements, eager and inside a CUDA graph."""
    torch, dist = rc.torch, rc.dist
    out: dict[str, Any] = {}
    warmup, repeat = int(args["warmup"]), int(args["repeat"])
    for m in args["tokens"]:
        buf = torch.ones(int(m) * int(args["H"]), dtype=torch.bfloat16, device=rc.device)
        dist.all_reduce(buf)
        rc.sync()
        dist.barrier()
        eager = _event_samples(torch, lambda b=buf: dist.all_reduce(b), warmup, repeat)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            dist.all_reduce(buf)
        torch.cuda.current_stream().wait_stream(side)
        rc.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_ALLREDUCES):
                dist.all_reduce(buf)
        rc.sync()
        dist.barrier()
        per = [t / GRAPH_ALLREDUCES for t in _event_samples(torch, graph.replay, warmup, repeat)]
        del graph
        out[str(m)] = {"eager": eager, "graph": per}
    return out
