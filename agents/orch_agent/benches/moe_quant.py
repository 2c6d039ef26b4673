"""Quantized expert weights for the moe_gemm bench, and the grouped W4A16 GEMM (a Triton kernel) — torch and
triton are imported lazily (the module itself is stdlib-only).

Formats (one weight matrix ``W`` [N, K]: N outputs, K inputs, ``y = x @ W.T``):

- ``int4`` (W4A16, group g = 32 by default as Kimi-K2's INT4 checkpoints, 128 allowed): signed 4-bit weights
  ``q`` in [-8, 7] with symmetric per-group scales along the input dimension,
  ``s[n, j] = max |W[n, j·g:(j+1)·g]| / 7`` stored as bf16, ``q = clamp(round(W / s), -8, 7)``; the weight the
  kernel uses is ``q · s``. Bytes per weight 0.5 + 2/g (0.5625 at g=32, 0.515625 at g=128).
  Packing ("half split", input-major so that a kernel's loads run along the outputs): packed uint8 [K/2, N],
  byte [b, n] holds ``q[n, b] + 8`` in its low nibble and ``q[n, b + K/2] + 8`` in its high nibble; scales
  bf16 [K/g, N]. One byte load feeds two ``tl.dot``s (inputs b and b + K/2) whatever the block size is; K/2
  must be a multiple of g.
- ``fp8`` (e4m3, weights and activations): one fp32 scale per output row of W,
  ``s[n] = max |W[n, :]| / 448`` (448 = the largest e4m3 value), ``q = (W / s).to(float8_e4m3fn)``; activations
  are quantized per token (row) the same way inside the timed call. This is the row-wise scaling
  ``torch._scaled_grouped_mm`` supports on sm90/sm100. Bytes per weight 1 + 4/K.

``dequantize_*`` give the fp32 weights exactly as the kernels see them (the reference check of the bench uses
them).
"""

from __future__ import annotations

import os
from typing import Any

FP8_MAX = 448.0  # largest finite float8_e4m3fn value (OCP FP8 spec, E4M3)
INT4_MAX = 7  # symmetric signed 4-bit: scale from max|w| / 7, values clamped to [-8, 7]
INT4_GROUPS = (32, 128)
SMEM_BUDGET = 160 * 1024  # bytes a kernel config may plan to use (sm90 allows 227 KiB per block; margin kept)


def int4_bytes_per_weight(group: int) -> float:
    """0.5 byte of weight plus one bf16 scale (2 bytes) per ``group`` weights."""
    return 0.5 + 2.0 / group


def fp8_bytes_per_weight(k: int) -> float:
    """1 byte of weight plus one fp32 scale (4 bytes) per output row of ``k`` inputs."""
    return 1.0 + 4.0 / k


def quantize_int4(torch: Any, w: Any, group: int) -> tuple[Any, Any, Any]:
    """``w`` [..., N, K] (any float) -> (packed uint8 [..., K/2, N], scales bf16 [..., K/group, N], q int8
    [..., N, K] before packing). Raises ValueError when K/2 is not a multiple of ``group``."""
    K = w.shape[-1]
    if K % 2 or (K // 2) % group:
        raise ValueError(f"int4: input size K={K} must be even with K/2 a multiple of the group {group}")
    wg = w.float().reshape(*w.shape[:-1], K // group, group)
    scale = (wg.abs().amax(dim=-1) / INT4_MAX).to(torch.bfloat16)
    s = scale.float().clamp(min=1e-30).unsqueeze(-1)  # divide by the stored (rounded) scale
    q = torch.round(wg / s).clamp_(-8, 7).to(torch.int8).reshape(w.shape)
    half = K // 2
    u = (q.to(torch.int16) + 8).to(torch.uint8)
    packed = u[..., :half] | (u[..., half:] << 4)
    return packed.transpose(-2, -1).contiguous(), scale.transpose(-2, -1).contiguous(), q


def unpack_int4(torch: Any, packed: Any) -> Any:
    """uint8 [..., K/2, N] -> int8 [..., N, K] (the inverse of the packing above)."""
    lo = (packed & 0xF).to(torch.int8) - 8
    hi = (packed >> 4).to(torch.int8) - 8
    return torch.cat([lo, hi], dim=-2).transpose(-2, -1)


def dequantize_int4(torch: Any, packed: Any, scale: Any, group: int) -> Any:
    """fp32 [..., N, K]: unpacked ``q`` times its group's bf16 scale (scale [..., K/group, N])."""
    q = unpack_int4(torch, packed).float()
    s = scale.float().transpose(-2, -1).repeat_interleave(group, dim=-1)
    return q * s


def quantize_fp8(torch: Any, w: Any) -> tuple[Any, Any]:
    """``w`` [..., N, K] -> (float8_e4m3fn [..., N, K], fp32 scales [..., N]): one scale per output row."""
    s = (w.float().abs().amax(dim=-1) / FP8_MAX).clamp(min=1e-12)
    q = (w.float() / s.unsqueeze(-1)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.contiguous(), s.contiguous()


def dequantize_fp8(torch: Any, q: Any, s: Any) -> Any:
    return q.float() * s.float().unsqueeze(-1)


def quantize_rows_fp8(torch: Any, x: Any) -> tuple[Any, Any]:
    """Activations [T, K] -> (e4m3 [T, K], fp32 [T]): per-token scales, as done inside the timed call."""
    s = (x.abs().amax(dim=1).float() / FP8_MAX).clamp_(min=1e-12)
    q = (x.float() / s.unsqueeze(1)).to(torch.float8_e4m3fn)
    return q, s


# -- the grouped W4A16 kernel ------------------------------------------------------------------------------------

_KERNELS: dict[str, Any] = {}


def triton_usable(torch: Any, device: str) -> str | None:
    """None when the Triton W4A16 kernel can run here, else why not."""
    if device != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        return "the Triton kernel needs CUDA (or TRITON_INTERPRET=1)"
    try:
        import triton  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"triton is not importable: {type(exc).__name__}: {exc}"
    return None


def _kernels() -> dict[str, Any]:
    """Compile-on-first-use: the plain ``@triton.jit`` kernel and an autotuned wrapper (BLOCK_N, BLOCK_K,
    warps, stages; BLOCK_M is chosen by the caller, since the tile map depends on it)."""
    if _KERNELS:
        return _KERNELS
    import triton
    import triton.language as tl

    @triton.jit
    def w4a16_grouped(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        tile_expert_ptr,
        tile_start_ptr,
        tile_end_ptr,
        N,
        HALF_K,
        stride_xm,
        stride_wg,
        stride_wk,
        stride_sg,
        stride_sk,
        stride_ym,
        GROUP: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        DOT_F32: tl.constexpr = False,
    ):
        # One program: BLOCK_M rows of one expert x BLOCK_N outputs. Per step of GROUP packed rows, the int4
        # values (exact in bf16) go through tl.dot and the group's scale multiplies the partial sums (the scale
        # is constant along K inside a group), so no per-weight scale multiply is needed.
        pid_t = tl.program_id(0)
        pid_n = tl.program_id(1)
        g = tl.load(tile_expert_ptr + pid_t).to(tl.int64)
        row0 = tl.load(tile_start_ptr + pid_t)
        row_end = tl.load(tile_end_ptr + pid_t)
        rm = row0 + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rg = tl.arange(0, GROUP)
        m_mask = rm < row_end
        n_mask = rn < N
        w_base = w_ptr + g * stride_wg + rn[None, :]
        s_base = s_ptr + g * stride_sg + rn
        x_rows = x_ptr + rm[:, None].to(tl.int64) * stride_xm
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        HALF_GROUPS = HALF_K // GROUP
        for kb in range(0, HALF_K, BLOCK_K):
            for j in tl.static_range(BLOCK_K // GROUP):
                k0 = kb + j * GROUP
                kk = k0 + rg
                packed = tl.load(w_base + kk[:, None].to(tl.int64) * stride_wk, mask=n_mask[None, :], other=0)
                s_lo = tl.load(s_base + (k0 // GROUP) * stride_sk, mask=n_mask, other=0.0).to(tl.float32)
                s_hi = tl.load(s_base + (k0 // GROUP + HALF_GROUPS) * stride_sk, mask=n_mask, other=0.0).to(tl.float32)
                x_lo = tl.load(x_rows + kk[None, :], mask=m_mask[:, None], other=0.0)
                x_hi = tl.load(x_rows + (kk + HALF_K)[None, :], mask=m_mask[:, None], other=0.0)
                if DOT_F32:  # Triton's CPU interpreter computes bf16 tl.dot wrongly (3.9); tests use fp32 dots
                    q_lo = (packed & 0xF).to(tl.float32) - 8.0
                    q_hi = (packed >> 4).to(tl.float32) - 8.0
                    acc += tl.dot(x_lo.to(tl.float32), q_lo) * s_lo[None, :]
                    acc += tl.dot(x_hi.to(tl.float32), q_hi) * s_hi[None, :]
                else:
                    q_lo = ((packed & 0xF).to(tl.float32) - 8.0).to(tl.bfloat16)
                    q_hi = ((packed >> 4).to(tl.float32) - 8.0).to(tl.bfloat16)
                    acc += tl.dot(x_lo, q_lo) * s_lo[None, :]
                    acc += tl.dot(x_hi, q_hi) * s_hi[None, :]
        tl.store(
            y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :],
            acc.to(tl.bfloat16),
            mask=m_mask[:, None] & n_mask[None, :],
        )

    @triton.jit
    def w4a16_grouped_fma(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        tile_expert_ptr,
        tile_start_ptr,
        tile_end_ptr,
        N,
        HALF_K,
        stride_xm,
        stride_wg,
        stride_wk,
        stride_sg,
        stride_sk,
        stride_ym,
        GROUP: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        DOT_F32: tl.constexpr = False,
    ):
        # The same tiles for a few rows per expert (decode): multiply-adds on the CUDA cores in registers
        # instead of tl.dot, whose B operand would take a round trip through shared memory as bf16 (4 bytes of
        # shared-memory traffic per 0.5-byte weight) and which pads the rows to 16.
        pid_t = tl.program_id(0)
        pid_n = tl.program_id(1)
        g = tl.load(tile_expert_ptr + pid_t).to(tl.int64)
        row0 = tl.load(tile_start_ptr + pid_t)
        row_end = tl.load(tile_end_ptr + pid_t)
        rm = row0 + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rg = tl.arange(0, GROUP)
        m_mask = rm < row_end
        n_mask = rn < N
        w_base = w_ptr + g * stride_wg + rn[None, :]
        s_base = s_ptr + g * stride_sg + rn
        x_rows = x_ptr + rm[:, None].to(tl.int64) * stride_xm
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        HALF_GROUPS = HALF_K // GROUP
        for kb in range(0, HALF_K, BLOCK_K):
            for j in tl.static_range(BLOCK_K // GROUP):
                k0 = kb + j * GROUP
                kk = k0 + rg
                packed = tl.load(w_base + kk[:, None].to(tl.int64) * stride_wk, mask=n_mask[None, :], other=0)
                s_lo = tl.load(s_base + (k0 // GROUP) * stride_sk, mask=n_mask, other=0.0).to(tl.float32)
                s_hi = tl.load(s_base + (k0 // GROUP + HALF_GROUPS) * stride_sk, mask=n_mask, other=0.0).to(tl.float32)
                x_lo = tl.load(x_rows + kk[None, :], mask=m_mask[:, None], other=0.0).to(tl.float32)
                x_hi = tl.load(x_rows + (kk + HALF_K)[None, :], mask=m_mask[:, None], other=0.0).to(tl.float32)
                q_lo = (packed & 0xF).to(tl.float32) - 8.0
                q_hi = (packed >> 4).to(tl.float32) - 8.0
                acc += tl.sum(x_lo[:, :, None] * q_lo[None, :, :], axis=1) * s_lo[None, :]
                acc += tl.sum(x_hi[:, :, None] * q_hi[None, :, :], axis=1) * s_hi[None, :]
        tl.store(
            y_ptr + rm[:, None].to(tl.int64) * stride_ym + rn[None, :],
            acc.to(tl.bfloat16),
            mask=m_mask[:, None] & n_mask[None, :],
        )

    @triton.jit
    def w4a16_grouped_gemv(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        tile_expert_ptr,
        tile_start_ptr,
        tile_end_ptr,
        N,
        HALF_K,
        stride_xm,
        stride_wg,
        stride_wk,
        stride_sg,
        stride_sk,
        stride_ym,
        GROUP: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        DOT_F32: tl.constexpr = False,
    ):
        # One row per program (BLOCK_M = 1, decode): a [GROUP, BLOCK_N] fp32 accumulator takes x[k]·q[k, n]·s
        # element by element, and the sum over k happens once at the end, so the inner loop needs no data
        # exchange between threads (the tl.dot and FMA variants reduce, or round-trip through shared memory,
        # once per group).
        pid_t = tl.program_id(0)
        pid_n = tl.program_id(1)
        g = tl.load(tile_expert_ptr + pid_t).to(tl.int64)
        row = tl.load(tile_start_ptr + pid_t).to(tl.int64)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rg = tl.arange(0, GROUP)
        n_mask = rn < N
        w_base = w_ptr + g * stride_wg + rn[None, :]
        s_base = s_ptr + g * stride_sg + rn
        x_row = x_ptr + row * stride_xm
        acc = tl.zeros((GROUP, BLOCK_N), dtype=tl.float32)
        HALF_GROUPS = HALF_K // GROUP
        for kb in range(0, HALF_K, BLOCK_K):
            for j in tl.static_range(BLOCK_K // GROUP):
                k0 = kb + j * GROUP
                kk = k0 + rg
                packed = tl.load(w_base + kk[:, None].to(tl.int64) * stride_wk, mask=n_mask[None, :], other=0)
                s_lo = tl.load(s_base + (k0 // GROUP) * stride_sk, mask=n_mask, other=0.0).to(tl.float32)
                s_hi = tl.load(s_base + (k0 // GROUP + HALF_GROUPS) * stride_sk, mask=n_mask, other=0.0).to(
                    tl.float32
                )
                x_lo = tl.load(x_row + kk).to(tl.float32)
                x_hi = tl.load(x_row + kk + HALF_K).to(tl.float32)
                q_lo = (packed & 0xF).to(tl.float32) - 8.0
                q_hi = (packed >> 4).to(tl.float32) - 8.0
                acc += (q_lo * x_lo[:, None]) * s_lo[None, :] + (q_hi * x_hi[:, None]) * s_hi[None, :]
        tl.store(y_ptr + row * stride_ym + rn, tl.sum(acc, axis=0).to(tl.bfloat16), mask=n_mask)

    configs = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=st)
        for bn, bk, w, st in (
            (32, 128, 4, 4),
            (64, 128, 4, 4),
            (64, 256, 4, 3),
            (128, 128, 4, 4),
            (128, 128, 8, 3),
            (256, 128, 8, 3),
            (128, 128, 8, 2),
            (64, 128, 4, 2),
            (128, 64, 8, 3),
            (64, 64, 4, 3),
        )
    ]

    def smem(c: Any, block_m: int) -> int:
        """Shared memory a config may need, bytes: per stage the x tiles (lo and hi halves, bf16) and the
        packed weights, plus the widened bf16 B operands. An estimate: Triton 3.6 reports a config that does
        not fit only when it is launched (OutOfResources), after the autotuner picked it."""
        bk, bn = c.kwargs["BLOCK_K"], c.kwargs["BLOCK_N"]
        return c.num_stages * (4 * block_m * bk + bk * bn) + 4 * bk * bn

    def prune(configs: list[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        half_k, group = int(named_args["HALF_K"]), int(kwargs.get("GROUP", 32))
        block_m = int(kwargs.get("BLOCK_M", 16))
        ok = [c for c in configs if half_k % c.kwargs["BLOCK_K"] == 0 and c.kwargs["BLOCK_K"] % group == 0]
        fit = [c for c in ok if smem(c, block_m) <= SMEM_BUDGET]
        return fit or sorted(ok or configs, key=lambda c: smem(c, block_m))[:1]

    fma_configs = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=st)
        for bn, bk, w, st in (
            (32, 128, 4, 3),
            (64, 128, 4, 3),
            (64, 256, 4, 2),
            (128, 128, 4, 3),
            (128, 128, 8, 2),
            (256, 128, 8, 2),
        )
    ]
    tuned = triton.autotune(
        configs=configs, key=["N", "HALF_K", "BLOCK_M"], prune_configs_by={"early_config_prune": prune}
    )(w4a16_grouped)
    gemv_configs = [
        triton.Config({"BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=st)
        for bn, bk, w, st in (
            (64, 128, 4, 3),
            (128, 128, 4, 3),
            (256, 128, 8, 3),
            (128, 256, 4, 2),
            (256, 256, 8, 2),
            (64, 256, 4, 4),
        )
    ]
    tuned_gemv = triton.autotune(
        configs=gemv_configs, key=["N", "HALF_K", "BLOCK_M"], prune_configs_by={"early_config_prune": prune}
    )(w4a16_grouped_gemv)
    tuned_fma = triton.autotune(
        configs=fma_configs, key=["N", "HALF_K", "BLOCK_M"], prune_configs_by={"early_config_prune": prune}
    )(w4a16_grouped_fma)
    _KERNELS.update(
        {
            "plain": w4a16_grouped,
            "tuned": tuned,
            "plain_fma": w4a16_grouped_fma,
            "tuned_fma": tuned_fma,
            "plain_gemv": w4a16_grouped_gemv,
            "tuned_gemv": tuned_gemv,
        }
    )
    return _KERNELS


def tile_map(torch: Any, counts: list[int], block_m: int, device: str) -> tuple[Any, Any, Any, int]:
    """Row tiles of an expert-sorted activation matrix: for each expert g with c > 0 rows, ceil(c/block_m)
    tiles; returns (expert [n] int32, start [n] int32, end [n] int32, n). Built once per case, outside the
    timed region (as vLLM's ``moe_align_block_size`` is part of routing)."""
    ex, st, en = [], [], []
    start = 0
    for g, c in enumerate(counts):
        for s in range(start, start + c, block_m):
            ex.append(g)
            st.append(s)
            en.append(start + c)
        start += c
    n = len(ex)

    def t(v: list[int]) -> Any:
        return torch.tensor(v, dtype=torch.int32, device=device)

    return t(ex), t(st), t(en), n


def block_m_for(max_rows: int) -> int:
    """BLOCK_M from the most rows any expert gets: 16 (tl.dot's minimum) up to 64 (an expert with more rows
    gets several tiles; 128-row tiles with 128-wide K steps do not fit in sm90's shared memory)."""
    for b in (16, 32):
        if max_rows <= b:
            return b
    return 64


def w4a16_grouped_mm(
    torch: Any,
    x: Any,
    packed: Any,
    scale: Any,
    group: int,
    tiles: tuple[Any, Any, Any, int],
    block_m: int,
    out: Any,
    *,
    tuned: bool = True,
    block_n: int = 32,
    block_k: int = 128,
    dot_f32: bool = False,
    variant: str = "dot",
) -> Any:
    """``out[rows of g] = x[rows of g] @ dequant(W[g]).T`` for every expert g in one launch.

    x: bf16 [T, K] rows sorted by expert; packed: uint8 [G, K/2, N]; scale: bf16 [G, K/group, N]; tiles: from
    ``tile_map``; out: bf16 [T, N]. ``tuned=False`` launches the plain kernel with ``block_n``/``block_k``
    (tests under TRITON_INTERPRET=1)."""
    k = _kernels()
    ex, st, en, n_tiles = tiles
    G, half_k, N = packed.shape
    if n_tiles == 0:
        return out
    args = (
        x, packed, scale, out, ex, st, en, N, half_k,
        x.stride(0), packed.stride(0), packed.stride(1), scale.stride(0), scale.stride(1), out.stride(0),
    )  # fmt: skip
    if tuned:

        def grid(meta: dict[str, Any]) -> tuple[int, int]:
            return (n_tiles, (N + meta["BLOCK_N"] - 1) // meta["BLOCK_N"])

        k[_KERNEL_NAMES[variant][1]][grid](*args, GROUP=group, BLOCK_M=block_m)
    else:
        k[_KERNEL_NAMES[variant][0]][(n_tiles, (N + block_n - 1) // block_n)](
            *args, GROUP=group, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, DOT_F32=dot_f32
        )
    return out


_KERNEL_NAMES = {"dot": ("plain", "tuned"), "fma": ("plain_fma", "tuned_fma"), "gemv": ("plain_gemv", "tuned_gemv")}


def tuned_config(variant: str, block_m: int) -> list[str]:
    """The autotuner's chosen configs for ``variant`` at ``block_m`` (one per GEMM shape), as text."""
    k = _KERNELS.get(_KERNEL_NAMES[variant][1])
    out = []
    for key, cfg in getattr(k, "cache", {}).items():
        if len(key) >= 3 and key[2] == block_m:
            out.append(f"N={key[0]} K/2={key[1]}: {cfg}")
    return out
