"""The built-in suites: ``moe-sweep`` (bench ``moe_gemm``), ``hbm-bandwidth`` (bench ``hbm``), ``noop`` (bench
``sleep``), ``decode`` (bench ``decode``, defined in ``builtin_decode.py``), ``allreduce`` and ``moe-sweep-ep``
(in ``builtin_multigpu.py``), ``overheads`` (``builtin_overheads.py``) — pure definitions,
registered by ``registry.builtin_registry()``."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.suites.builtin_decode import DECODE
from orchestrator.suites.builtin_multigpu import ALLREDUCE, moe_sweep_ep
from orchestrator.suites.builtin_overheads import OVERHEADS
from orchestrator.suites.registry import Param, ParamValue, Plot, Preset, SuiteDef, run_params

POWERS_OF_TWO_TO_4096 = [2**i for i in range(13)]  # 1, 2, 4, ..., 4096


def _k_le_e(v: Mapping[str, ParamValue]) -> str | None:
    k, e = v["k"], v["E"]
    if isinstance(k, int) and isinstance(e, int) and k > e:
        return f"k={k} is larger than E={e}: each token picks k of the E routed experts (--set k=8 or --set E=384)"
    return None


MOE_SWEEP = SuiteDef(
    name="moe-sweep",
    description=(
        "MoE expert layer (E routed + shared SwiGLU experts, top-k uniform random routing, grouped GEMM) "
        "timed "
        "per batch size M; reports ms, µs/token, distinct-expert weight GB/s, TFLOP/s and % of peak bandwidth"
    ),
    bench="moe_gemm",
    params=(
        Param(
            "M",
            "int-list",
            POWERS_OF_TWO_TO_4096,
            "batch sizes, tokens per call; A..B doubles from A to B",
            min=1,
            example="1,2,4",
        ),
        Param("E", "int", 384, "number of routed experts", min=1),
        Param("H", "int", 7168, "hidden size, elements", min=1),
        Param("I", "int", 2048, "expert intermediate size, elements", min=1),
        Param("k", "int", 8, "routed experts per token (top-k)", min=1),
        Param("shared", "int", 1, "shared experts every token also goes through", min=0),
        Param(
            "dtype",
            "str",
            "bf16",
            "weight format: bf16/fp16/fp32, fp8 (e4m3, row-wise scales), int4 (W4A16, group 32), int4-g128",
            ("bf16", "fp16", "fp32", "fp8", "int4", "int4-g128"),
        ),
        Param(
            "impl",
            "str",
            "auto",
            "GEMM implementation: grouped_mm (one launch per GEMM for all experts: torch._grouped_mm for "
            "bf16, torch._scaled_grouped_mm for fp8, a Triton W4A16 kernel for int4), per-expert loop, "
            "or auto (grouped where supported)",
            ("auto", "grouped_mm", "loop"),
        ),
        *run_params(repeat=20, warmup=5),
    ),
    presets=(
        Preset(
            "kimi-k2",
            "Kimi-K2 MoE layer: 384 routed + 1 shared expert, top-8, H=7168, I=2048, bf16, M=1..4096",
            {
                "E": 384,
                "H": 7168,
                "I": 2048,
                "k": 8,
                "shared": 1,
                "dtype": "bf16",
                "M": POWERS_OF_TWO_TO_4096,
            },
        ),
        Preset(
            "tiny",
            "small layer for CPUs and tests (seconds): E=16, H=256, I=128, top-4 + 1 shared, fp32, M=1..64",
            {
                "E": 16,
                "H": 256,
                "I": 128,
                "k": 4,
                "shared": 1,
                "dtype": "fp32",
                "M": [1, 2, 4, 8, 16, 32, 64],
            },
        ),
    ),
    sweep="M",
    default_preset_cuda="kimi-k2",
    default_preset_cpu="tiny",
    checks=(_k_le_e,),
    # the roofline views: weight GB/s against the memory roofs, TFLOP/s against the dtype's dense peak
    plots=(Plot("gbps", "memory"), Plot("tflops", "compute"), Plot("us_per_token"), Plot("time_ms")),
)

HBM_BANDWIDTH = SuiteDef(
    name="hbm-bandwidth",
    description=(
        "device-to-device copy over one buffer well past L2; GB/s counts bytes read plus written; "
        "the measured memory roof for moe-sweep's % of roof"
    ),
    bench="hbm",
    params=(
        Param(
            "size_bytes",
            "int",
            4 * 2**30,
            "buffer size, bytes (KiB/MiB/GiB suffixes accepted)",
            min=2**20,
            example="4GiB",
        ),
        *run_params(repeat=20, warmup=5),
    ),
    presets=(
        Preset("cuda", "4 GiB buffer, the default on a CUDA host", {"size_bytes": 4 * 2**30}),
        Preset("cpu", "64 MiB buffer, the default without CUDA", {"size_bytes": 64 * 2**20}),
    ),
    default_preset_cuda="cuda",
    default_preset_cpu="cpu",
    plots=(Plot("gbps", "memory"),),
    plot_x="size_bytes",
)

NOOP = SuiteDef(
    name="noop",
    description="one case that sleeps `ms` milliseconds: for tests and orch's own overhead benchmark",
    bench="sleep",
    params=(
        Param("ms", "float", 1.0, "sleep per call, milliseconds", min=0),
        *run_params(repeat=20, warmup=0),
    ),
    plots=(Plot("time_ms"),),
    plot_x="ms",
)

MOE_SWEEP_EP = moe_sweep_ep(MOE_SWEEP)

BUILTIN_SUITES: tuple[SuiteDef, ...] = (
    MOE_SWEEP,
    HBM_BANDWIDTH,
    NOOP,
    DECODE,
    ALLREDUCE,
    MOE_SWEEP_EP,
    OVERHEADS,
)
