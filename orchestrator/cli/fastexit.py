"""Leaving the process without the interpreter's teardown, for a command that has closed what it opened.

At the end of ``orch run`` CPython's shutdown (a last garbage collection, then every module's objects freed:
SQLAlchemy, asyncssh, pydantic, rich) cost ~0.2 s of CPU, measured as the gap between the last ``atexit``
handler and the process's end (0.35-1.1 s wall on this 2-core machine under load) - a fifth of the client's CPU
in the inner loop (issue 21). A command that has closed its store and thread pools calls :func:`request`; the
entry point (``cli.main.main`` as the console script, never when called in-process, e.g. by tests) then flushes
stdout, stderr and logging and ends with ``os._exit``. Two kinds of process keep the normal exit: one that started
the parse worker (orchestrator/parsepool.py: its exit handler stops the worker, and multiprocessing's resource
tracker printed "leaked semaphore objects" after an ``os._exit``), and one under a profiler or tracer
(``python -m cProfile``, coverage), which writes its data at exit.
"""

from __future__ import annotations

import os
import signal
import sys

_requested = False


def request() -> None:
    """The running command has closed its resources: its process may end without the interpreter's teardown."""
    global _requested
    _requested = True


def leave(code: int) -> None:
    """End the process with ``code``: at once when :func:`request` was called, else by ``sys.exit``. Never under
    a profiler or a tracer (``python -m cProfile``, coverage): they write their data at exit; never once the parse
    worker was started (its exit handlers must run)."""
    pool = sys.modules.get("orchestrator.parsepool")
    if _requested and not observed() and not (pool and pool.started()):
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        flush_stdout()
        try:
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written there
            pass
        os._exit(code)
    flush_stdout()
    sys.exit(code)


def observed() -> bool:
    """True under a profiler, tracer or coverage tool: one set with ``sys.setprofile``/``sys.settrace``, or, from
    Python 3.12 on, one registered with ``sys.monitoring`` (PEP 669), as 3.12's ``cProfile`` and coverage's
    ``sysmon`` core are - for those ``sys.getprofile()`` stays None. Tool ids 0-5 are the ones PEP 669 reserves."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(tool) is not None for tool in range(6))


def flush_stdout() -> None:
    """Write out what stdout holds; a reader that went away (a JSON document cut by ``| head -c``) ends the
    process as :func:`broken_pipe` says, never as a success with the output cut, nor as Python's "Exception
    ignored" at exit (status 120)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        broken_pipe()
    except (OSError, ValueError):  # closed by the command itself
        pass


def broken_pipe() -> None:
    """The reader of stdout closed it before orch finished writing (``orch runs list | head -1``): end as the
    shell's own tools do, killed by SIGPIPE (status 141 in a shell), silently. Not rich's default (exit 1, which in
    orch's exit status means that a host or run failed) nor a traceback. stdout is pointed at /dev/null first, so
    that no flush at exit writes to the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)  # only where the signal could not end the process
