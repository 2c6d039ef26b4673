"""nccl-tests as a suite source: the ``nccl-tests`` parser's one-row-per-case selection on the recorded samples
(tests/fixtures/nccl-tests/), and the packaged ``nccl-allreduce`` / ``nccl-allreduce-text`` suites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.parsers import PARSERS, ParseError
from orchestrator.protocol import Event
from orchestrator.suites.command import command_result
from orchestrator.suites.loader import load_registry
from orchestrator.suites.registry import resolve

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
TEXT = (FIX / "all_reduce_perf_8xh200.txt").read_text()
JSON = (FIX / "all_reduce_perf_8xh200.json").read_text()
P = PARSERS["nccl-tests"]
MIB = 1048576


def _one_size(size: int) -> str:
    """The text sample as ``-b SIZE -e SIZE`` prints it: header, the size's line, footer."""
    return "\n".join(ln for ln in TEXT.splitlines() if ln.startswith("#") or ln.split()[:1] == [str(size)])


def test_text_row_of_the_case_size_out_of_place_headline_in_place_extra() -> None:
    (rec,) = P.parse(TEXT, None, {"size_bytes": MIB})
    assert rec == {
        "size_bytes": MIB, "count": 262144, "type": "float", "redop": "sum",
        "time_us": 18.97, "algbw_gbps": 55.28, "busbw_gbps": 96.73, "wrong": 0,
        "time_us_inplace": 18.48, "algbw_gbps_inplace": 56.74, "busbw_gbps_inplace": 99.30, "wrong_inplace": 0,
    }  # fmt: skip
    assert P.parse(_one_size(MIB), None, {"size_bytes": MIB}) == [rec]
    assert P.parse(_one_size(MIB)) == [rec]  # a case without size_bytes: the output's only row


def test_json_row_of_the_case_size_matches_the_text() -> None:
    (rec,) = P.parse(JSON, None, {"size_bytes": MIB})
    assert (rec["time_us"], rec["algbw_gbps"], rec["busbw_gbps"], rec["wrong"]) == (18.97, 55.275488, 96.732103, 0)
    assert (rec["time_us_inplace"], rec["busbw_gbps_inplace"], rec["wrong_inplace"]) == (18.48, 99.29697, 0)
    (text,) = P.parse(TEXT, None, {"size_bytes": MIB})
    assert text.keys() == rec.keys()
    assert all(text[k] == pytest.approx(v, abs=0.005) for k, v in rec.items() if not isinstance(v, str))
    (last,) = P.parse(JSON, None, {"size_bytes": 8 * 2**30})
    assert last["busbw_gbps"] == 364.386133 and last["busbw_gbps_inplace"] == 373.984594


def test_units_and_headline() -> None:
    assert P.headline[:4] == ("time_us", "algbw_gbps", "busbw_gbps", "wrong")
    assert [P.unit_of(m) for m in P.headline] == ["us", "GB/s", "GB/s", "elements"] * 2 + ["", ""]


@pytest.mark.parametrize(
    ("text", "case", "message"),
    [
        (TEXT, {"size_bytes": 1000}, "0 result rows for size_bytes=1000 (sizes in the output: 8, 16, 32, 64, ..., "
         "4294967296, 8589934592); the command did not measure that size: pass the case's size to the binary "
         "(-b {size_bytes} -e {size_bytes})"),
        (TEXT, {}, "31 result rows where one "
         "case is one message size (sizes in the output: 8, 16, 32, 64, ..., 4294967296, 8589934592); run the "
         "binary with -b SIZE -e SIZE for one size"),
        (JSON, {}, "31 result rows where one case is one message size (sizes in the output: 8, 16, 32, 64, ..., "),
        (_one_size(MIB) + "\n" + _one_size(MIB), {"size_bytes": MIB},
         f"2 result rows for size_bytes={MIB} (sizes in the output: {MIB}, {MIB}); the output holds 2 separate "
         "tables (rows on lines 18, 41): several processes each ran their own test; run one job per case "
         "(nccl-tests built with MPI=1 under mpirun, or one process with -g/-t for several GPUs)"),
        (_one_size(MIB).replace("18.97", "18.9x"), {"size_bytes": MIB},
         "no usable nccl-tests output (nccl-tests line 18: time '18.9x' is not a number)"),
        ("NCCL WARN no GPU\n", {"size_bytes": MIB}, "no usable nccl-tests output (no nccl-tests result line found"),
        ('{"results": [', {"size_bytes": MIB}, "no usable nccl-tests output (nccl-tests JSON: not JSON"),
    ],
)  # fmt: skip
def test_other_than_one_row_for_the_case_or_a_malformed_output_is_an_error(
    text: str, case: dict[str, Any], message: str
) -> None:
    with pytest.raises(ParseError) as exc:
        P.parse(text, None, case)
    assert str(exc.value).startswith(message), str(exc.value)


def _event(case: dict[str, Any], info: dict[str, Any]) -> Event:
    data = {"case_index": 0, "case": case, "metrics": {"wall_ms": {"value": 900.0, "unit": "ms"}}, "info": info}
    return Event(seq=1, type="result", data=data)


def test_packaged_suites_cases_and_stored_metrics() -> None:
    reg = load_registry()
    sd = reg.get("nccl-allreduce")
    assert sd.command is not None and sd.command.parser == "nccl-tests" and sd.sweep == "size_bytes"
    sets = {"size_bytes": "1MiB..2MiB", "binary": "{build}/all_reduce_perf"}
    cases = resolve(sd, sets, cuda=True, run_id="r")["cases"]
    assert [c["size_bytes"] for c in cases] == [MIB, 2 * MIB]
    assert cases[0]["argv"] == [
        "{orch_build}/all_reduce_perf", "-b", "1048576", "-e", "1048576", "-g", "8", "-J", "{orch_output}",
    ]  # fmt: skip
    assert cases[0]["env"] == {"NCCL_NVLS_ENABLE": "0"} and cases[0]["binary"] == "{build}/all_reduce_perf"
    default = resolve(sd, {}, cuda=True, run_id="r")["cases"]
    assert [c["size_bytes"] for c in default] == [8 * 2**i for i in range(31)]
    assert default[0]["argv"][0] == "all_reduce_perf"
    text_case = resolve(reg.get("nccl-allreduce-text"), {"size_bytes": "8"}, cuda=True, run_id="r")["cases"][0]
    assert text_case["argv"] == ["all_reduce_perf", "-b", "8", "-e", "8", "-g", "8"]
    assert text_case["env"] == {"NCCL_NVLS_ENABLE": "0"}

    ev = command_result(sd.command, _event(cases[0], {"stdout": "", "output": JSON}), "b300")
    assert ev.type == "result" and ev.case == {"size_bytes": MIB, "gpus": 8, "binary": "{build}/all_reduce_perf"}
    m = ev.data["metrics"]
    assert {k: (v["value"], v["unit"]) for k, v in m.items()} == {
        "wall_ms": (900.0, "ms"),
        "time_us": (18.97, "us"), "algbw_gbps": (55.275488, "GB/s"), "busbw_gbps": (96.732103, "GB/s"),
        "wrong": (0.0, "elements"), "time_us_inplace": (18.48, "us"), "algbw_gbps_inplace": (56.741126, "GB/s"),
        "busbw_gbps_inplace": (99.29697, "GB/s"), "wrong_inplace": (0.0, "elements"),
    }  # fmt: skip


def test_a_malformed_output_is_a_failed_case_naming_the_problem() -> None:
    sd = load_registry().get("nccl-allreduce-text")
    assert sd.command is not None
    case = {"size_bytes": 1000, "gpus": 8, "binary": "x", "argv": ["x"], "env": {}, "timeout_s": 300.0}
    ev = command_result(sd.command, _event(case, {"stdout": TEXT}), "b300")
    assert ev.type == "error" and ev.data["kind"] == "parse"
    assert ev.data["message"].startswith("parser nccl-tests found 0 result rows for size_bytes=1000 (sizes in")
    assert ev.data["case"] == {"size_bytes": 1000, "gpus": 8, "binary": "x"}


def test_the_older_error_column_table_through_the_text_suite_keeps_every_figure_in_its_column() -> None:
    """Issue 11 item 1: this table was stored as time_us_inplace=0.04 (algbw), busbw_gbps_inplace=1e-06 (error)."""
    from tests.unit.test_nccl_tests_parser import ERROR_COLUMN

    sd = load_registry().get("nccl-allreduce-text")
    assert sd.command is not None
    case = {"size_bytes": 4096, "gpus": 1, "binary": "x", "argv": ["x"], "env": {}, "timeout_s": 300.0}
    ev = command_result(sd.command, _event(case, {"stdout": ERROR_COLUMN}), "b300")
    assert ev.type == "result", ev.data
    assert {k: v["value"] for k, v in ev.data["metrics"].items()} == {
        "wall_ms": 900.0,
        "time_us": 93.73, "algbw_gbps": 0.04, "busbw_gbps": 0.09, "max_error": 1e-06,
        "time_us_inplace": 93.15, "algbw_gbps_inplace": 0.04, "busbw_gbps_inplace": 0.09, "max_error_inplace": 1e-06,
    }  # fmt: skip
    shifted = ERROR_COLUMN.replace("sum    93.73", "sum  -1  93.73")
    ev = command_result(sd.command, _event(case, {"stdout": shifted}), "b300")
    assert ev.type == "error" and ev.data["kind"] == "parse"
    assert ev.data["message"].startswith(
        "parser nccl-tests found no usable nccl-tests output (nccl-tests line 5: 13 columns where the column titles "
        "on line 3 (size count type redop time algbw busbw error time algbw busbw error) name 12"
    ), ev.data["message"]
