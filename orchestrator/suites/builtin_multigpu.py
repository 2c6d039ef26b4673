"""The multi-GPU built-in suites — pure definitions, registered through ``builtin.BUILTIN_SUITES``:

- ``allreduce`` (bench ``allreduce``): all-reduce bus bandwidth across a host's GPUs over message sizes,
  nccl-tests' definitions;
- ``moe-sweep-ep`` (bench ``moe_gemm`` with ``ep``): moe-sweep with the routed experts sharded over the host's
  GPUs. A suite of its own rather than an ``ep`` parameter of moe-sweep, so that moe-sweep's cases (and their
  stored case keys, which compare runs) stay what they were.

The sweep axis ``size_bytes`` is one case per message size; ``--set size_bytes=8..8GiB`` is nccl-tests'
``-b 8 -e 8G -f 2`` (the min/max bytes of a doubling sweep).
"""

from __future__ import annotations

import dataclasses

from orchestrator.suites.registry import Param, Plot, Preset, SuiteDef, run_params

SIZES_8B_TO_8GIB = [8 * 2**i for i in range(31)]  # 8 B, 16 B, ..., 8 GiB: nccl-tests -b 8 -e 8G -f 2
SIZES_CPU = [8 * 2**i for i in range(0, 20, 3)]  # 8 B ... 2 MiB in steps of 8x: seconds on a CPU with gloo

ALLREDUCE = SuiteDef(
    name="allreduce",
    description=(
        "all-reduce (sum) across the host's GPUs, one process per GPU (NCCL, NVLink multicast off; gloo on the "
        "CPU), per message size: time, algbw = bytes/time and busbw = algbw·2(n−1)/n (nccl-tests' definitions, "
        "GB = 1e9 B), and #wrong elements against the exact sum"
    ),
    bench="allreduce",
    params=(
        Param(
            "size_bytes",
            "int-list",
            SIZES_8B_TO_8GIB,
            "message sizes, bytes; A..B doubles from A to B (nccl-tests -b A -e B -f 2)",
            min=1,
            example="8..1GiB",
        ),
        Param("dtype", "str", "fp32", "element type (fp32 is nccl-tests' default float)", ("fp32", "bf16", "fp16")),
        Param(
            "world_size",
            "int",
            0,
            "processes, one per GPU; 0 = every GPU the host reports (torch.cuda.device_count()), 2 on the CPU",
            min=0,
        ),
        Param("timeout_s", "float", 600.0, "deadline of one size (the first also starts the processes), s", min=1),
        *run_params(repeat=20, warmup=5),
    ),
    presets=(
        Preset(
            "cuda",
            "8 B .. 8 GiB doubling, every GPU of the host (nccl-tests -b 8 -e 8G -f 2)",
            {"size_bytes": SIZES_8B_TO_8GIB},
        ),
        Preset("cpu", "2 gloo processes, 8 B .. 2 MiB in steps of 8x", {"size_bytes": SIZES_CPU, "world_size": 2}),
    ),
    sweep="size_bytes",
    default_preset_cuda="cuda",
    default_preset_cpu="cpu",
    plots=(Plot("busbw_gbps"), Plot("algbw_gbps"), Plot("time_us")),
)


def moe_sweep_ep(moe_sweep: SuiteDef) -> SuiteDef:
    """moe-sweep plus ``ep`` (GPUs the routed experts are sharded over; 0 = every GPU of the host, 2 processes on
    the CPU), with the same presets; its results carry ``gbps`` (all GPUs) and ``gbps_per_gpu`` (enrich)."""
    ep = Param(
        "ep",
        "int",
        0,
        "GPUs the routed experts are sharded over, E/ep each, one process per GPU; "
        "0 = every GPU the host reports (torch.cuda.device_count()), 2 processes on the CPU",
        min=0,
    )
    return dataclasses.replace(
        moe_sweep,
        name="moe-sweep-ep",
        description=moe_sweep.description + "; routed experts sharded over the host's GPUs (expert parallel): "
        "aggregate and per-GPU GB/s, the combine across GPUs not timed (see allreduce)",
        params=(*moe_sweep.params, ep),
        # GB/s of all GPUs; per GPU (against one GPU's roofs) when sharded; never distinct_experts or ep_gpus
        plots=(Plot("gbps"), Plot("gbps_per_gpu", "memory"), Plot("tflops"), Plot("us_per_token"), Plot("time_ms")),
    )
