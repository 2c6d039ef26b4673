"""Alembic, configured from the package: ``orch db upgrade`` works from any cwd and from an installed wheel.

The migration scripts live in ``orchestrator/store/migrations/`` (not a top-level ``migrations/``) so they
ship inside the distribution; ``alembic.ini`` at the repository root points there for developers who use the
``alembic`` CLI (``alembic revision --autogenerate -m ...``).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from orchestrator.errors import StoreError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default head). Raises StoreError when the database refuses."""
    cfg = alembic_config()
    try:
        with engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            if sqlite:
                # Batch mode recreates tables; with foreign keys on, dropping a parent would cascade or fail.
                conn.exec_driver_sql("PRAGMA foreign_keys = OFF")
                conn.commit()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys = ON")
                conn.commit()
    except SQLAlchemyError as exc:
        raise StoreError(
            f"database migration to {revision} failed: {exc.__class__.__name__}: {str(exc).splitlines()[0]}",
            "check ORCH_DB_URL / --db and that the database user may create tables",
        ) from exc
