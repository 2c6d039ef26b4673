"""GPU spec catalog: figures, matching on nvidia-smi names, inventory overrides."""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.analysis.gpus import CATALOG, GpuSpec, match_gpu
from orchestrator.errors import InventoryError


@pytest.mark.parametrize(
    ("reported", "key"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-ws"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-server"),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx-pro-6000-maxq"),
        # normalised: case, surrounding/inner whitespace, without the vendor word
        ("  nvidia   h200 ", "h200"),
        ("H100 80GB HBM3", "h100-sxm"),
        # token prefix: a trailing qualifier that is not another form factor
        ("NVIDIA B200 SXM", "b200"),
    ],
)
def test_match(reported: str, key: str) -> None:
    spec = match_gpu(reported)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    "reported",
    [
        "NVIDIA H200 NVL",  # another form factor of the same chip: not guessed as SXM
        "NVIDIA H100 PCIe",
        "NVIDIA H100 80GB HBM3 MIG 1g.10gb",  # a MIG slice has a fraction of the bandwidth
        "NVIDIA RTX PRO 6000 Blackwell",  # ambiguous
        "NVIDIA H20",  # a prefix of "H200" as text, not as a token
        "Tesla V100-SXM2-16GB",
        "",
    ],
)
def test_no_match(reported: str) -> None:
    assert match_gpu(reported) is None


def test_figures_dense_and_sourced() -> None:
    by_key = {s.key: s for s in CATALOG}
    h200 = by_key["h200"]
    assert (h200.mem_bw_gbps, h200.bf16_dense_tflops, h200.fp8_dense_tflops, h200.memory_gb) == (
        4800,
        989,
        1979,
        141,
    )
    h100 = by_key["h100-sxm"]
    assert (h100.mem_bw_gbps, h100.bf16_dense_tflops, h100.fp8_dense_tflops) == (3350, 989, 1979)
    assert (by_key["b200"].mem_bw_gbps, by_key["b200"].bf16_dense_tflops) == (8000, 2250)
    assert (by_key["b300"].mem_bw_gbps, by_key["b300"].memory_gb) == (8000, 288)
    assert by_key["rtx-pro-6000-ws"].mem_bw_gbps == 1792
    assert by_key["rtx-pro-6000-maxq"].mem_bw_gbps == 1792
    assert by_key["rtx-pro-6000-server"].mem_bw_gbps == 1597
    assert by_key["rtx-pro-6000-server"].confidence == "low"
    for spec in CATALOG:
        assert "https://www.nvidia.com/" in spec.source, spec.key
        assert spec.confidence in {"high", "medium", "low"}
    all_names = [n for s in CATALOG for n in s.nvidia_smi_names]
    assert len(all_names) == len(set(all_names))


def test_override_takes_precedence() -> None:
    spec = match_gpu(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition", {"peak_mem_gbps": 1792, "bf16_tflops": 480}
    )
    assert spec is not None
    assert (spec.key, spec.mem_bw_gbps, spec.bf16_dense_tflops, spec.fp8_dense_tflops) == (
        "rtx-pro-6000-server",
        1792.0,
        480.0,
        1008,
    )
    assert spec.confidence == "inventory"
    assert spec.source.endswith("overridden by inventory gpu: peak_mem_gbps=1792, bf16_tflops=480")
    assert match_gpu("NVIDIA H200", {}) == match_gpu("NVIDIA H200")


def test_override_fills_in_unknown_sku() -> None:
    spec = match_gpu("NVIDIA GB300", {"peak_mem_gbps": 8000, "name": "GB300 superchip GPU"})
    assert spec is not None
    assert (spec.key, spec.name, spec.mem_bw_gbps, spec.bf16_dense_tflops) == (
        "custom",
        "GB300 superchip GPU",
        8000.0,
        None,
    )
    assert spec.source == "inventory gpu: peak_mem_gbps=8000, name=GB300 superchip GPU"
    assert match_gpu("NVIDIA GB300", {"bf16_tflops": 2500}) is None  # nothing to compare bandwidth against


def test_override_rejects_bad_input() -> None:
    with pytest.raises(InventoryError, match="unknown gpu key") as exc:
        match_gpu("NVIDIA H200", {"peak_bw": 4800})
    assert "peak_mem_gbps" in exc.value.hint
    with pytest.raises(InventoryError, match=r"gpu.peak_mem_gbps must be a positive number, got -1"):
        match_gpu("NVIDIA H200", {"peak_mem_gbps": -1})
    with pytest.raises(InventoryError, match="positive number"):
        match_gpu("NVIDIA H200", {"peak_mem_gbps": True})


# --- what mutation testing found unchecked (docs/testing.md, "gpus.py (session 5)") ---

_DISTINCT = GpuSpec(  # every peak a different number, so a dtype routed to the wrong field shows
    key="t",
    name="test",
    nvidia_smi_names=("T",),
    memory_gb=None,
    mem_bw_gbps=1.0,
    bf16_dense_tflops=11.0,
    fp8_dense_tflops=22.0,
    l2_mb=None,
    interconnect="none",
    source="test",
    confidence="low",
    int8_dense_tops=33.0,
    fp4_dense_tflops=44.0,
)


@pytest.mark.parametrize(
    ("dtype", "peak"),
    [
        ("bf16", 11.0),
        ("fp16", 11.0),
        # int4 W4A16 widens the weights to bf16: the bf16 tensor peak
        ("int4", 11.0),
        ("int4-g32", 11.0),
        ("int4-g128", 11.0),
        ("fp8", 22.0),
        ("int8", 33.0),
        ("fp4", 44.0),
        ("mxfp4", 44.0),
        ("nvfp4", 44.0),
        ("fp32", None),
        ("BF16", None),  # names are moe-sweep's, exact
        ("", None),
    ],
)
def test_dense_peak_by_weight_format(dtype: str, peak: float | None) -> None:
    assert _DISTINCT.dense_peak_tflops(dtype) == peak


def test_dense_peaks_of_the_catalog() -> None:
    by_key = {s.key: s for s in CATALOG}
    # H200 datasheet: bf16 1,979 and fp8/int8 3,958 with sparsity -> dense 989 / 1979 / 1979; Hopper has no FP4
    assert [by_key["h200"].dense_peak_tflops(d) for d in ("bf16", "int4", "fp8", "int8", "nvfp4")] == [
        989,
        989,
        1979,
        1979,
        None,
    ]
    # HGX B300, 8 GPUs: FP4 108 PFLOPS dense -> 13,500 per GPU; INT8 not taken
    assert [by_key["b300"].dense_peak_tflops(d) for d in ("mxfp4", "int8")] == [13500, None]


def _spec(key: str, *aliases: str) -> GpuSpec:
    return dataclasses.replace(_DISTINCT, key=key, nvidia_smi_names=aliases)


def test_longest_catalog_prefix_wins_in_either_order() -> None:
    short, long_ = _spec("short", "NVIDIA H100"), _spec("long", "NVIDIA H100 80GB HBM3")
    for catalog in ((short, long_), (long_, short)):
        spec = match_gpu("NVIDIA H100 80GB HBM3 SXM5", catalog=catalog)
        assert spec is not None and spec.key == "long"
    spec = match_gpu("NVIDIA H100 SXM5", catalog=(short, long_))
    assert spec is not None and spec.key == "short"


def test_equal_prefixes_the_first_catalog_entry_wins() -> None:
    # two aliases that normalise to the same tokens ("h200"): the earlier entry is kept, not the later
    first, second = _spec("first", "NVIDIA H200"), _spec("second", "H200")
    spec = match_gpu("NVIDIA H200 SXM", catalog=(first, second))
    assert spec is not None and spec.key == "first"


def test_override_of_every_figure_and_the_rest_kept() -> None:
    spec = match_gpu(
        "NVIDIA H200", {"memory_gb": 144, "l2_mb": 60, "fp8_tflops": 2000, "bf16_tflops": 1000, "name": "H200e"}
    )
    assert spec is not None
    assert (spec.key, spec.name, spec.memory_gb, spec.l2_mb, spec.fp8_dense_tflops, spec.bf16_dense_tflops) == (
        "h200",
        "H200e",
        144.0,
        60.0,
        2000.0,
        1000.0,
    )
    assert spec.mem_bw_gbps == 4800  # not overridden: the catalog's
    only_bw = match_gpu("NVIDIA H200", {"peak_mem_gbps": 4000})
    assert only_bw is not None
    h200 = match_gpu("NVIDIA H200")
    assert h200 is not None
    assert only_bw == dataclasses.replace(
        h200,
        mem_bw_gbps=4000.0,
        confidence="inventory",
        source=h200.source + "; overridden by inventory gpu: peak_mem_gbps=4000",
    )
    assert (only_bw.name, only_bw.memory_gb, only_bw.l2_mb, only_bw.bf16_dense_tflops) == ("H200 SXM", 141, 50, 989)
    assert only_bw.fp8_dense_tflops == 1979


def test_custom_sku_without_a_name_is_named_as_reported() -> None:
    spec = match_gpu("NVIDIA GB300", {"peak_mem_gbps": 8000})
    assert spec == GpuSpec(
        key="custom",
        name="NVIDIA GB300",
        nvidia_smi_names=("NVIDIA GB300",),
        memory_gb=None,
        mem_bw_gbps=8000.0,
        bf16_dense_tflops=None,
        fp8_dense_tflops=None,
        l2_mb=None,
        interconnect="unknown",
        source="inventory gpu: peak_mem_gbps=8000",
        confidence="inventory",
    )


def test_override_bounds_and_messages() -> None:
    # positive means > 0: 0 is refused, a figure below 1 is a figure
    with pytest.raises(InventoryError) as exc:
        match_gpu("NVIDIA H200", {"peak_mem_gbps": 0})
    assert str(exc.value) == "gpu.peak_mem_gbps must be a positive number, got 0"
    assert exc.value.hint == "for example `gpu: {peak_mem_gbps: 1792}`"
    spec = match_gpu("NVIDIA H200", {"l2_mb": 0.5, "memory_gb": 1})
    assert spec is not None and (spec.l2_mb, spec.memory_gb) == (0.5, 1.0)
    for bad in ("", 5):
        with pytest.raises(InventoryError) as exc:
            match_gpu("NVIDIA H200", {"name": bad})
        assert str(exc.value) == f"gpu.name must be a non-empty string, got {bad!r}"
    with pytest.raises(InventoryError) as exc:
        match_gpu("NVIDIA H200", {"peak_bw": 1, "clock": 2})
    assert str(exc.value) == "unknown gpu key(s) clock, peak_bw"
    assert exc.value.hint == (
        "accepted gpu keys: peak_mem_gbps, bf16_tflops, fp8_tflops, memory_gb, l2_mb, name; "
        "for example `gpu: {peak_mem_gbps: 1792}`"
    )
