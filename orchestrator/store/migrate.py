"""Alembic, configured from the package: ``orch db upgrade`` works from any cwd and from an installed wheel.

The migration scripts (``env.py``, ``versions/``) live in the repository's top-level ``migrations/``; the wheel
carries the same files as ``orchestrator/migrations/`` (hatchling ``force-include`` in ``pyproject.toml``).
``migrations_dir()`` finds whichever is present, so ``orch db upgrade``, the tests and the ``alembic`` CLI
(``alembic.ini`` at the root, e.g. ``alembic revision --autogenerate -m ...``) all run the same scripts.
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

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def migrations_dir() -> Path:
    """The Alembic script location: ``orchestrator/migrations`` in an installed wheel, else the source tree's
    top-level ``migrations/``. Raises StoreError when neither holds an ``env.py`` (a broken install)."""
    for candidate in (_PACKAGE_DIR / "migrations", _PACKAGE_DIR.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise StoreError(
        f"the database migrations are missing (looked in {_PACKAGE_DIR / 'migrations'} and "
        f"{_PACKAGE_DIR.parent / 'migrations'})",
        "reinstall orch (pipx install . / pip install .); a wheel carries them as orchestrator/migrations",
    )


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
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
