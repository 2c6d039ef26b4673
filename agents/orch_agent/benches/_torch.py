"""Helpers shared by the torch benches: import torch with a clear error, pick the device, time calls.

Times are milliseconds. CUDA timing uses CUDA events recorded on the current stream around each sample and one
synchronize at the end, so no host sync happens between samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

GiB = 1 << 30


def import_torch() -> Any:
    """``import torch``; an ImportError keeps the exact message (e.g. "No module named 'torch'")."""
    import torch

    return torch


def resolve_device(torch: Any, want: str) -> str:
    """``"cuda"`` or ``"cpu"`` for the spec's ``auto|cuda|cpu``; RuntimeError if cuda is asked but absent."""
    if want == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if want == "cuda":
        raise RuntimeError(
            f"device 'cuda' requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})"
        )
    return "cpu"


def device_name(torch: Any, device: str) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name(torch.cuda.current_device()))
    import platform

    return platform.processor() or platform.machine() or "cpu"


def check_cuda_room(torch: Any, need_bytes: int, what: str) -> None:
    """RuntimeError naming bytes needed and free when ``need_bytes`` does not fit in free device memory.

    Free = what the driver reports free plus what PyTorch's caching allocator holds but does not use (blocks
    left by earlier cases of the run, reusable without a new cudaMalloc)."""
    driver_free, total = torch.cuda.mem_get_info()
    free = driver_free + max(0, torch.cuda.memory_reserved() - torch.cuda.memory_allocated())
    if need_bytes > free:
        raise RuntimeError(
            f"{what}: needs {need_bytes / 1e9:.2f} GB on {torch.cuda.get_device_name()} but only "
            f"{free / 1e9:.2f} GB of {total / 1e9:.2f} GB are free ({need_bytes} > {free} bytes)"
        )


def time_cpu(fn: Callable[[], Any], warmup: int, repeat: int) -> list[float]:
    """Milliseconds of ``repeat`` calls of ``fn`` after ``warmup`` untimed calls (time.perf_counter)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_cuda(
    torch: Any, fn: Callable[[], Any], warmup: int, repeat: int, calls_per_sample: int = 1
) -> list[float]:
    """Milliseconds per call: each sample is one ``fn()`` between two CUDA events / ``calls_per_sample``."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeat)]
    torch.cuda.synchronize()
    for i in range(repeat):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / calls_per_sample for s, e in zip(starts, ends)]  # noqa: B905 - 3.8 has no strict=
