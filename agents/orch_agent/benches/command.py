"""Run a command (an engine build's own benchmark) and hand its output back to orch, which parses it.

Case: ``{"argv": [str, ...], "env": {str: str}, "timeout_s": float, "repeat": int (optional, default the
run's repeat)}`` plus the suite's parameters (ignored here). The argv runs without a shell, ``warmup`` untimed
then ``repeat`` timed times, each in a fresh temporary working directory, with ``env`` added to the agent's
environment. Two tokens are resolved here, in argv items and env values:

- ``{orch_build}``: the deployed build, ``<orch home>/builds/current`` (``~/.orch/builds/current``);
- ``{orch_output}``: a file path in the run's working directory; when the argv or env uses it, the file's
  content (not stdout) is what orch parses — for tools that write results to a file.

Returns ``metrics.wall_ms`` (wall time of each timed run, ms) and ``info``: ``argv`` (resolved), ``exit_status``,
``stdout`` (last 256 KiB of the last run), ``stderr`` (last 4 KiB), ``output`` (the ``{orch_output}`` file's
content, last 256 KiB) when used, and ``outputs`` (what orch parses, one per timed run) when there are several.

A non-zero exit, a run past ``timeout_s`` (its whole process group is killed) or a missing executable raises,
which the worker turns into an error event for the case. The command runs in its own process group so that a
timeout or a cancel (SIGTERM to the worker) kills every process it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from ..stats import summarize
from ..sysinfo import resolve_home

BUILD_TOKEN = "{orch_build}"
OUTPUT_TOKEN = "{orch_output}"
KEEP_BYTES = 256 * 1024
STDERR_KEEP = 4096


class CommandFailed(RuntimeError):
    pass


def _tail(data: bytes, n: int) -> str:
    return data[-n:].decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_once(argv: list[str], env: dict[str, str], cwd: str, timeout_s: float) -> tuple[int, bytes, bytes]:
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise CommandFailed(
            f"cannot run {argv[0]}: {exc.strerror} (is the build deployed? orch deploy --build DIR)"
        ) from None
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise CommandFailed(
            "{} ran past timeout_s={:g} s and was killed; stderr: {}".format(
                argv[0], timeout_s, _tail(err, 1000).strip() or "(empty)"
            )
        ) from None
    except BaseException:  # a cancel (SIGTERM -> Cancelled) or anything else: leave nothing running
        _kill_group(proc)
        proc.wait()
        raise
    _kill_group(proc)  # anything the command left in the background
    return proc.returncode, out, err


def _subst(s: str, build: str, output: str) -> str:
    return s.replace(BUILD_TOKEN, build).replace(OUTPUT_TOKEN, output)


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    argv = case.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("command: case 'argv' must be a non-empty list of strings")
    extra = case.get("env") or {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in extra.items()):
        raise ValueError("command: case 'env' must map strings to strings")
    timeout_s = float(case.get("timeout_s", 600.0))
    repeat = int(case.get("repeat", getattr(ctx, "repeat", 1)))
    warmup = int(getattr(ctx, "warmup", 0))
    build = os.path.join(resolve_home(None), "builds", "current")
    uses_output = any(OUTPUT_TOKEN in a for a in argv) or any(OUTPUT_TOKEN in v for v in extra.values())
    samples = []
    outputs = []
    info: dict[str, Any] = {}
    for i in range(warmup + repeat):
        work = tempfile.mkdtemp(prefix="orch-cmd-")
        try:
            output = os.path.join(work, "output")
            run_argv = [_subst(a, build, output) for a in argv]
            env = dict(os.environ)
            env.update({k: _subst(v, build, output) for k, v in extra.items()})
            t0 = time.perf_counter()
            code, out, err = _run_once(run_argv, env, work, timeout_s)
            wall_ms = (time.perf_counter() - t0) * 1000.0
            if code != 0:
                raise CommandFailed(
                    "{} exited with status {}; stderr: {}".format(
                        " ".join(run_argv[:3]), code, _tail(err, 1000).strip() or "(empty)"
                    )
                )
            text = None
            if uses_output:
                try:
                    with open(output, "rb") as f:
                        text = _tail(f.read(), KEEP_BYTES)
                except OSError:
                    raise CommandFailed(f"{run_argv[0]} exited 0 but wrote no {{output}} file ({output})") from None
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if i < warmup:
            continue
        samples.append(wall_ms)
        stdout = _tail(out, KEEP_BYTES)
        outputs.append(text if text is not None else stdout)
        info = {"argv": run_argv, "exit_status": code, "stdout": stdout, "stderr": _tail(err, STDERR_KEEP)}
        if text is not None:
            info["output"] = text
    if len(outputs) > 1:
        per_run = max(KEEP_BYTES // len(outputs), 8192)
        info["outputs"] = [o[-per_run:] for o in outputs]
    info["timing"] = "wall time of the whole command (time.perf_counter around the process)"
    return {"metrics": {"wall_ms": summarize(samples, "ms")}, "info": info}
