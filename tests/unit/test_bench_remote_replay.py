"""bench/remote_replay.py's pure parts: picking one host's recorded calls and rewriting them for another host and
run, and the no-GPU ``python:`` wrapper's PATH (run for real: the wrapper is a shell script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.remote_replay import describe, for_host, host_commands, nogpu_python

RUN = "01a22f80-4d65-7894-bb33-7936077e4dc8"
RECORDS = [
    {"host": "h0001", "kind": "run", "argv": ["py", "-c", "src", "ensure", "--facts"], "input": None},
    {"host": "h0000", "kind": "run", "argv": ["py", "-c", "src", "ensure", "--facts"], "input": None},
    {"host": "h0000", "kind": "stream", "input": json.dumps({"run_id": RUN, "suite": "noop", "host": "h0000"}),
     "argv": ["py", "/a/agent", "start", "--spec", "-", "--run-id", RUN, "--host", "h0000"]},  # fmt: skip
]


def test_host_commands_keeps_one_hosts_calls_in_order() -> None:
    assert host_commands(RECORDS, "h0000") == RECORDS[1:]


def test_host_commands_refuses_a_missing_host_and_a_run_that_uploaded() -> None:
    with pytest.raises(ValueError, match=r"no remote call of h9 in the log \(hosts there: \['h0000', 'h0001'\]\)"):
        host_commands(RECORDS, "h9")
    put = {"host": "h0000", "kind": "put", "argv": ["/l/agent.pyz", ".orch/agent/x/agent.pyz"], "input": None}
    with pytest.raises(ValueError, match="uploaded files"):
        host_commands([*RECORDS, put], "h0000")


def test_for_host_swaps_the_host_and_run_tokens_and_the_specs_run_id_only() -> None:
    (ensure, start) = for_host(RECORDS[1:], old_host="h0000", new_host="h0042", old_run=RUN, new_run="r2")
    assert ensure == {**RECORDS[1], "host": "h0042"}
    assert start["argv"] == ["py", "/a/agent", "start", "--spec", "-", "--run-id", "r2", "--host", "h0042"]
    # the spec's run id follows; other fields (here a host name inside the spec) are sent as recorded
    assert json.loads(start["input"]) == {"run_id": "r2", "suite": "noop", "host": "h0000"}
    assert RECORDS[2]["argv"][6] == RUN  # the recording itself is not changed


def test_for_host_leaves_stdin_that_is_not_the_spec() -> None:
    cmds = [{"host": "a", "kind": "run", "argv": ["cat"], "input": "not json a"}]
    assert for_host(cmds, old_host="a", new_host="b", old_run=RUN, new_run="r2")[0]["input"] == "not json a"


def test_describe_shows_long_tokens_by_size_and_stdin_bytes() -> None:
    lines = describe(RECORDS[1:2] + [{**RECORDS[2], "argv": ["py", "x" * 100, "start"]}])
    assert lines == [
        "  1. run    py -c src ensure --facts",
        f"  2. stream py '<100 chars: {'x' * 24}...>' start; stdin {len(RECORDS[2]['input'])} B",
    ]


def _smi(bin_dir: Path) -> Path:
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    csv = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi" / "h200x1_fleet.csv"
    smi.write_text(f"#!/bin/sh\nexec /bin/cat {csv}\n")
    smi.chmod(0o755)
    return smi


AGENT_GPUS = "import sys; sys.path.insert(0, sys.argv[1]); from orch_agent import leases; print(leases.gpu_uuids())"


def test_nogpu_python_hides_every_directory_holding_nvidia_smi(tmp_path: Path) -> None:
    _smi(tmp_path / "smi-bin")
    agents = str(Path(__file__).resolve().parents[2] / "agents")
    search = f"{tmp_path / 'smi-bin'}:/usr/bin:/bin"
    # the fake is found where it is not hidden: the agent would lease the H200 it lists
    seen = subprocess.run([sys.executable, "-c", AGENT_GPUS, agents], env={"PATH": search}, capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert seen.stdout.strip() == "['GPU-7decf511-169f-02cd-2add-f6596c2c87d8']"
    wrapper, hidden = nogpu_python(tmp_path / "py", sys.executable, search)
    assert hidden == [str(tmp_path / "smi-bin")]
    res = subprocess.run([wrapper, "-c", AGENT_GPUS, agents], env={"PATH": search}, capture_output=True, text=True,
                         check=True)  # fmt: skip
    assert res.stdout.strip() == "[]"
    path = subprocess.run([wrapper, "-c", "import os; print(os.environ['PATH'])"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    assert path.split(":") == [d for d in ("/usr/bin", "/bin") if d not in hidden]


def test_nogpu_python_without_nvidia_smi_keeps_the_search_path(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    wrapper, hidden = nogpu_python(tmp_path / "py", sys.executable, f"{tmp_path / 'empty'}:/nonexistent")
    assert hidden == []
    out = subprocess.run([wrapper, "-c", "import os; print(os.environ['PATH'])"], capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    assert out == f"{tmp_path / 'empty'}:/nonexistent"
