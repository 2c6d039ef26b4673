"""Slurm's argv, the job script and the parsers of squeue/sacct/sinfo --json (recorded from Slurm 22.05 in
tests/fixtures/slurm/) — orchestrator/slurm/jobs.py, pure."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from orchestrator.slurm import jobs
from orchestrator.slurm.config import SlurmGroup, SlurmOptions

FIX = Path(__file__).parent.parent / "fixtures" / "slurm"


def _group(**opts: object) -> SlurmGroup:
    return SlurmGroup("h200", SlurmOptions.model_validate(opts), "login-0", python="/opt/venv/bin/python3")


def test_squeue_pending_running_and_ended_jobs_from_a_real_22_05_answer() -> None:
    text = (FIX / "squeue-22.05.json").read_text()
    assert jobs.parse_squeue(text, "4") == jobs.JobState("4", "PENDING", "PartitionConfig", "", 60, "squeue")
    held = jobs.parse_squeue(text, "5")
    assert held is not None and held.pending and held.reason == "JobHeldUser"
    running = jobs.parse_squeue(text, "3")
    assert running is not None and (running.state, running.reason, running.nodes) == ("RUNNING", None, "vm")
    assert not running.pending and not running.terminal
    ended = jobs.parse_squeue(text, "2")  # listed until MinJobAge passes
    assert ended is not None and ended.terminal and ended.state == "COMPLETED"
    assert jobs.parse_squeue(text, "99") is None


def test_sacct_terminal_states_with_the_schedulers_reason() -> None:
    text = (FIX / "sacct-22.05-completed-cancelled.json").read_text()
    done = jobs.parse_sacct(text, "2")
    assert done is not None and (done.state, done.reason, done.nodes, done.source) == ("COMPLETED", None, "vm",
                                                                                      "sacct")  # fmt: skip
    cancelled = jobs.parse_sacct(text, "4")
    assert cancelled is not None and (cancelled.state, cancelled.reason, cancelled.nodes) == (
        "CANCELLED", "PartitionConfig", "")  # "None assigned": it never ran  # fmt: skip
    assert cancelled.describe() == (
        "Slurm job 4 CANCELLED: the job was cancelled (scancel, orch cancel or an administrator) "
        "(reason PartitionConfig)"
    )


def test_sacct_takes_the_last_record_of_a_requeued_job() -> None:
    doc = {"jobs": [{"job_id": 7, "state": {"current": "PREEMPTED", "reason": "None"}, "nodes": "a"},
                    {"job_id": 7, "state": {"current": "RUNNING", "reason": "None"}, "nodes": "b"}]}  # fmt: skip
    js = jobs.parse_sacct(json.dumps(doc), "7")
    assert js is not None and (js.state, js.nodes) == ("RUNNING", "b")


@pytest.mark.parametrize("text", ["", "not json", "[1]", '{"errors": [{"error": "Invalid job id"}], "jobs": []}'])
def test_unreadable_answers_raise_a_parse_error_naming_the_command(text: str) -> None:
    with pytest.raises(jobs.SlurmParseError, match="squeue"):
        jobs.parse_squeue(text, "1")


def test_timeout_names_the_limit() -> None:
    js = jobs.JobState("12", "TIMEOUT", None, "gpu01", 30, "sacct")
    assert js.describe() == "Slurm job 12 TIMEOUT: the job was killed at its time limit (30 min)"


@pytest.mark.parametrize(
    ("state", "verdict", "expected"),
    [
        ("COMPLETED", "completed", ("completed", None)),
        ("COMPLETED", "failed", ("failed", None)),  # the agent's own verdict stands in a completed job
        ("TIMEOUT", "completed", ("completed", None)),  # this node finished before another one timed out
        ("TIMEOUT", "cancelled", ("failed", "Slurm job 9 TIMEOUT")),  # SIGTERM at the limit: done "cancelled"
        ("TIMEOUT", "failed", ("failed", "Slurm job 9 TIMEOUT")),
        ("CANCELLED", "cancelled", ("cancelled", "Slurm job 9 CANCELLED")),
        ("NODE_FAIL", "failed", ("failed", "Slurm job 9 NODE_FAIL")),
        ("OUT_OF_MEMORY", "failed", ("failed", "Slurm job 9 OUT_OF_MEMORY")),
        ("PREEMPTED", "failed", ("failed", "Slurm job 9 PREEMPTED")),
        ("FAILED", "failed", ("failed", "Slurm job 9 FAILED")),
    ],
)
def test_node_outcome_maps_terminal_states(state: str, verdict: str, expected: tuple[str, str | None]) -> None:
    status, error = jobs.node_outcome(jobs.JobState("9", state), verdict)
    assert status == expected[0]
    if expected[1] is None:
        assert error is None
    else:
        assert error is not None and error.startswith(expected[1] + ":")


def test_sinfo_node_states_and_reasons() -> None:
    [idle_alloc] = jobs.parse_sinfo((FIX / "sinfo-22.05-alloc.json").read_text(), "cpu")
    assert idle_alloc.usable and idle_alloc.reason == ""
    [drain] = jobs.parse_sinfo((FIX / "sinfo-22.05-draining.json").read_text())
    assert (drain.state, drain.flags, drain.reason) == ("mixed", ("DRAIN",), "gpu 3 xid 79")
    assert not drain.usable
    assert jobs.parse_sinfo((FIX / "sinfo-22.05-alloc.json").read_text(), "gpu") == []


def test_sbatch_parsable_with_and_without_cluster() -> None:
    assert jobs.parse_sbatch("123\n") == "123"
    assert jobs.parse_sbatch("123;orchtest\n") == "123"
    with pytest.raises(jobs.SlurmParseError, match="not a job id"):
        jobs.parse_sbatch("sbatch: error: Batch job submission failed\n")


def test_sbatch_argv_carries_every_option_as_one_element() -> None:
    g = _group(partition="gpu", account="ml", nodes=2, gpus_per_node=8, time="00:30:00", constraint="h200&ib",
               reservation="bench", qos="high")  # fmt: skip
    argv = jobs.sbatch_argv(g, "/shared/runs/r1/_slurm", "/shared/runs/r1/_slurm/job.sh", "run-0123456789")
    assert argv[:2] == ["sbatch", "--parsable"]
    for opt in ("--nodes=2", "--partition=gpu", "--account=ml", "--time=00:30:00", "--constraint=h200&ib",
                "--reservation=bench", "--qos=high", "--gpus-per-node=8", "--ntasks-per-node=1", "--no-requeue",
                "--chdir=/shared/runs/r1/_slurm", "--output=/shared/runs/r1/_slurm/slurm-%j.out"):  # fmt: skip
        assert opt in argv
    assert argv[-1] == "/shared/runs/r1/_slurm/job.sh"
    assert "--account" not in " ".join(jobs.sbatch_argv(_group(), "/d", "/d/j.sh", "r"))  # unset: cluster default


def test_job_script_quotes_every_argument() -> None:
    g = SlurmGroup("h200", SlurmOptions(nodes=3), "login-0", python="/opt/my venv/bin/python3")
    text = jobs.batch_script(g, agent="/home/u/.orch/agent/abc/agent.pyz", spec="/shared/x; rm -rf ~/spec.json",
                             orch_home="/shared/orch home", run_id="r1")  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh" and "set -eu" in lines
    srun = shlex.split(lines[-1])
    assert srun == ["srun", "--nodes=3", "--ntasks=3", "--ntasks-per-node=1", "--kill-on-bad-exit=0",
                    "/opt/my venv/bin/python3", "/home/u/.orch/agent/abc/agent.pyz", "slurm-task", "--spec",
                    "/shared/x; rm -rf ~/spec.json", "--orch-home", "/shared/orch home"]  # fmt: skip


def test_node_local_agent_dir_is_filled_with_sbcast_first() -> None:
    g = SlurmGroup("h200", SlurmOptions(nodes=2), "login-0", agent_dir="/local/orch")
    text = jobs.batch_script(g, agent="/home/u/a.pyz", spec="/s/spec.json", orch_home="/s", run_id="r1",
                             node_agent="/local/orch/agent-1.pyz")  # fmt: skip
    cmds = [shlex.split(x) for x in text.splitlines() if not x.startswith("#") and x != "set -eu"]
    assert cmds[0][-3:] == ["mkdir", "-p", "/local/orch"]
    assert cmds[1] == ["sbcast", "--force", "/home/u/a.pyz", "/local/orch/agent-1.pyz"]
    assert cmds[2][cmds[2].index("python3") + 1] == "/local/orch/agent-1.pyz"


def test_multinode_launcher_one_rank_per_gpu_across_the_allocation() -> None:
    assert jobs.multinode_launcher(4, 8, mpi="pmix") == [
        "srun", "--nodes=4", "--ntasks=32", "--ntasks-per-node=8", "--mpi=pmix"]  # fmt: skip
    assert jobs.multinode_launcher(2, 1) == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]
    with pytest.raises(ValueError, match="must be >= 1"):
        jobs.multinode_launcher(0, 8)


def test_hostnames_are_checked() -> None:
    assert jobs.parse_hostnames("gpu01\ngpu02\n") == ["gpu01", "gpu02"]
    with pytest.raises(jobs.SlurmParseError, match="not a node name"):
        jobs.parse_hostnames("gpu01\n../etc\n")


def test_cases_spanning_nodes_get_the_launcher_and_one_agent_on_the_batch_host() -> None:
    from orchestrator.slurm.multinode import across_allocation, spans_nodes
    from orchestrator.suites.loader import load_registry

    g = SlurmGroup("h200", SlurmOptions(nodes=4, gpus_per_node=8), "login-0")
    spec = {"run_id": "r", "cases": [{"size_bytes": 8, "argv": ["all_reduce_perf", "-b", "8", "-g", "8"]}]}
    out = across_allocation(spec, g)
    assert out["cases"][0]["argv"] == ["srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "all_reduce_perf",
                                       "-b", "8", "-g", "8"]  # fmt: skip
    assert spec["cases"][0]["argv"][0] == "all_reduce_perf"  # the input is left as it was
    with pytest.raises(ValueError, match="needs a command"):
        across_allocation({"cases": [{"M": 1}]}, g)
    reg = load_registry()  # the built-in suites, the YAML ones (nccl-tests) included
    assert spans_nodes(reg, "nccl-allreduce") and spans_nodes(reg, "nccl-allreduce-text")
    assert not spans_nodes(reg, "noop") and not spans_nodes(reg, "sglang-one-batch")
    script = jobs.batch_script(g, agent="/h/a.pyz", spec="/s/spec.json", orch_home="/s", run_id="r", spans=True)
    assert shlex.split(script.splitlines()[-1]) == ["python3", "/h/a.pyz", "slurm-task", "--spec", "/s/spec.json",
                                                   "--orch-home", "/s"]  # fmt: skip
