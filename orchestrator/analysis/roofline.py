"""Roofline arithmetic of one MoE expert layer — pure.

The layer: E routed experts plus ``shared`` always-on experts, hidden size H, expert intermediate size I, each
token routed to k of the E experts. An expert is a SwiGLU MLP: gate and up projections (H -> I each) and a
down projection (I -> H), so 3·H·I weights. Sources: ``shared/REFERENCE.md`` ("MoE roofline arithmetic"); the
distinct-expert formula is the expected number of occupied bins when M tokens each pick k of E experts
uniformly.

Units: bytes (B), milliseconds (ms), GB/s = 1e9 B/s, TFLOP/s = 1e12 FLOP/s.
"""

from __future__ import annotations

from collections.abc import Mapping

# Bytes per stored weight, scales included (REFERENCE.md, "Bytes per weight"):
# - fp8: 1 byte plus one fp32 scale per 128x128 block: 1 + 4/16384 (DeepSeek-V3 / Kimi-K2 block FP8).
# - int4-g32 / int4-g128: 0.5 byte plus one bf16 scale per 32 / 128 weights (GPTQ/AWQ/Marlin-style groups).
# - mxfp4: 0.5 byte plus one E8M0 (1-byte) scale per 32 (OCP Microscaling Formats spec v1.0).
# - nvfp4: 0.5 byte plus one FP8 E4M3 scale per 16 (NVIDIA Blackwell NVFP4; the per-tensor fp32 scale is
#   ignored).
# - int4: 0.5 byte, scales aside — the figure engineers quote for Kimi-K2's INT4 weights.
BYTES_PER_WEIGHT: Mapping[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp32": 4.0,
    "fp8": 1.0 + 4.0 / (128 * 128),
    "int4-g32": 0.5 + 2.0 / 32,
    "int4-g128": 0.5 + 2.0 / 128,
    "mxfp4": 0.5 + 1.0 / 32,
    "nvfp4": 0.5 + 1.0 / 16,
    "int4": 0.5,
}

# Activations stay in a 16-bit type when the weights are quantised; fp32 only in an fp32 run.
ACTIVATION_BYTES: Mapping[str, float] = {"fp32": 4.0}
_DEFAULT_ACTIVATION_BYTES = 2.0


def bytes_per_weight(dtype: str | float) -> float:
    """Bytes per weight for a dtype name in ``BYTES_PER_WEIGHT``, or a number given as is.

    Raises:
        ValueError: an unknown dtype name (the message lists the known ones) or a non-positive number.
    """
    if isinstance(dtype, str):
        try:
            return BYTES_PER_WEIGHT[dtype]
        except KeyError:
            raise ValueError(
                f"unknown weight dtype {dtype!r}; known: {', '.join(BYTES_PER_WEIGHT)}"
            ) from None
    if dtype <= 0:
        raise ValueError(f"bytes per weight must be positive, got {dtype!r}")
    return float(dtype)


def activation_element_bytes(dtype: str) -> float:
    """Bytes per activation element for a run whose weights are ``dtype``: 4 for fp32, else 2 (bf16/fp16)."""
    return ACTIVATION_BYTES.get(dtype, _DEFAULT_ACTIVATION_BYTES)


def expected_distinct_experts(M: int, E: int, k: int) -> float:
    """Expected number of distinct routed experts touched by M tokens choosing k of E uniformly.

    D(M) = E·(1 − (1 − k/E)^M). D(0) = 0, D(1) = k, D(M) -> E as M grows. Shared experts are not included.

    Raises:
        ValueError: M < 0, E < 1, or k outside 0..E.
    """
    if M < 0 or E < 1 or not 0 <= k <= E:
        raise ValueError(f"need M >= 0, E >= 1 and 0 <= k <= E; got M={M}, E={E}, k={k}")
    return E * (1.0 - (1.0 - k / E) ** M)


def expert_weights(H: int, I: int) -> int:  # noqa: E741 - I is the name the MoE literature uses
    """Weights of one SwiGLU expert: gate (H·I) + up (H·I) + down (I·H) = 3·H·I."""
    return 3 * H * I


def weight_bytes(distinct_experts: float, H: int, I: int, dtype: str | float) -> float:  # noqa: E741
    """Bytes of expert weights streamed by one call: distinct_experts · 3·H·I · bytes_per_weight(dtype).

    ``distinct_experts`` counts every expert whose weights are read, shared experts included.
    """
    return distinct_experts * expert_weights(H, I) * bytes_per_weight(dtype)


def activation_bytes(M: int, H: int, I: int, k: int, shared: int, dtype: str) -> float:  # noqa: E741
    """Activation bytes moved by one call of the layer, counted as an ideally fused kernel would move them.

    Counted (elements, times ``activation_element_bytes(dtype)``):

    - read the input tokens once: M·H;
    - write the combined output once: M·H;
    - the intermediate ``silu(x·W_gate) * (x·W_up)`` of each (token, expert) pair, written by the gate/up
      GEMM and read by the down GEMM: 2·M·(k + shared)·I.

    Not counted: routing logits and indices, gather/scatter copies of the tokens, the unfused gate/up output
    (2·I per pair) and partial sums — implementation details that a fused kernel avoids. This is therefore a
    lower bound on the real activation traffic.
    """
    elements = 2 * M * H + 2 * M * (k + shared) * I
    return elements * activation_element_bytes(dtype)


def flops(M: int, k: int, shared: int, H: int, I: int) -> int:  # noqa: E741
    """FLOPs of one call: 2·M·(k + shared)·3·H·I (a multiply-add is 2 FLOPs; SiLU and routing are ignored)."""
    return 2 * M * (k + shared) * expert_weights(H, I)


def achieved_gbps(nbytes: float, time_ms: float) -> float:
    """GB/s (1e9 B/s) of ``nbytes`` moved in ``time_ms`` milliseconds. Raises ValueError if time_ms <= 0."""
    if time_ms <= 0:
        raise ValueError(f"time must be positive, got {time_ms} ms")
    return nbytes / (time_ms * 1e-3) / 1e9


def achieved_tflops(nflops: float, time_ms: float) -> float:
    """TFLOP/s (1e12 FLOP/s) of ``nflops`` done in ``time_ms`` ms. Raises ValueError if time_ms <= 0."""
    if time_ms <= 0:
        raise ValueError(f"time must be positive, got {time_ms} ms")
    return nflops / (time_ms * 1e-3) / 1e12


def pct_of_peak(achieved: float, peak: float) -> float:
    """``achieved`` as a percentage of ``peak`` (same unit). Raises ValueError if peak <= 0."""
    if peak <= 0:
        raise ValueError(f"peak must be positive, got {peak}")
    return 100.0 * achieved / peak
