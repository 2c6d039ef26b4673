"""Leaving the process without the interpreter's teardown, for a command that has closed what it opened.

At the end of ``orch run`` CPython's shutdown (a last garbage collection, then every module's objects freed:
SQLAlchemy, asyncssh, pydantic, rich) cost ~0.2 s of CPU, measured as the gap between the last ``atexit``
handler and the process's end (0.35-1.1 s wall on this 2-core machine under load) - a fifth of the client's CPU
in the inner loop (issue 21). A command that has closed its store and thread pools calls :func:`request`; the
entry point (``cli.main.main`` as the console script, never when called in-process, e.g. by tests) then flushes
stdout, stderr and logging and ends with ``os._exit``. Nothing else registers exit handlers in orch; a profiler
or tracer (``python -m cProfile``, coverage), which writes its data at exit, keeps the normal exit.
"""

from __future__ import annotations

import os
import sys

_requested = False


def request() -> None:
    """The running command has closed its resources: its process may end without the interpreter's teardown."""
    global _requested
    _requested = True


def leave(code: int) -> None:
    """End the process with ``code``: at once when :func:`request` was called, else by ``sys.exit``. Never under
    a profiler or a tracer (``python -m cProfile``, coverage): they write their data at exit."""
    if _requested and sys.getprofile() is None and sys.gettrace() is None:
        if "logging" in sys.modules:
            sys.modules["logging"].shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can be written there
                pass
        os._exit(code)
    sys.exit(code)
