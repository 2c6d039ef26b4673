"""The multi-GPU built-in suites resolve into the agent's spec: allreduce (sweep size_bytes), moe-sweep-ep."""

from __future__ import annotations

from orchestrator.suites.registry import resolve


def test_allreduce_cpu_preset_and_nccl_tests_range() -> None:
    cpu = resolve("allreduce", {}, cuda=False, run_id="r")
    assert (cpu["bench"], cpu["preset"], cpu["device"]) == ("allreduce", "cpu", "cpu")
    assert [c["size_bytes"] for c in cpu["cases"]] == [8, 64, 512, 4096, 32768, 262144, 2097152]
    assert cpu["cases"][0] == {"size_bytes": 8, "dtype": "fp32", "world_size": 2, "timeout_s": 600.0}
    gpu = resolve("allreduce", {}, cuda=True, run_id="r")
    sizes = [c["size_bytes"] for c in gpu["cases"]]
    assert sizes[0] == 8 and sizes[-1] == 8 * 2**30 and len(sizes) == 31  # -b 8 -e 8G -f 2
    assert gpu["cases"][0]["world_size"] == 0  # every GPU the host reports
    custom = resolve("allreduce", {"size_bytes": "1MiB..8MiB", "world_size": "4"}, cuda=True, run_id="r")
    assert [c["size_bytes"] for c in custom["cases"]] == [2**20, 2**21, 2**22, 2**23]


def test_moe_sweep_ep_adds_ep_and_leaves_moe_sweep_cases_alone() -> None:
    ep = resolve("moe-sweep-ep", {"ep": "8"}, cuda=True, run_id="r")
    assert ep["bench"] == "moe_gemm" and ep["preset"] == "kimi-k2" and all(c["ep"] == 8 for c in ep["cases"])
    assert resolve("moe-sweep-ep", {}, cuda=False, run_id="r")["cases"][0]["ep"] == 0
    assert "ep" not in resolve("moe-sweep", {}, cuda=True, run_id="r")["cases"][0]
