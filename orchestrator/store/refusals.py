"""One line the database refuses costs that line, never the host's other lines.

``Store.ingest`` stores a batch in one transaction: all or nothing. Values a database cannot hold are made
storable before they are written (``store.storable``), but a refusal orch does not foresee (a constraint or
trigger of the site's PostgreSQL, a value past a limit of the server) would roll back the whole batch, and the
follow loop, which cannot get past it, would fail the host with every later line unstored.

:func:`ingest_keeping` stores the batch; when the database refuses its *data* (integrity, data and internal
errors — not a lost connection, a lock timeout or a missing table, which fail every line alike and are raised),
it stores the batch's lines one by one, and each refused line becomes one ``error`` row at its position
(``kind: "store"``) saying what the database answered. The host's reconciliation then names the difference.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.exc import DataError, IntegrityError, InternalError

from orchestrator.errors import StoreError
from orchestrator.protocol import Event, case_fields, error_event
from orchestrator.spool_check import refused_line_prefix
from orchestrator.store.repo import Store

_DATA_REFUSALS = (DataError, IntegrityError, InternalError)  # what a value (not the connection) caused


def refused_value(exc: StoreError) -> bool:
    """True when the database refused a value of the write (not: unreachable, locked, schema missing)."""
    return isinstance(exc.__cause__, _DATA_REFUSALS)


def ingest_keeping(
    store: Store, run_id: str, host: str, events: Sequence[Event], *, lines_out: list[int] | None = None
) -> int:
    """``store.ingest(run_id, host, events)``; a batch whose data the database refuses is stored line by line,
    each refused line as one error row at its position. Returns the result rows newly inserted (refused lines'
    error rows included); ``lines_out`` (when given) gets the lines each committed transaction stored
    (``Store.ingest_many``). Raises StoreError for a failure that is not about a value (and for an error row the
    database refuses too)."""
    try:
        return store.ingest(run_id, host, events, lines_out=lines_out)
    except StoreError as exc:
        if not refused_value(exc) or len(events) == 0:
            raise
    inserted = 0
    for ev in events:
        try:
            inserted += store.ingest(run_id, host, [ev], lines_out=lines_out)
        except StoreError as exc:
            if not refused_value(exc):
                raise
            inserted += _store_refusal(store, run_id, host, ev, exc, lines_out)
    return inserted


def _store_refusal(store: Store, run_id: str, host: str, ev: Event, exc: StoreError,
                   lines_out: list[int] | None = None) -> int:  # fmt: skip
    message = (
        f"{refused_line_prefix(ev.seq, ev.type)}{exc.message}; the line stays in the host's spool, the other lines "
        "are stored"
    )
    try:
        return store.ingest(run_id, host, [error_event(ev.seq, message, kind="store", line_type=ev.type,
                                                       **case_fields(ev.data))], lines_out=lines_out)  # fmt: skip
    except StoreError as again:
        if not refused_value(again):
            raise
        return store.ingest(run_id, host, [error_event(ev.seq, message, kind="store", line_type=ev.type)],
                            lines_out=lines_out)
