"""The built-in ``overheads`` suite (bench ``overheads``): the fixed per-step costs of decode on one host —
launch latency (CPU issue and GPU spacing), CUDA-graph per-node cost, synchronize round trip, small pinned
copies, per-op dispatch, and all-reduce latency at decode message sizes (M·H·2 bytes, eager and in a CUDA
graph) — each as µs with median/p10/p90; the agent's module docstring states each method. One case, one result
row holding every item as a metric; items that do not apply on the host (GPU items on a CPU host, all-reduce
with one GPU) are listed in the result's ``info.skipped`` with the reason. Pure definition."""

from __future__ import annotations

from orchestrator.suites.registry import Param, SuiteDef, run_params

DECODE_TOKENS = [2**i for i in range(9)]  # M = 1 .. 256 tokens per decode step

OVERHEADS = SuiteDef(
    name="overheads",
    description=(
        "fixed costs of a decode step, µs: tiny-kernel launch (CPU issue, GPU spacing), CUDA-graph node, "
        "synchronize round trip, pinned H2D/D2H 4 KiB..4 MiB, per-op dispatch, all-reduce of M·H·2 bytes "
        "(M = 1..256) over the host's GPUs through NCCL, eager and in a CUDA graph"
    ),
    bench="overheads",
    params=(
        Param("H", "int", 7168, "hidden size, elements: an all-reduce moves M·H bf16 values", min=1),
        Param(
            "tokens",
            "int-list",
            DECODE_TOKENS,
            "M values (tokens per step) of the all-reduce rows; A..B doubles from A to B",
            min=1,
            example="1..256",
        ),
        Param(
            "world_size",
            "int",
            0,
            "GPUs in the all-reduce, one process each; 0 = every GPU the host reports (skipped below 2)",
            min=0,
        ),
        Param("launches", "int", 200, "tiny kernels launched per launch-latency sample", min=1),
        Param("graph_nodes", "int", 100, "tiny kernels captured in the CUDA graph", min=1),
        Param("timeout_s", "float", 300.0, "deadline of the all-reduce ranks (start included), s", min=1),
        *run_params(repeat=50, warmup=5),
    ),
)
