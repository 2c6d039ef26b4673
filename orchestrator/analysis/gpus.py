"""GPU spec catalog with sources, and matching on the name ``nvidia-smi`` reports — pure.

Units: memory in GB (1e9 bytes), bandwidth ``mem_bw_gbps`` in GB/s (1e9 bytes/s), compute in *dense* TFLOP/s.
NVIDIA datasheets usually print tensor throughput "with sparsity"; those figures are halved here. Where a
figure is not published the field is ``None`` rather than a guess.

``confidence`` says how much to trust an entry: ``high`` (datasheet figure, checked against a measurement or
several sources), ``medium`` (datasheet, one source or approximate dense figure), ``low`` (sources disagree),
``inventory`` (overridden by the user's inventory ``gpu:`` block).

The figures follow ``shared/REFERENCE.md`` (GPU catalog table); each entry names the datasheet it comes from.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import InventoryError


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU SKU.

    Attributes:
        key: short stable id (``h200``), used in tables and the API.
        name: marketing name.
        nvidia_smi_names: names ``nvidia-smi --query-gpu=name`` prints for this SKU.
        memory_gb: device memory, GB (1e9 B).
        mem_bw_gbps: datasheet memory bandwidth, GB/s (1e9 B/s).
        bf16_dense_tflops / fp8_dense_tflops: dense tensor-core throughput, TFLOP/s; ``None`` if not
        published. l2_mb: L2 cache, MB; ``None`` if not published.
        int8_dense_tops / fp4_dense_tflops: dense INT8 tensor TOPS and dense FP4 tensor TFLOP/s (datasheets
        print both "with sparsity": halved here); ``None`` where the datasheet gives none (Hopper has no FP4).
        peaks_source: where the INT8/FP8/FP4 figures come from.
        interconnect: GPU-to-GPU link.
        source: datasheet title and URL the figures come from.
        confidence: ``high`` | ``medium`` | ``low`` | ``inventory``.
    """

    key: str
    name: str
    nvidia_smi_names: tuple[str, ...]
    memory_gb: float | None
    mem_bw_gbps: float
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    l2_mb: float | None
    interconnect: str
    source: str
    confidence: str
    int8_dense_tops: float | None = None
    fp4_dense_tflops: float | None = None
    peaks_source: str = ""

    def dense_peak_tflops(self, dtype: str) -> float | None:
        """The dense tensor peak a MoE GEMM of weight format ``dtype`` runs at, TFLOP/s (TOPS for int8).

        bf16/fp16 -> ``bf16_dense_tflops``; fp8 -> ``fp8_dense_tflops``; int8 -> ``int8_dense_tops``;
        int4 W4A16 (``int4``, ``int4-g128``): the weights are widened to bf16 and multiplied on the bf16 tensor
        cores -> ``bf16_dense_tflops``; fp4 formats (``mxfp4``, ``nvfp4``) -> ``fp4_dense_tflops``; fp32 and
        unknown names -> None.
        """
        if dtype in ("bf16", "fp16", "int4", "int4-g32", "int4-g128"):
            return self.bf16_dense_tflops
        if dtype == "fp8":
            return self.fp8_dense_tflops
        if dtype == "int8":
            return self.int8_dense_tops
        if dtype in ("fp4", "mxfp4", "nvfp4"):
            return self.fp4_dense_tflops
        return None


_HOPPER_PEAKS = (
    "datasheet: FP8 3,958 TFLOPS and INT8 3,958 TOPS with sparsity (dense half: 1,979); no FP4 on Hopper"
)

CATALOG: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="h100-sxm",
        name="H100 SXM",
        nvidia_smi_names=("NVIDIA H100 80GB HBM3",),
        memory_gb=80,
        mem_bw_gbps=3350,
        bf16_dense_tflops=989,  # datasheet 1979 with sparsity
        fp8_dense_tflops=1979,  # datasheet 3958 with sparsity
        l2_mb=50,
        interconnect="NVLink 4, 900 GB/s",
        source="NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/",
        confidence="high",
        int8_dense_tops=1979,
        peaks_source=_HOPPER_PEAKS + " (NVIDIA H100 datasheet)",
    ),
    GpuSpec(
        key="h200",
        name="H200 SXM",
        nvidia_smi_names=("NVIDIA H200",),
        memory_gb=141,
        mem_bw_gbps=4800,
        bf16_dense_tflops=989,  # datasheet 1979 with sparsity
        fp8_dense_tflops=1979,  # datasheet 3958 with sparsity
        l2_mb=50,
        interconnect="NVLink 4, 900 GB/s",
        source="NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/",
        confidence="high",
        int8_dense_tops=1979,
        peaks_source=_HOPPER_PEAKS + " (NVIDIA H200 datasheet)",
    ),
    GpuSpec(
        key="b200",
        name="B200",
        nvidia_smi_names=("NVIDIA B200",),
        memory_gb=180,
        mem_bw_gbps=8000,
        bf16_dense_tflops=2250,  # HGX B200 per GPU, dense
        fp8_dense_tflops=4500,
        l2_mb=None,
        interconnect="NVLink 5, 1.8 TB/s",
        source="NVIDIA HGX B200 datasheet (per GPU), https://www.nvidia.com/en-us/data-center/hgx/",
        confidence="high",
        int8_dense_tops=4500,
        fp4_dense_tflops=9000,
        peaks_source=(
            "HGX B200 datasheet, 8 GPUs with sparsity: FP4 144 PFLOPS, FP8/FP6 72 PFLOPS, INT8 72 POPS; "
            "per GPU and dense: /8 /2"
        ),
    ),
    GpuSpec(
        key="b300",
        name="B300 (Blackwell Ultra)",
        nvidia_smi_names=("NVIDIA B300 SXM6 AC",),
        memory_gb=288,  # 268-275 GB usable seen in practice
        mem_bw_gbps=8000,
        bf16_dense_tflops=2250,  # approximate; Blackwell Ultra datasheet leads with FP4
        fp8_dense_tflops=4500,
        l2_mb=None,
        interconnect="NVLink 5, 1.8 TB/s",
        source="NVIDIA HGX B300 datasheet (per GPU), https://www.nvidia.com/en-us/data-center/hgx/",
        confidence="medium",
        int8_dense_tops=None,  # Blackwell Ultra cut INT8 tensor throughput; no per-GPU dense figure checked
        fp4_dense_tflops=13500,
        peaks_source=(
            "HGX B300 datasheet, 8 GPUs: FP4 144 PFLOPS with sparsity / 108 PFLOPS dense (13.5 per GPU), "
            "FP8/FP6 72 PFLOPS with sparsity (4.5 dense per GPU); INT8 not taken (not checked)"
        ),
    ),
    GpuSpec(
        key="rtx-pro-6000-ws",
        name="RTX PRO 6000 Blackwell Workstation Edition",
        nvidia_smi_names=("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",),
        memory_gb=96,
        mem_bw_gbps=1792,
        bf16_dense_tflops=504,  # approximate dense figure
        fp8_dense_tflops=1008,
        l2_mb=None,
        interconnect="PCIe 5",
        source=(
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet, "
            "https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/"
        ),
        confidence="medium",
        fp4_dense_tflops=2000,
        peaks_source=(
            "RTX PRO 6000 Blackwell datasheet: 4,000 AI TOPS = FP4 with sparsity (dense 2,000); FP8 ~1,008 "
            "dense as above; INT8 not published"
        ),
    ),
    GpuSpec(
        key="rtx-pro-6000-maxq",
        name="RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        nvidia_smi_names=("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",),
        memory_gb=96,
        mem_bw_gbps=1792,
        bf16_dense_tflops=None,  # lower clocks than the Workstation Edition; no dense figure published
        fp8_dense_tflops=None,
        l2_mb=None,
        interconnect="PCIe 5",
        source=(
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition datasheet, "
            "https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000-max-q/"
        ),
        confidence="medium",
    ),
    GpuSpec(
        key="rtx-pro-6000-server",
        name="RTX PRO 6000 Blackwell Server Edition",
        nvidia_smi_names=("NVIDIA RTX PRO 6000 Blackwell Server Edition",),
        memory_gb=96,
        mem_bw_gbps=1597,  # unverified; some sources print 1792 — override in the inventory if measured
        bf16_dense_tflops=504,
        fp8_dense_tflops=1008,
        l2_mb=None,
        interconnect="PCIe 5",
        source=(
            "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet, "
            "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/"
        ),
        confidence="low",
        fp4_dense_tflops=2000,
        peaks_source=(
            "RTX PRO 6000 Blackwell Server Edition datasheet: 4 PFLOPS FP4 with sparsity (dense 2,000); FP8 "
            "~1,008 dense as above; INT8 not published"
        ),
    ),
)

# Inventory `gpu:` keys -> GpuSpec fields.
OVERRIDE_KEYS: Mapping[str, str] = {
    "peak_mem_gbps": "mem_bw_gbps",
    "bf16_tflops": "bf16_dense_tflops",
    "fp8_tflops": "fp8_dense_tflops",
    "memory_gb": "memory_gb",
    "l2_mb": "l2_mb",
    "name": "name",
}

# Tokens that mark a different form factor of the same chip (H200 NVL is not H200 SXM): a prefix match that
# leaves one of these over is refused rather than guessed.
_VARIANT_TOKENS = frozenset({"nvl", "pcie", "max-q", "maxq", "server", "workstation", "mig"})


def _normalise(name: str) -> list[str]:
    tokens = re.split(r"[\s_]+", name.strip().lower())
    return [t for t in tokens if t and t != "nvidia"]


def _lookup(nvidia_smi_name: str, catalog: tuple[GpuSpec, ...]) -> GpuSpec | None:
    for spec in catalog:
        if nvidia_smi_name in spec.nvidia_smi_names:
            return spec
    reported = _normalise(nvidia_smi_name)
    if not reported:
        return None
    best: tuple[int, GpuSpec] | None = None
    for spec in catalog:
        for alias in spec.nvidia_smi_names:
            known = _normalise(alias)
            if reported == known:
                return spec
            if len(reported) > len(known) and reported[: len(known)] == known:
                rest = reported[len(known) :]
                if _VARIANT_TOKENS.isdisjoint(rest) and (best is None or len(known) > best[0]):
                    best = (len(known), spec)
    return best[1] if best else None


def _override_value(key: str, value: Any) -> float | str:
    if key == "name":
        if not isinstance(value, str) or not value:
            raise InventoryError(f"gpu.{key} must be a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InventoryError(
            f"gpu.{key} must be a positive number, got {value!r}", f"for example `gpu: {{{key}: 1792}}`"
        )
    return float(value)


def match_gpu(
    nvidia_smi_name: str,
    override: Mapping[str, Any] | None = None,
    *,
    catalog: tuple[GpuSpec, ...] = CATALOG,
) -> GpuSpec | None:
    """The spec of the GPU ``nvidia-smi`` names, with the inventory's ``gpu:`` block applied on top.

    Matching: the exact reported name first; then, case-insensitively and ignoring the word "NVIDIA", the same
    tokens, or the longest catalog name that is a token prefix of the reported one — unless what is left names
    another form factor (``NVL``, ``PCIe``, ``Max-Q``, ...), which is treated as unknown rather than guessed.

    ``override`` keys (see ``OVERRIDE_KEYS``): ``peak_mem_gbps`` (GB/s), ``bf16_tflops``, ``fp8_tflops``
    (dense TFLOP/s), ``memory_gb``, ``l2_mb``, ``name``. They take precedence over the catalog (confidence
    becomes ``inventory``). For a SKU not in the catalog, an override with ``peak_mem_gbps`` yields a spec
    keyed ``custom``; without it there is nothing to compare against and the result is ``None``.

    Raises:
        InventoryError: an unknown override key or a value that is not a positive number.
    """
    spec = _lookup(nvidia_smi_name, catalog)
    if not override:
        return spec
    unknown = sorted(set(override) - set(OVERRIDE_KEYS))
    if unknown:
        raise InventoryError(
            f"unknown gpu key(s) {', '.join(unknown)}",
            f"accepted gpu keys: {', '.join(OVERRIDE_KEYS)}; for example `gpu: {{peak_mem_gbps: 1792}}`",
        )
    values = {k: _override_value(k, v) for k, v in override.items()}
    what = ", ".join(f"{k}={v}" for k, v in override.items())

    def num(key: str, current: float | None) -> float | None:
        v = values.get(key)
        return float(v) if v is not None else current

    if spec is None:
        if "peak_mem_gbps" not in values:
            return None
        spec = GpuSpec(
            key="custom",
            name=nvidia_smi_name,
            nvidia_smi_names=(nvidia_smi_name,),
            memory_gb=None,
            mem_bw_gbps=0.0,
            bf16_dense_tflops=None,
            fp8_dense_tflops=None,
            l2_mb=None,
            interconnect="unknown",
            source=f"inventory gpu: {what}",
            confidence="inventory",
        )
        source = spec.source
    else:
        source = f"{spec.source}; overridden by inventory gpu: {what}"
    return dataclasses.replace(
        spec,
        name=str(values.get("name", spec.name)),
        memory_gb=num("memory_gb", spec.memory_gb),
        mem_bw_gbps=num("peak_mem_gbps", spec.mem_bw_gbps) or spec.mem_bw_gbps,
        bf16_dense_tflops=num("bf16_tflops", spec.bf16_dense_tflops),
        fp8_dense_tflops=num("fp8_tflops", spec.fp8_dense_tflops),
        l2_mb=num("l2_mb", spec.l2_mb),
        source=source,
        confidence="inventory",
    )
