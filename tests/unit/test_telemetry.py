"""Per-case telemetry: the agent's summary of an ``-lms`` stream (agents/orch_agent/telemetry.py) and the
orchestrator's verdict on it (orchestrator/analysis/telemetry.py), on a stream written in nvidia-smi's
``--format=csv,noheader,nounits`` layout (tests/fixtures/nvidia-smi/lms_power_cap.csv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import telemetry as agent_tel
from orchestrator.analysis.telemetry import Verdict, judge, mark
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


# --- judge and mark on constructed summaries: each rule of the verdict at its edge (issue 19, mutation testing) ---


def test_judge_of_no_summary_is_all_unknown() -> None:
    for tel in (None, [], "x", 3):
        assert judge(tel) == Verdict(None, None, None, 0)


def test_shared_gpu_is_unknown_only_without_samples_and_without_a_process_list() -> None:
    # no GPU sample and no process list: nothing seen, unknown
    assert judge({}) == Verdict(None, None, None, 0)
    assert judge({"samples": 0, "other_processes": None}).shared_gpu is None
    # a process list, even empty, was looked at: shared or not is known although no sample was taken
    assert judge({"other_processes": []}) == Verdict(None, False, None, 0)
    # samples were taken: the GPU was watched, no process list means no other process
    assert judge({"samples": 4}) == Verdict(False, False, None, 4)


def test_judge_names_reasons_in_table_order_with_counts_over_all_samples() -> None:
    tel = {
        "samples": 10,
        "reasons": {"sync_boost": 1, "hw_power_brake_slowdown": 2, "hw_thermal_slowdown": 3, "hw_slowdown": 4,
                    "gpu_idle": 9, "sw_power_cap": 0, "sw_thermal_slowdown": "5"},
    }  # fmt: skip
    v = judge(tel)
    assert v == Verdict(
        True,
        False,
        "HW slowdown in 4/10 samples; thermal (HW) in 3/10 samples; power brake in 2/10 samples; "
        "sync boost in 1/10 samples",
        10,
    )
    # a count of 0, a count that is not an integer, and a reasons value that is not an object: no reason
    assert judge({"samples": 10, "reasons": {"sw_power_cap": 0, "sw_thermal_slowdown": "5"}}).reason is None
    assert judge({"samples": 10, "reasons": ["sw_power_cap"]}) == Verdict(False, False, None, 10)
    # one sample, power capped: 1/1
    assert judge({"samples": 1, "reasons": {"sw_power_cap": 1}}).reason == "power cap in 1/1 samples"


def test_low_clock_samples_with_the_agents_ratio_or_90_percent() -> None:
    assert judge({"samples": 10, "low_clock_samples": 2}) == Verdict(
        True, False, "SM clock under 90% of max in 2/10 busy samples", 10
    )
    assert (
        judge({"samples": 10, "low_clock_samples": 1, "low_clock_ratio": 0.85}).reason
        == "SM clock under 85% of max in 1/10 busy samples"
    )
    assert judge({"samples": 10, "low_clock_samples": 0}) == Verdict(False, False, None, 10)
    assert judge({"samples": 10, "low_clock_samples": "2"}) == Verdict(False, False, None, 10)


def test_a_reason_without_samples_is_not_a_verdict() -> None:
    # counts but no sample total (a broken summary): throttled stays unknown
    v = judge({"reasons": {"sw_power_cap": 3}, "low_clock_samples": 1})
    assert (v.throttled, v.shared_gpu, v.samples) == (None, None, 0)
    assert judge({"samples": "6", "reasons": {"sw_power_cap": 3}}).throttled is None


def test_shared_gpu_names_at_most_three_processes_and_skips_malformed_entries() -> None:
    others = [{"pid": 1, "name": "a"}, "junk", {"pid": 2, "name": "b"}, {"pid": 3}, {"pid": 4, "name": "d"}]
    v = judge({"samples": 5, "other_processes": others, "reasons": {"hw_slowdown": 1}})
    assert v == Verdict(True, True, "HW slowdown in 1/5 samples; shared GPU with pid 1 (a), pid 2 (b), pid 3 (None)", 5)
    # only entries that are not objects: nothing shared
    assert judge({"samples": 5, "other_processes": ["junk", 7]}) == Verdict(False, False, None, 5)


def test_verdict_to_info_keys() -> None:
    assert Verdict(True, False, "power cap in 1/1 samples", 1).to_info() == {
        "throttled": True,
        "shared_gpu": False,
        "throttle_reason": "power cap in 1/1 samples",
    }


def test_mark_keeps_the_event_and_its_info_and_adds_the_verdict() -> None:
    tel = {"samples": 2, "reasons": {"sw_power_cap": 1}}
    ev = Event(seq=7, type="result", ts=12.5, v=1, data={"case": {"M": 1}, "metrics": {"x": 1},
                                                          "info": {"engine": "e", "telemetry": tel}})  # fmt: skip
    out = mark(ev)
    assert (out.seq, out.type, out.ts, out.v) == (7, "result", 12.5, 1)
    assert out.data == {
        "case": {"M": 1},
        "metrics": {"x": 1},
        "info": {"engine": "e", "telemetry": tel, "throttled": True, "shared_gpu": False,
                 "throttle_reason": "power cap in 1/2 samples"},
    }  # fmt: skip
    assert ev.data["info"] == {"engine": "e", "telemetry": tel}  # the input event is not changed
    err = mark(Event(seq=8, type="error", ts=13.0, data={"message": "boom", "telemetry": tel}))
    assert (err.seq, err.type, err.ts) == (8, "error", 13.0)
    assert err.data == {
        "message": "boom",
        "telemetry": tel,
        "info": {"throttled": True, "shared_gpu": False, "throttle_reason": "power cap in 1/2 samples",
                 "telemetry": tel},
    }  # fmt: skip


def test_mark_passes_events_without_a_telemetry_object() -> None:
    for ev in (
        Event(seq=1, type="result", data={"info": {"telemetry": "x"}}),
        Event(seq=1, type="result", data={"info": {}}),
        Event(seq=1, type="result", data={"info": ["telemetry"]}),
        Event(seq=1, type="result", data={}),
        Event(seq=1, type="error", data={"telemetry": None}),
        Event(seq=1, type="error", data={"info": {"telemetry": {"samples": 1}}}),  # an error's telemetry is top-level
        Event(seq=1, type="done", data={"telemetry": {"samples": 1}}),
    ):
        assert mark(ev) is ev
