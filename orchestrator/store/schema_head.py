"""Is the database at this orch's schema head? Answered without importing Alembic on the everyday path.

Every command that opens the store checks the schema. Alembic's ``ScriptDirectory`` (and importing Alembic at
all, ~0.15 s) is the authority, but it only has to be asked when the answer changes: the head revision is kept in
a small cache file keyed by the migration scripts' names, sizes and mtimes (a new or edited migration changes the
key, so the cache is never stale), and the database's revision is read with one plain ``SELECT version_num FROM
alembic_version``. Anything else — no cache yet, no version table, another revision, several heads, an error —
answers False, and the caller takes the full Alembic path (which migrates, refuses a newer schema, or names the
fix).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Engine

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def migration_candidates() -> tuple[Path, Path]:
    """Where the Alembic scripts may live: ``orchestrator/migrations`` in an installed wheel, else the source
    tree's top-level ``migrations/``."""
    return _PACKAGE_DIR / "migrations", _PACKAGE_DIR.parent / "migrations"


def _scripts_key() -> tuple[Path, str] | None:
    """(the cache file, the key of the migration scripts present), or None when there are none."""
    for d in migration_candidates():
        versions = d / "versions"
        if (d / "env.py").is_file() and versions.is_dir():
            entries = []
            for p in sorted(versions.iterdir()):
                if p.suffix == ".py":
                    st = p.stat()
                    entries.append([p.name, st.st_size, st.st_mtime_ns])
            key = hashlib.sha256(json.dumps([str(d.resolve()), entries]).encode()).hexdigest()
            cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
            return cache_home / "orch" / f"schema-head-{key[:16]}.json", key
    return None


def cached_head() -> str | None:
    """The head revision recorded for the migration scripts as they are now, or None (not recorded yet)."""
    found = _scripts_key()
    if found is None:
        return None
    path, key = found
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    head = doc.get("head") if isinstance(doc, dict) and doc.get("key") == key else None
    return head if isinstance(head, str) and head else None


def remember_head(head: str) -> None:
    """Record Alembic's head for the scripts as they are now (atomic write; a cache that cannot be written only
    costs the next command an Alembic import)."""
    found = _scripts_key()
    if found is None:
        return
    path, key = found
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"key": key, "head": head}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def at_head(engine: Engine) -> bool:
    """True when the database's one revision is the recorded head; False for anything else (see the module
    docstring), never raising: the caller's full check reports errors."""
    head = cached_head()
    if head is None:
        return False
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    except SQLAlchemyError:
        return False
    return list(rows) == [head]
