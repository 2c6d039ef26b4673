"""Suite files a tester found accepted though they cannot be meant: each is a SuiteError naming file:line."""

from __future__ import annotations

import pytest

from orchestrator.errors import SuiteError
from orchestrator.suites.loader import MAX_TIMEOUT_S, parse_suite
from orchestrator.suites.registry import MAX_REPEAT, resolve

BASE = 'name: b\ndescription: d\ncommand: ["x", "{n}"]\nparser: vllm-latency\n'


@pytest.mark.parametrize(
    ("extra", "line", "expected"),
    [
        ("params:\n  n: {type: int, default: 2, min: 5, max: 1, help: h}\n", 6, "min 5 is greater than max 1"),
        ("params:\n  n: {type: float, default: 2, min: 0.5, max: 0.25, help: h}\n", 6, "min 0.5 is greater"),
        ("timeout_s: .inf\n", 5, "timeout_s"),
        ("timeout_s: .nan\n", 5, "timeout_s"),
        (f"timeout_s: {MAX_TIMEOUT_S + 1}\n", 5, "timeout_s"),
        ("repeat: 100000000000\n", 5, "repeat"),
        (f"warmup: {MAX_REPEAT + 1}\n", 5, "warmup"),
    ],
)
def test_out_of_bounds_suite_values_are_refused(extra: str, line: int, expected: str) -> None:
    text = BASE + extra
    if "params:" not in extra:
        text += "params:\n  n: {type: int, default: 2, help: h}\n"
    with pytest.raises(SuiteError) as e:
        parse_suite(text, "s.yaml")
    assert f"s.yaml:{line}:" in e.value.message and expected in e.value.message, e.value.message


def test_bounds_at_their_limits_load() -> None:
    sd = parse_suite(
        BASE + f"timeout_s: {MAX_TIMEOUT_S}\nrepeat: {MAX_REPEAT}\n"
        "params:\n  n: {type: int, default: 3, min: 3, max: 3, help: h}\n"
    )
    assert sd.param("repeat").default == MAX_REPEAT


def test_repeat_beyond_the_bound_on_the_command_line_is_refused() -> None:
    sd = parse_suite(BASE + "params:\n  n: {type: int, default: 2, help: h}\n")
    with pytest.raises(SuiteError) as e:
        resolve(sd, {}, repeat=MAX_REPEAT + 1, cuda=False, run_id="r")
    assert "repeat" in e.value.message
    with pytest.raises(SuiteError):
        resolve(sd, {"repeat": str(MAX_REPEAT + 1)}, cuda=False, run_id="r")
    assert resolve(sd, {}, repeat=MAX_REPEAT, cuda=False, run_id="r")["repeat"] == MAX_REPEAT
