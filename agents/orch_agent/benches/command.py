"""Run a command (an engine build's own benchmark) and hand its output back to orch, which parses it.

Case: ``{"argv": [str, ...], "env": {str: str}, "timeout_s": float, "repeat": int (optional, default the
run's repeat)}`` plus the suite's parameters (ignored here). The argv runs without a shell, ``warmup`` untimed
then ``repeat`` timed times, each in a fresh temporary working directory, with ``env`` added to the agent's
environment. Two tokens are resolved here, in argv items and env values:

- ``{orch_build}``: the deployed build, ``~/.orch/builds/current`` (deploy keeps builds under the login home);
- ``{orch_output}``: a file path in the run's working directory; when the argv or env uses it, the file's
  content (not stdout) is what orch parses — for tools that write results to a file.

**Outputs stay on the host.** Each timed run's stdout and stderr go straight to files (no pipe, no copy in
memory) under ``<run_dir>/outputs/<case_index>/`` — ``<k>.stdout``, ``<k>.stderr`` and ``<k>.output`` (the
``{orch_output}`` file, moved there) for timed run ``k`` — where ``agent logs`` reads them for ``orch runs logs``
and for orch's parsers. The result line stays small whatever the tool prints: ``info`` holds

- ``argv`` (resolved), ``exit_status``, ``parsed`` (``"stdout"`` or ``"output"``: the stream orch parses);
- ``files``: per timed run ``{"stdout"|"stderr"|"output": {"path" (relative to the run directory), "bytes",
  "sha256"}}``;
- excerpts of the last timed run, each at most :data:`EXCERPT_BYTES`: ``stdout`` / ``stderr`` / ``output``
  (the tail) and ``stdout_head`` (the head, when the stream is longer than one excerpt);
- ``outputs``: the whole text orch parses, one per timed run, when all of them together fit in
  :data:`INLINE_BYTES`; otherwise ``outputs_complete: false`` and orch fetches them (``agent logs --parsed``)
  before it parses, so parsing sees the whole output at any size.

``metrics.wall_ms`` is the wall time of each timed run (ms). A non-zero exit, a run past ``timeout_s`` (its whole
process group is killed) or a missing executable raises, which the worker turns into an error event for the case.
The command runs in its own process group inside the worker's session, with ``PR_SET_PDEATHSIG`` and the run's
cookie in its environment (``ORCH_RUN_COOKIE``, see ``reaper.py``): a timeout, a cancel, or the worker's death kills
every process it started, one that called ``setsid`` included (unless it also dropped the cookie).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from ..reaper import COOKIE_ENV, child_setup, current_cookie, kill_cookie
from ..stats import summarize
from ..sysinfo import resolve_home

BUILD_TOKEN = "{orch_build}"
OUTPUT_TOKEN = "{orch_output}"
EXCERPT_BYTES = 4096  # each head/tail excerpt in a result line
INLINE_BYTES = 64 * 1024  # all timed runs' parsed text together, above which orch fetches it from the host
STREAMS = ("stdout", "stderr", "output")


class CommandFailed(RuntimeError):
    """The command failed in a way its message fully describes (exit status, timeout, a write refused): an
    expected failure, reported without the agent's own traceback (``expected``, read by worker.py)."""

    expected = True


LOW_SPACE_BYTES = 64 * 1024
"""Free bytes on the outputs' file system below which a failed command is said to have likely hit ENOSPC: the
tool writes straight into ``outputs/`` (no pipe through the agent), so its failed write is seen only as its exit
status (Python exits 120 when flushing stdout fails) — a write refused for want of space leaves less than a few
blocks free. 64 KiB: 16 pages of 4 KiB, the block size of ext4, xfs and tmpfs by default."""


def space_note(out_dir: str, paths: list[str]) -> str:
    """`` (...)`` naming ENOSPC, the file system's free bytes and the outputs written so far, when the file system
    holding ``out_dir`` has less than :data:`LOW_SPACE_BYTES` free (or no free inode); else ``""``."""
    try:
        st = os.statvfs(out_dir)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    if free >= LOW_SPACE_BYTES and st.f_favail != 0:
        return ""
    written = ", ".join(f"{p} ({os.path.getsize(p):,} bytes)" for p in paths if os.path.exists(p))
    return (
        f" (the file system holding {out_dir} is full: {free:,} bytes free"
        f"{'' if st.f_favail else ', no free inode'}; the command's writes to {written or 'its outputs'} likely "
        "failed with ENOSPC, No space left on device: free space there, or point the host's orch_home elsewhere)"
    )


def _tail(data: bytes, n: int) -> str:
    return data[-n:].decode("utf-8", "replace")


def with_stderr(what: str, tail: str) -> str:
    """``what`` (how the command ended) and its stderr's tail. A tail of several lines puts its last non-empty
    line first (where Python's traceback and most tools print the error), so a one-line summary of the message
    names the cause: ``bench exited with status 1: ValueError: negative count; stderr: Traceback ...``."""
    tail = tail.strip()
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    if len(lines) > 1:
        return f"{what}: {lines[-1][:200]}; stderr: {tail}"
    return "{}; stderr: {}".format(what, tail or "(empty)")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the command's process group, then every process carrying the run's cookie (one that left the
    group and the worker's session with ``setsid``: see ``reaper.py``)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_cookie(current_cookie())


def _read_tail(path: str, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - n))
        return f.read()


def _file_info(path: str, rel: str, keep: list[bytes] | None = None, keep_max: int = 0) -> dict[str, Any]:
    """``{"path": rel, "bytes", "sha256"}`` of ``path``, read in 1 MiB chunks. ``keep``: the bytes read are
    appended to it as one item when the file holds at most ``keep_max`` bytes (else nothing is appended): the text
    orch parses is the one these figures describe, read once (a process the command left behind could write to
    the file after it was hashed)."""
    h = hashlib.sha256()
    size = 0
    chunks: list[bytes] = []
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
            if keep is not None and size <= keep_max:
                chunks.append(chunk)
    if keep is not None and size <= keep_max:
        keep.append(b"".join(chunks))
    return {"path": rel, "bytes": size, "sha256": h.hexdigest()}


def _run_once(argv: list[str], env: dict[str, str], cwd: str, timeout_s: float, out_path: str, err_path: str) -> int:
    """Run ``argv`` with stdout/stderr written to the two files; returns the exit status."""
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                preexec_fn=child_setup(),  # own process group in the worker's session; dies with the worker
            )
    except OSError as exc:
        if exc.filename in (out_path, err_path):
            raise CommandFailed(f"cannot write {exc.filename}: {exc.strerror}") from None
        raise CommandFailed(
            f"cannot run {argv[0]}: {exc.strerror} (is the build deployed? orch deploy --build DIR)"
        ) from None
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()
        raise CommandFailed(
            with_stderr(
                f"{argv[0]} ran past timeout_s={timeout_s:g} s and was killed",
                _tail(_read_tail(err_path, 1000), 1000),
            )
        ) from None
    except BaseException:  # a cancel (SIGTERM -> Cancelled) or anything else: leave nothing running
        _kill_group(proc)
        proc.wait()
        raise
    _kill_group(proc)  # anything the command left in the background
    return proc.returncode


def ended(code: int) -> str:
    """How a process ended, for messages: ``exited with status 3``, or ``was killed by signal KILL`` for
    Popen's negative returncode (never a raw ``-9``)."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name[3:]
    except ValueError:
        name = str(-code)
    return f"was killed by signal {name}"


def _subst(s: str, build: str, output: str) -> str:
    return s.replace(BUILD_TOKEN, build).replace(OUTPUT_TOKEN, output)


def _check_size(path: str, what: str, run_argv: list[str]) -> None:
    try:
        os.stat(path)
    except OSError:
        raise CommandFailed(f"{run_argv[0]} exited 0 but wrote no {{output}} file ({what})") from None


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
    run_dir = getattr(ctx, "run_dir", None)
    scratch = None
    if run_dir is None:  # outside a worker (tests, a hand run): keep the files only while the case runs
        scratch = run_dir = tempfile.mkdtemp(prefix="orch-cmd-outputs-")
    rel_dir = os.path.join("outputs", str(int(getattr(ctx, "case_index", 0) or 0)))
    out_dir = os.path.join(run_dir, rel_dir)
    try:
        try:
            os.makedirs(out_dir, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise CommandFailed(f"cannot write {out_dir}: {exc.strerror}") from None
        samples: list[float] = []
        files: list[dict[str, Any]] = []
        parsed = "output" if uses_output else "stdout"
        texts: list[bytes] = []  # the parsed files as hashed, while they fit in a result line together
        run_argv: list[str] = []
        for i in range(warmup + repeat):
            timed = i >= warmup
            name = str(i - warmup) if timed else f"warmup{i}"
            paths = {s: os.path.join(out_dir, f"{name}.{s}") for s in STREAMS}
            work = tempfile.mkdtemp(prefix="orch-cmd-")
            try:
                output = os.path.join(work, "output")
                run_argv = [_subst(a, build, output) for a in argv]
                env = dict(os.environ)
                env.update({k: _subst(v, build, output) for k, v in extra.items()})
                cookie = current_cookie()
                if cookie is not None:  # the run's cookie, never the case's own value: see reaper.py
                    env[COOKIE_ENV] = cookie
                t0 = time.perf_counter()
                code = _run_once(run_argv, env, work, timeout_s, paths["stdout"], paths["stderr"])
                wall_ms = (time.perf_counter() - t0) * 1000.0
                if code != 0:
                    raise CommandFailed(
                        with_stderr(
                            "{} {}{}".format(
                                " ".join(run_argv[:3]),
                                ended(code),
                                space_note(out_dir, [paths["stdout"], paths["stderr"]]),
                            ),
                            _tail(_read_tail(paths["stderr"], 1000), 1000),
                        )
                    )
                if uses_output:
                    _check_size(output, output, run_argv)
                    try:
                        shutil.move(output, paths["output"])
                    except OSError as exc:
                        raise CommandFailed(f"cannot write {paths['output']}: {exc.strerror}") from None
            finally:
                shutil.rmtree(work, ignore_errors=True)
            if not timed:
                for p in paths.values():
                    if os.path.exists(p):
                        os.unlink(p)
                continue
            samples.append(wall_ms)
            room = INLINE_BYTES - sum(len(t) for t in texts) if len(texts) == len(files) else -1
            files.append(
                {
                    s: _file_info(paths[s], os.path.join(rel_dir, f"{name}.{s}"),
                                  texts if s == parsed else None, room)  # fmt: skip
                    for s in STREAMS
                    if os.path.exists(paths[s])
                }
            )
        info: dict[str, Any] = {"argv": run_argv, "exit_status": 0, "parsed": parsed, "files": files}
        last = str(repeat - 1)
        for s in STREAMS:
            path = os.path.join(out_dir, f"{last}.{s}")
            if not os.path.exists(path):
                continue
            info[s] = _tail(_read_tail(path, EXCERPT_BYTES), EXCERPT_BYTES)
            if s == "stdout" and files[-1][s]["bytes"] > EXCERPT_BYTES:
                with open(path, "rb") as f:
                    info["stdout_head"] = f.read(EXCERPT_BYTES).decode("utf-8", "replace")
        if len(texts) == len(files):  # every parsed file fit: the bytes hashed are the bytes parsed
            info["outputs"] = [t.decode("utf-8", "replace") for t in texts]
        else:
            info["outputs_complete"] = False
        info["timing"] = "wall time of the whole command (time.perf_counter around the process)"
        return {"metrics": {"wall_ms": summarize(samples, "ms")}, "info": info}
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
