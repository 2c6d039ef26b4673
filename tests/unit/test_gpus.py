"""GPU spec catalog: figures, matching on nvidia-smi names, inventory overrides."""

from __future__ import annotations

import pytest

from orchestrator.analysis.gpus import CATALOG, match_gpu
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
