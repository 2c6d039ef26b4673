"""Command suites' output parsing in a child process, bounded in time and memory.

A suite's parser runs on whatever its command printed, with a pattern its author wrote: a regex with nested
quantifiers (``(?P<v>(a+)+)b`` on ``'a' * 40 + '!'``) backtracks for longer than the universe exists, and a json
parser on a 100 MB output holds gigabytes for a while. Python's ``re`` and ``json`` hold the GIL for a whole match
or document and cannot be interrupted, so parsing in orch's own process would stop the run's event loop (every
host, Ctrl-C, ``orch cancel``'s effect) for as long as the parse lasts. Here a parse runs in a worker process
(pebble's ``ProcessPool``, one worker, started on first use by ``forkserver`` so no lock of orch's threads is
inherited) that is killed at the deadline and replaced for the next parse; the deadline counts from the moment the
worker starts the parse, so a slow worker start on a loaded machine does not eat into it. The worker's address
space is capped (``RLIMIT_AS``, :data:`PARSE_MEMORY_BYTES`): a parse that needs more ends with a MemoryError.

A parse that cannot run away is made here instead, without the worker's start (~0.1-0.3 s of a one-case run):
a parser that takes no pattern of the suite's author (json, jsonl and the engine formats: orch's own code, linear
in its input) on at most :data:`INLINE_PARSE_CHARS` characters of output. A ``regex`` parse always goes to the worker.

Every way a parse can end badly becomes a :class:`~orchestrator.parsers.ParseError` naming the parser, the limit
and the size of the output — which ``command_result`` turns into that case's error row; the other cases go on.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import multiprocessing
import resource
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.parsers import ParseError
from orchestrator.suites.command import CommandSuite, ParseOutcome, parse_case

if TYPE_CHECKING:
    from pebble import ProcessPool

PARSE_MEMORY_BYTES = 8 << 30
"""Address-space cap of the parse worker (8 GiB): a json document of ~100 MB parses in well under it (CPython
keeps a parsed JSON number or short string in ~30-80 bytes, ~10x the text), a runaway one is stopped before it
pushes the orchestrator's machine into swap."""


INLINE_PARSE_CHARS = 256 << 10
"""Outputs of up to 256 Ki characters in all (1 MiB of UTF-8 at most) for a parser without a user pattern are parsed
in orch's own process: orch's parsers read that in milliseconds, and the worker's start costs more than the parse."""


def inline(suite: CommandSuite, texts: Sequence[str]) -> bool:
    """Whether ``texts`` are parsed in this process (see the module docstring): no user pattern, small output."""
    from orchestrator.parsers import PARSERS

    return not PARSERS[suite.parser].takes_pattern and sum(len(t) for t in texts) <= INLINE_PARSE_CHARS


def _parse_here(suite: CommandSuite, texts: Sequence[str], case: Mapping[str, Any] | None) -> ParseOutcome:
    try:
        return parse_case(suite, list(texts), case)
    except Exception as exc:  # noqa: BLE001 - a ParseError, or a parser's bug: command_result makes it this case's error
        return exc


def _limit_memory(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _size(texts: Sequence[str]) -> str:
    n = sum(len(t.encode("utf-8", "replace")) for t in texts)
    runs = f" ({len(texts)} runs)" if len(texts) > 1 else ""
    return f"{n} bytes of output{runs}"


class ParsePool:
    """One parse worker process, started on first use. ``memory_bytes``: its address-space cap."""

    def __init__(self, memory_bytes: int = PARSE_MEMORY_BYTES) -> None:
        self.memory_bytes = memory_bytes
        self._pool: ProcessPool | None = None
        self._lock = threading.Lock()

    def _schedule(
        self, suite: CommandSuite, texts: Sequence[str], case: Mapping[str, Any] | None
    ) -> concurrent.futures.Future[Any]:
        from pebble import ProcessPool  # imported on first parse: a run of a built-in suite never needs it

        with self._lock:
            if self._pool is None:
                self._pool = ProcessPool(
                    max_workers=1,
                    initializer=_limit_memory,
                    initargs=(self.memory_bytes,),
                    context=multiprocessing.get_context("forkserver"),
                )
            return self._pool.schedule(parse_case, args=(suite, list(texts), case), timeout=suite.parse_timeout_s)

    def _outcome(self, suite: CommandSuite, texts: Sequence[str], fut: concurrent.futures.Future[Any]) -> ParseOutcome:
        """The future's result, or the ParseError that says how the parse ended."""
        from pebble import ProcessExpired

        try:
            result: ParseOutcome = fut.result()
        except ParseError as exc:
            return exc
        except concurrent.futures.TimeoutError:
            hint = " (catastrophic backtracking?)" if suite.parser == "regex" else ""
            return ParseError(
                f"parser {suite.parser} took longer than {suite.parse_timeout_s:g} s on {_size(texts)}{hint}; "
                f"it was stopped (suite key parse_timeout_s)"
            )
        except MemoryError:
            return ParseError(
                f"parser {suite.parser} ran out of memory (limit {self.memory_bytes >> 20} MiB) on {_size(texts)}"
            )
        except ProcessExpired as exc:
            return ParseError(f"parser {suite.parser} died on {_size(texts)} (worker exit code {exc.exitcode})")
        except Exception as exc:  # noqa: BLE001 - a parser's bug: command_result makes it this case's error
            return exc
        return result

    def parse(self, suite: CommandSuite, texts: Sequence[str], case: Mapping[str, Any] | None) -> ParseOutcome:
        """:func:`parse_case` of ``texts`` in the worker, waiting for it here: the parsed case, or the exception
        (returned, not raised) that says why there is none — a ParseError for a timeout, the memory cap or a
        worker that died. A small output without a user pattern is parsed here (:func:`inline`)."""
        if inline(suite, texts):
            return _parse_here(suite, texts, case)
        return self._outcome(suite, texts, self._schedule(suite, texts, case))

    async def parse_async(
        self, suite: CommandSuite, texts: Sequence[str], case: Mapping[str, Any] | None
    ) -> ParseOutcome:
        """As :meth:`parse`, awaited; cancelling it stops the parse (the worker is killed and replaced)."""
        if inline(suite, texts):
            return _parse_here(suite, texts, case)
        fut = self._schedule(suite, texts, case)
        try:
            await asyncio.wrap_future(fut)  # cancelling this await cancels ``fut``: pebble kills the worker
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except Exception:  # noqa: BLE001 - read again from ``fut`` by _outcome, which says what it was
            pass
        return self._outcome(suite, texts, fut)

    def started_worker(self) -> bool:
        """Whether this pool has a worker process (started by a parse that was not made here)."""
        return self._pool is not None

    def close(self) -> None:
        """Stop the worker (a parse in progress is abandoned)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()  # type: ignore[no-untyped-call]
            pool.join(timeout=10)


_shared: ParsePool | None = None
_shared_lock = threading.Lock()


def shared() -> ParsePool:
    """The process's parse pool (created on first use, stopped at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ParsePool()
            atexit.register(_shared.close)
        return _shared


def started() -> bool:
    """Whether this process started the shared parse worker: its exit must then run the exit handlers (the pool's
    stop, multiprocessing's semaphore clean-up), or the resource tracker warns of leaked semaphores."""
    return _shared is not None and _shared.started_worker()
