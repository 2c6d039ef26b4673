"""All-reduce (sum) across the host's GPUs, one process per GPU, with nccl-tests' definitions.

Case params: ``size_bytes`` message size in bytes (the sweep axis), ``dtype`` ``fp32|bf16|fp16`` (default fp32,
nccl-tests' ``float``), ``world_size`` ranks (default 0 = every GPU the host reports, ``torch.cuda.device_count()``,
never assumed; 2 processes on the CPU), ``timeout_s`` deadline of one case (default 600).

Processes: the ranks live in a :class:`._dist.RankPool` (NCCL on CUDA, rank r on ``cuda:r``; gloo on the CPU)
started by the first case and reused by the next ones, so a sweep of 31 sizes starts N processes once; every
rank runs with NVLink multicast off (``NCCL_NVLS_ENABLE=0`` ...; see ``_dist``).

Metrics (nccl-tests conventions, GB = 1e9 B): ``time_us`` per call — per sample the slowest rank's time, since
the collective ends when its last rank does — median, percentiles and raw samples; ``algbw_gbps`` =
size_bytes / 1e9 / seconds; ``busbw_gbps`` = algbw · 2(n−1)/n; both per sample from the time, so their median
is the median sample's. ``wrong``: elements, summed over the ranks, that differ from the exact expected sum
(nccl-tests' ``#wrong``): rank r's element i holds ``(i mod 8) + 1 + r``, so element i of the sum is
``n·((i mod 8) + 1) + n(n−1)/2`` — small integers, exact in fp32/fp16 and in bf16 up to 16 ranks (<= 256).

Timing: ``torch.distributed.all_reduce`` is in place (torch has no out-of-place all-reduce; its functional
variant clones the input first, which would put a copy in the timed region), so the time is nccl-tests'
*in-place* column. CUDA: CUDA events on the current stream around each call, ``warmup`` calls first, ``repeat``
samples; CPU: time.perf_counter. The value check is a separate call on freshly filled data after the timed ones
(the timed calls keep summing into the same buffer).
"""

from __future__ import annotations

from typing import Any

from ..stats import summarize
from ._dist import NO_MULTICAST_ENV, get_pool
from ._torch import device_name, import_torch, resolve_device, time_cpu, time_cuda

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
CPU_WORLD_SIZE = 2
DEFAULT_TIMEOUT_S = 600.0
CHECK_CHUNK = 1 << 24  # elements compared at a time: bounds the check's temporaries
HEADROOM_BYTES = 512 << 20
PERIOD = 8


def bus_factor(n: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n−1)/n (0 for one rank)."""
    return 2.0 * (n - 1) / n


def bandwidths(size_bytes: int, time_us: float, n: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in GB/s for ``size_bytes`` reduced across ``n`` ranks in ``time_us`` µs."""
    algbw = size_bytes / 1e9 / (time_us / 1e6)
    return algbw, algbw * bus_factor(n)


def expected_sum(i: int, n: int) -> int:
    """Element ``i`` of the all-reduced buffer (see the module docstring)."""
    return n * ((i % PERIOD) + 1) + n * (n - 1) // 2


def _case(case: dict[str, Any]) -> tuple[int, str, int, float]:
    size = case.get("size_bytes")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"allreduce: size_bytes must be a positive integer, got {size!r}")
    dtype = case.get("dtype", "fp32")
    if dtype not in DTYPES:
        raise ValueError(f"allreduce: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if size < ELEMENT_BYTES[dtype]:
        raise ValueError(f"allreduce: size_bytes={size} is less than one {dtype} element")
    ws = case.get("world_size", 0)
    if isinstance(ws, bool) or not isinstance(ws, int) or ws < 0:
        raise ValueError(f"allreduce: world_size must be an integer >= 0 (0 = all GPUs), got {ws!r}")
    timeout = case.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"allreduce: timeout_s must be > 0, got {timeout!r}")
    return size, dtype, ws, float(timeout)


def world_size_for(torch: Any, device: str, requested: int) -> int:
    """Ranks to start: ``requested``, or (0) every GPU ``torch.cuda.device_count()`` reports / 2 on the CPU.
    ValueError when more GPUs are asked for than the host has."""
    if device != "cuda":
        return requested or CPU_WORLD_SIZE
    have = int(torch.cuda.device_count())
    if requested > have:
        raise ValueError(f"world_size={requested} but this host has {have} GPU(s) (torch.cuda.device_count())")
    return requested or have


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    torch = import_torch()
    size, dtype, requested, timeout = _case(case)
    device = resolve_device(torch, ctx.device)
    n = world_size_for(torch, device, requested)
    count = size // ELEMENT_BYTES[dtype]
    nbytes = count * ELEMENT_BYTES[dtype]
    pool = get_pool(ctx, n, device, timeout)
    args = {"count": count, "dtype": dtype, "warmup": ctx.warmup, "repeat": ctx.repeat}
    replies = pool.call(__name__ + ":allreduce_rank", args, timeout)
    per_sample_ms = [max(r["samples_ms"][i] for r in replies) for i in range(ctx.repeat)]
    time_us = [ms * 1e3 for ms in per_sample_ms]
    algbw = [bandwidths(nbytes, t, n)[0] for t in time_us]
    busbw = [bandwidths(nbytes, t, n)[1] for t in time_us]
    wrong = sum(int(r["wrong"]) for r in replies)
    info: dict[str, Any] = {
        "device": device,
        "device_name": device_name(torch, device) if device == "cpu" else replies[0]["device_name"],
        "device_names": [r["device_name"] for r in replies],
        "world_size": n,
        "world_size_source": "requested"
        if requested
        else ("torch.cuda.device_count()" if device == "cuda" else f"cpu default {CPU_WORLD_SIZE}"),
        "backend": pool.backend,
        "dtype": dtype,
        "count": count,
        "size_bytes": nbytes,
        "redop": "sum",
        "placement": "in-place (torch.distributed.all_reduce); compare with nccl-tests' in-place column",
        "bus_factor": bus_factor(n),
        "timing": (
            "CUDA events around each call on the current stream"
            if device == "cuda"
            else "time.perf_counter around each call"
        )
        + "; per sample the slowest rank's time",
        "warmup": ctx.warmup,
        "wrong_per_rank": [int(r["wrong"]) for r in replies],
        "env": dict(NO_MULTICAST_ENV),
        "torch": str(torch.__version__),
    }
    if replies[0].get("nccl_version"):
        info["nccl_version"] = replies[0]["nccl_version"]
    return {
        "metrics": {
            "time_us": summarize(time_us, "us"),
            "algbw_gbps": summarize(algbw, "GB/s"),
            "busbw_gbps": summarize(busbw, "GB/s"),
            "wrong": {"value": wrong, "unit": "elements"},
        },
        "info": info,
    }


# -- rank side ------------------------------------------------------------------------------------------------


def _fill(torch: Any, buf: Any, rank: int) -> None:
    """Element i = (i mod 8) + 1 + rank, written through a [count/8, 8] view (no index tensor of count)."""
    pattern = torch.arange(1, PERIOD + 1, dtype=torch.float32, device=buf.device).add_(rank).to(buf.dtype)
    m = buf.numel() // PERIOD * PERIOD
    if m:
        buf[:m].view(-1, PERIOD).copy_(pattern.expand(m // PERIOD, PERIOD))
    if buf.numel() > m:
        buf[m:].copy_(pattern[: buf.numel() - m])


def _count_wrong(torch: Any, buf: Any, n: int) -> int:
    exp = torch.tensor([expected_sum(j, n) for j in range(PERIOD)], dtype=torch.float32, device=buf.device)
    exp = exp.to(buf.dtype)
    m = buf.numel() // PERIOD * PERIOD
    wrong = 0
    step = CHECK_CHUNK // PERIOD * PERIOD
    for s in range(0, m, step):
        e = min(m, s + step)
        wrong += int((buf[s:e].view(-1, PERIOD) != exp).sum().item())
    if buf.numel() > m:
        wrong += int((buf[m:] != exp[: buf.numel() - m]).sum().item())
    return wrong


def allreduce_rank(args: dict[str, Any], rc: Any) -> dict[str, Any]:
    """One rank's part of a case: agree that every rank has its buffer, time, then check the values."""
    torch, dist = rc.torch, rc.dist
    dtype = getattr(torch, DTYPES[args["dtype"]])
    count = int(args["count"])
    rc.state.clear()
    if rc.cuda:
        torch.cuda.empty_cache()
    buf, problem = None, ""
    try:
        if rc.cuda:
            free, _ = torch.cuda.mem_get_info()
            need = count * ELEMENT_BYTES[args["dtype"]] + HEADROOM_BYTES
            if need > free:
                raise RuntimeError(f"needs {need} bytes, {free} free on {rc.device}")
        buf = torch.empty(count, dtype=dtype, device=rc.device)
        _fill(torch, buf, rc.rank)
    except Exception as exc:
        buf, problem = None, f"rank {rc.rank}: {type(exc).__name__}: {exc}"
    ok = torch.tensor([0 if buf is None else 1], dtype=torch.int32, device=rc.device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # nobody enters the timed collectives unless everybody can
    if int(ok.item()) == 0:
        raise RuntimeError(problem or "another rank could not allocate its buffer")
    rc.sync()
    dist.barrier()

    def call() -> None:
        dist.all_reduce(buf)

    if rc.cuda:
        samples = time_cuda(torch, call, int(args["warmup"]), int(args["repeat"]))
    else:
        samples = time_cpu(call, int(args["warmup"]), int(args["repeat"]))
    _fill(torch, buf, rc.rank)
    rc.sync()
    dist.all_reduce(buf)
    rc.sync()
    out: dict[str, Any] = {
        "samples_ms": samples,
        "wrong": _count_wrong(torch, buf, rc.world_size),
        "device_name": torch.cuda.get_device_name(rc.device) if rc.cuda else "cpu",
    }
    if rc.cuda:
        try:
            out["nccl_version"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - informational only
            pass
    return out
