"""Memory bandwidth: device-to-device copy ``dst.copy_(src)`` of one large buffer.

Case params: ``size_bytes`` (default 4 GiB on CUDA — far past any L2 — and 256 MiB on the CPU). Metrics:
``gbps`` = 2 * size_bytes / time / 1e9 (bytes read plus written, GB = 1e9 bytes), ``time_ms`` per copy;
median, p10/p90 and the raw samples. CUDA: CUDA events around each copy, ``warmup`` copies first, ``repeat``
samples.
"""

from __future__ import annotations

from typing import Any

from ..stats import summarize
from ._torch import GiB, check_cuda_room, device_name, import_torch, resolve_device, time_cpu, time_cuda

CUDA_DEFAULT_BYTES = 4 * GiB
CPU_DEFAULT_BYTES = 256 << 20
HEADROOM_BYTES = 1 * GiB


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    torch = import_torch()
    device = resolve_device(torch, ctx.device)
    size = case.get("size_bytes", CUDA_DEFAULT_BYTES if device == "cuda" else CPU_DEFAULT_BYTES)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"hbm: size_bytes must be a positive integer, got {size!r}")
    if device == "cuda":
        check_cuda_room(
            torch, 2 * size + HEADROOM_BYTES, f"hbm copy of {size} bytes (two buffers + headroom)"
        )
    samples, timing = _time_copies(torch, device, size, ctx.warmup, ctx.repeat)
    if device == "cuda":
        torch.cuda.empty_cache()
    gbps = [2.0 * size / (ms / 1e3) / 1e9 for ms in samples]
    return {
        "metrics": {"gbps": summarize(gbps, "GB/s"), "time_ms": summarize(samples, "ms")},
        "info": {
            "device": device,
            "device_name": device_name(torch, device),
            "size_bytes": size,
            "bytes_counted": "read + write (2 x size_bytes)",
            "timing": timing,
            "warmup": ctx.warmup,
            "torch": str(torch.__version__),
        },
    }


def _time_copies(torch: Any, device: str, size: int, warmup: int, repeat: int) -> tuple[list[float], str]:
    src = torch.empty(size, dtype=torch.uint8, device=device)
    src.fill_(1)
    dst = torch.empty_like(src)
    dst.fill_(0)
    if device == "cuda":
        samples = time_cuda(torch, lambda: dst.copy_(src), warmup, repeat)
        return samples, "CUDA events around each dst.copy_(src), one copy per sample"
    samples = time_cpu(lambda: dst.copy_(src), warmup, repeat)
    return samples, "time.perf_counter around each dst.copy_(src), one copy per sample"
