"""The int4 MoE layer of the moe_gemm agent bench written out in a plain script (no orch, no agent worker, no
SSH): the same Triton W4A16 kernel (``moe_quant.w4a16_grouped_mm``), the same routing, one CUDA graph replayed
between CUDA events — the baseline for orch's overhead on the measured time.

    python bench/quant_kernels.py [--dtype int4] [--M 1,8,64,256,1024,4096] [--repeat 20] [--orch-run RUN.json]
        [--profile M]

Prints one line per M: the plain script's median ms (CUDA-graph replay between CUDA events, median of
``repeat``), and with ``--orch-run`` (the JSON of ``orch runs show RUN --json`` of a moe-sweep of the same dtype)
orch's stored median for the same M and the ratio orch/plain − 1 in % (orch's overhead on the measured time;
the target is <= 3%). Run on a GPU host with torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.orch_agent.benches import moe_quant as mq  # noqa: E402
from agents.orch_agent.benches.moe_gemm import route  # noqa: E402

KIMI = {"E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1}


def _orch_medians(path: str) -> dict[int, float]:
    doc = json.loads(Path(path).read_text())
    out: dict[int, float] = {}
    for r in doc.get("results", []):
        t = (r.get("metrics") or {}).get("time_ms") or {}
        v = t.get("median", t.get("value"))
        if isinstance(v, (int, float)):
            out[int(r["case"]["M"])] = float(v)
    return out


def _time_layer(torch: Any, a: Any, m: int, r: dict[str, Any], group: int, variant: str, bm: int,
                w13: Any, s13: Any, w2: Any, s2: Any, profile: bool = False) -> float:  # fmt: skip
    """Median ms of one layer call: a CUDA graph of the layer, replayed between CUDA events. ``profile``: also
    print torch.profiler's kernel table of 10 eager calls."""
    E, H, inter, k, S = (KIMI[n] for n in ("E", "H", "I", "k", "shared"))
    kk = k + S
    T = m * kk
    x = torch.randn(m, H, device="cuda", dtype=torch.bfloat16)
    tok = (r["order"] // kk).cuda()
    inv = torch.argsort(r["order"]).cuda()
    comb = r["weights"].to(device="cuda", dtype=torch.bfloat16).unsqueeze(1)
    tiles = mq.tile_map(torch, r["counts"].tolist(), bm, "cuda")
    hb = torch.empty(T, 2 * inter, device="cuda", dtype=torch.bfloat16)
    yb = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, H, device="cuda", dtype=torch.bfloat16)

    def layer() -> None:
        xs = x.index_select(0, tok)
        h = mq.w4a16_grouped_mm(torch, xs, w13, s13, group, tiles, bm, hb, variant=variant)
        act = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        y = mq.w4a16_grouped_mm(torch, act, w2, s2, group, tiles, bm, yb, variant=variant)
        out.copy_(torch.bmm(comb, y.index_select(0, inv).view(m, kk, H)).squeeze(1))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer()
        layer()
    torch.cuda.current_stream().wait_stream(side)
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as prof

        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as pr:
            for _ in range(10):
                layer()
            torch.cuda.synchronize()
        print(f"-- torch.profiler, 10 eager layer calls, int4 M={m}, variant {variant} BLOCK_M={bm}")
        print(pr.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        layer()
    for _ in range(a.warmup):
        graph.replay()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.repeat)]
    torch.cuda.synchronize()
    for s, e in ev:
        s.record()
        graph.replay()
        e.record()
    torch.cuda.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in ev))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="int4")
    ap.add_argument("--M", default="1,8,64,256,1024,4096")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--orch-run", default=None)
    ap.add_argument("--profile", type=int, default=0, help="M to print a torch.profiler kernel table for (0: none)")
    a = ap.parse_args()
    ms = [int(x) for x in a.M.split(",")]
    orch = _orch_medians(a.orch_run) if a.orch_run else {}
    import torch

    group = {"int4": 32, "int4-g128": 128}[a.dtype]
    E, H, inter, k, S = (KIMI[n] for n in ("E", "H", "I", "k", "shared"))
    G = E + S
    gen = torch.Generator(device="cuda").manual_seed(0)
    w = {"w13": [], "s13": [], "w2": [], "s2": []}
    for g0 in range(0, G, 16):
        n = min(16, G - g0)
        for name, shape in (("13", (n, 2 * inter, H)), ("2", (n, H, inter))):
            q, s, _ = mq.quantize_int4(torch, torch.randn(*shape, device="cuda", dtype=torch.bfloat16,
                                                          generator=gen) * 0.02, group)  # fmt: skip
            w["w" + name].append(q)
            w["s" + name].append(s)
    w13, s13, w2, s2 = (torch.cat(w[n]) for n in ("w13", "s13", "w2", "s2"))
    print(f"{'M':>6} {'plain ms':>10} {'orch ms':>10} {'orch/plain-1':>13}  kernel")
    for m in ms:
        t0 = time.perf_counter()
        r = route(torch, m, E, k, S, 0)
        counts = r["counts"].tolist()
        mx = max(counts)
        variants = [("dot", mq.block_m_for(mx))]
        if mx <= 16:  # as moe_gemm: the CUDA-core variants too when experts get few rows; the fastest counts
            variants.insert(0, ("fma", min(4, 1 << (mx - 1).bit_length())))
        if mx <= 4:
            variants.insert(0, ("gemv", 1))
        times = {
            v: _time_layer(torch, a, m, r, group, v, bm, w13, s13, w2, s2, profile=m == a.profile) for v, bm in variants
        }
        best = min(times, key=lambda v: times[v])
        plain = times[best]
        o = orch.get(m)
        over = f"{(o / plain - 1) * 100:+.2f}%" if o else "-"
        print(
            f"{m:>6} {plain:>10.4f} {o if o else float('nan'):>10.4f} {over:>13}  {best}"
            f"  ({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
