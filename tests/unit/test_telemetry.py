"""Per-case telemetry: the agent's summary of an ``-lms`` stream (agents/orch_agent/telemetry.py) and the
orchestrator's verdict on it (orchestrator/analysis/telemetry.py), on a stream written in nvidia-smi's
``--format=csv,noheader,nounits`` layout (tests/fixtures/nvidia-smi/lms_power_cap.csv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import telemetry as agent_tel
from orchestrator.analysis.telemetry import judge, mark
from orchestrator.protocol import Event

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"


def summary_of(text: str, *, reason: str | None = "clocks_event_reasons.active") -> dict[str, Any]:
    tel = agent_tel.CaseTelemetry(["0"], 100, exe="/nonexistent/nvidia-smi")
    tel._reason = reason
    for i, line in enumerate(text.splitlines()):
        tel.add_line(line, i * 0.1)
    return tel.summary()


def test_summary_counts_reasons_and_low_clocks() -> None:
    s = summary_of((SMI / "lms_power_cap.csv").read_text())
    assert s["samples"] == 6
    assert s["reasons"] == {"sw_power_cap": 3, "sw_thermal_slowdown": 1, "gpu_idle": 1}
    assert s["throttle_samples"] == 3
    # busy samples under 0.9 x 1980 = 1782 MHz: 1755 and 1605 (the idle 345 MHz sample does not count)
    assert s["low_clock_samples"] == 2
    assert s["fields"]["clocks.sm"] == {"min": 345.0, "median": 1792.5, "max": 1980.0, "unit": "MHz"}
    assert s["fields"]["power.draw"]["max"] == 700.12 and s["fields"]["temperature.gpu"]["max"] == 58.0
    assert s["series"]["rows"][3] == [300, "0", 1755.0, 3201.0, 700.12, 55.0, 100.0, 4]


def test_series_is_bounded() -> None:
    line = (SMI / "lms_power_cap.csv").read_text().splitlines()[0]
    s = summary_of("\n".join([line] * 1000))
    assert s["samples"] == 1000 and len(s["series"]["rows"]) == agent_tel.SERIES_MAX_ROWS


def test_verdict_names_each_reason_with_its_share() -> None:
    v = judge(summary_of((SMI / "lms_power_cap.csv").read_text()))
    assert (v.throttled, v.shared_gpu) == (True, False)
    assert v.reason == (
        "power cap in 3/6 samples; thermal (SW) in 1/6 samples; SM clock under 90% of max in 2/6 busy samples"
    )


def test_idle_and_application_clock_reasons_are_not_throttling() -> None:
    rows = "\n".join(
        f"0, GPU-x, 1410, 1593, 90.0, 400.00, 30, {util}, 0, 1980, {mask}"
        for util, mask in ((0, "0x0000000000000001"), (100, "0x0000000000000002"), (0, "0x0000000000000000"))
    )
    v = judge(summary_of(rows))
    assert (v.throttled, v.reason) == (False, None)


def test_no_samples_is_unknown_not_fine() -> None:
    tel = agent_tel.CaseTelemetry(["0"], 100, exe="")
    s = tel.start().stop()
    assert s["error"] == "nvidia-smi not found: no GPU telemetry"
    assert judge(s).throttled is None
    assert judge(None).throttled is None and judge({"samples": "x"}).throttled is None


def test_shared_gpu_is_marked_apart_from_throttling() -> None:
    s = summary_of("0, GPU-x, 1980, 3201, 600.0, 700.00, 50, 100, 70, 1980, 0x0")
    s["other_processes"] = [{"pid": 4242, "name": "python3", "gpu_uuid": "GPU-x", "used_memory_mib": 1000}]
    v = judge(s)
    assert (v.throttled, v.shared_gpu, v.reason) == (False, True, "shared GPU with pid 4242 (python3)")


def test_mark_adds_the_verdict_to_result_info_and_error_info() -> None:
    tel = summary_of((SMI / "lms_power_cap.csv").read_text())
    res = mark(Event(seq=3, type="result", data={"case": {"M": 1}, "metrics": {}, "info": {"telemetry": tel}}))
    assert res.data["info"]["throttled"] is True and res.data["info"]["telemetry"] is tel
    err = mark(Event(seq=4, type="error", data={"case": {"M": 2}, "message": "x", "telemetry": tel}))
    assert err.data["info"]["throttled"] is True and err.data["info"]["telemetry"] is tel
    plain = Event(seq=5, type="log", data={"message": "hi"})
    assert mark(plain) is plain


@pytest.mark.parametrize(
    ("case", "env", "ids"),
    [({"M": 1}, None, ["0"]), ({"gpus": 4}, None, ["0", "1", "2", "3"]), ({"gpus": 2}, "GPU-a,GPU-b,GPU-c",
     ["GPU-a", "GPU-b"]), ({"gpus": True}, "3", ["3"])],
)  # fmt: skip
def test_case_gpus(case: dict[str, Any], env: str | None, ids: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    if env is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    assert agent_tel.case_gpus(case) == ids


def test_recorded_h200_idle_stream_is_not_throttled() -> None:
    s = summary_of((SMI / "h200_lms_idle.csv").read_text())
    assert s["samples"] == 20 and s["reasons"] == {"gpu_idle": 20}
    assert s["fields"]["clocks.sm"]["max"] == 345.0 and s["low_clock_samples"] == 0
    assert judge(s).throttled is False
