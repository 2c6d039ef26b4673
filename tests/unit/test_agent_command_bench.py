"""The agent's ``command`` bench over real processes: argv without a shell, tokens, repeat, timeout, failures."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agents.orch_agent.benches import Context, load
from orchestrator.protocol import parse_metric

run_case = load("command")


def _case(code: str, **extra: object) -> dict[str, object]:
    return {"batch": 1, "argv": [sys.executable, "-c", code], "env": {}, "timeout_s": 20.0, **extra}


def test_runs_argv_repeat_times_and_returns_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    code = "import os, sys; print(sys.argv[1:], os.environ['X'], os.getcwd() != os.environ['HOME'])"
    case = _case(code, env={"X": "{orch_build}"})
    case["argv"] = [*case["argv"], "a b", "{orch_build}/bin/x"]  # type: ignore[misc]
    out = run_case(case, Context(repeat=3, warmup=1))
    wall = parse_metric("wall_ms", out["metrics"]["wall_ms"])
    assert wall.unit == "ms" and wall.n == 3 and wall.value > 0
    build = str(tmp_path / ".orch" / "builds" / "current")
    assert out["info"]["stdout"] == f"['a b', '{build}/bin/x'] {build} True\n"
    assert out["info"]["exit_status"] == 0 and out["info"]["argv"][-1] == f"{build}/bin/x"
    assert len(out["info"]["outputs"]) == 3 and "output" not in out["info"]


def test_output_token_file_is_what_gets_parsed() -> None:
    code = "import sys; open(sys.argv[1], 'w').write('{\"x\": 1}\\n'); print('log')"
    case = _case(code)
    case["argv"] = [*case["argv"], "{orch_output}"]  # type: ignore[misc]
    info = run_case(case, Context(repeat=1, warmup=0))["info"]
    assert info["output"] == '{"x": 1}\n' and info["stdout"] == "log\n"
    assert info["parsed"] == "output" and info["outputs"] == ['{"x": 1}\n']
    case["argv"] = [sys.executable, "-c", "pass", "{orch_output}"]
    with pytest.raises(RuntimeError, match=r"exited 0 but wrote no \{output\} file"):
        run_case(case, Context(repeat=1, warmup=0))


def test_nonzero_exit_raises_with_stderr_tail() -> None:
    case = _case("import sys; sys.stderr.write('model not found\\n'); sys.exit(3)")
    with pytest.raises(RuntimeError, match="exited with status 3; stderr: model not found"):
        run_case(case, Context(repeat=1, warmup=0))


def test_a_traceback_puts_its_last_line_first_so_a_one_line_summary_names_the_cause() -> None:
    # the new-user trial: the summary showed "stderr: Traceback (most recent call last):\n  File "<str" only
    case = _case("raise ValueError('negative count')")
    with pytest.raises(RuntimeError) as exc:
        run_case(case, Context(repeat=1, warmup=0))
    first, *rest = str(exc.value).splitlines()
    cause = "exited with status 1: ValueError: negative count"
    assert first.endswith(f"{cause}; stderr: Traceback (most recent call last):"), first
    assert rest[-1] == "ValueError: negative count"  # the whole tail is still there


def test_a_command_killed_by_a_signal_is_named() -> None:
    case = _case("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(RuntimeError, match="was killed by signal KILL; stderr: "):
        run_case(case, Context(repeat=1, warmup=0))


def test_a_command_killed_by_sighup_is_named_though_the_worker_ignores_sighup() -> None:
    """The worker ignores SIGHUP and an ignored signal survives exec: ``sh -c 'echo v: 1; kill -1 $$'`` was stored
    as a success, its SIGHUP ignored. The command now starts with SIGHUP at its default action."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as worker._run sets it
    try:
        ignored = _case("print(open('/proc/self/status').read().split('SigIgn:')[1].split()[0])")
        mask = int(run_case(ignored, Context(repeat=1, warmup=0))["info"]["stdout"].strip(), 16)
        assert not mask & (1 << (signal.SIGHUP - 1)), hex(mask)
        case = _case("import os, signal; print('v: 1', flush=True); os.kill(os.getpid(), signal.SIGHUP)")
        with pytest.raises(RuntimeError, match="was killed by signal HUP"):
            run_case(case, Context(repeat=1, warmup=0))
    finally:
        signal.signal(signal.SIGHUP, before)


def test_missing_executable_names_deploy() -> None:
    with pytest.raises(
        RuntimeError, match=r"cannot run /nonexistent/bin/engine: No such file or directory \(is the build"
    ):
        run_case({"argv": ["/nonexistent/bin/engine"], "timeout_s": 5}, Context(repeat=1, warmup=0))


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"ran past timeout_s=1 s and was killed"):
        run_case(_case(code, timeout_s=1.0), Context(repeat=1, warmup=0))
    assert time.monotonic() - t0 < 15
    child = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the command's child survived the timeout")


def test_large_outputs_stay_in_the_run_dir_and_the_result_stays_small(tmp_path: Path) -> None:
    """20 KB of stdout per run, 5 runs: the result carries excerpts, sizes and sha256; the files hold it all."""
    import hashlib
    import json

    from agents.orch_agent.benches.command import EXCERPT_BYTES

    code = "import sys; sys.stdout.write(''.join('line %05d %s\\n' % (i, 'x' * 40) for i in range(400)))"
    ctx = Context(repeat=5, warmup=2, run_dir=str(tmp_path))
    ctx.case_index = 7
    info = run_case(_case(code), ctx)["info"]
    expected = "".join(f"line {i:05d} {'x' * 40}\n" for i in range(400)).encode()
    assert len(expected) > 20_000
    assert info["outputs_complete"] is False and "outputs" not in info  # 5 x 20 KB: over INLINE_BYTES
    assert len(info["files"]) == 5 and info["parsed"] == "stdout"
    for k, f in enumerate(info["files"]):
        assert f["stdout"] == {
            "path": f"outputs/7/{k}.stdout", "bytes": len(expected), "sha256": hashlib.sha256(expected).hexdigest(),
        }  # fmt: skip
        assert (tmp_path / f["stdout"]["path"]).read_bytes() == expected
        assert f["stderr"]["bytes"] == 0
    assert sorted(p.name for p in (tmp_path / "outputs" / "7").iterdir()) == sorted(
        f"{k}.{s}" for k in range(5) for s in ("stdout", "stderr")
    )  # warmups are not kept
    assert info["stdout"] == expected[-EXCERPT_BYTES:].decode()
    assert info["stdout_head"] == expected[:EXCERPT_BYTES].decode()
    assert len(json.dumps(info)) < 16 * 1024


LATE_WRITER = """
import os, sys, time
st = sys.argv[1]
def wait(name):
    end = time.monotonic() + 30
    while not os.path.exists(os.path.join(st, name)) and time.monotonic() < end:
        time.sleep(0.02)
if not os.path.exists(os.path.join(st, "run0")):
    open(os.path.join(st, "run0"), "w").close()
    print('{"t": 1.0}', flush=True)
    if os.fork() == 0:  # left behind in its own session, writing to run 0's stdout once run 1 has started
        os.setsid()
        wait("go")
        print('{"t": 99.0}', flush=True)
        open(os.path.join(st, "written"), "w").close()
        os._exit(0)
else:
    open(os.path.join(st, "go"), "w").close()
    wait("written")
    print('{"t": 2.0}', flush=True)
"""


def test_the_text_parsed_is_the_file_its_size_and_sha256_describe(tmp_path: Path) -> None:
    """A variant tester's: run 0 left a process that wrote ``{"t": 99.0}`` to run 0's stdout while run 1 ran; the
    agent hashed each file right after its run but read the texts to parse after the last run, so orch parsed
    99.0 while ``info.files`` described the file without it (completed, median 50.5)."""
    import hashlib

    state = tmp_path / "state"
    state.mkdir()
    ctx = Context(repeat=2, warmup=0, run_dir=str(tmp_path / "run"))
    info = run_case({**_case(LATE_WRITER), "argv": [sys.executable, "-c", LATE_WRITER, str(state)]}, ctx)["info"]
    assert (state / "written").exists()  # the late write happened, before the case ended
    assert info["outputs"] == ['{"t": 1.0}\n', '{"t": 2.0}\n']
    for text, f in zip(info["outputs"], info["files"], strict=True):
        assert f["stdout"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
        assert f["stdout"]["bytes"] == len(text.encode())
