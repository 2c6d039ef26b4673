"""Alembic environment for orch's store.

Normally driven by ``orchestrator.store.migrate`` (``orch db upgrade``), which passes an open connection in
``config.attributes["connection"]``. Run from the repository with the ``alembic`` CLI (``alembic.ini`` at the
root), the URL comes from ``-x db_url=...``, then ``ORCH_DB_URL``, then orch's default.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

from orchestrator.settings import DEFAULT_DB_URL
from orchestrator.store.models import Base
from orchestrator.store.session import make_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("db_url")
        or os.environ.get("ORCH_DB_URL")
        or DEFAULT_DB_URL
    )


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
