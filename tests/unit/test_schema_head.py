"""``schema_head``'s cache key: any change to the migration scripts (a new one, an edited one) forgets the
recorded head, so the Alembic-free check can never accept a database against a stale head."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.store import schema_head


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "migrations"
    (d / "versions").mkdir(parents=True)
    (d / "env.py").write_text("# env\n")
    (d / "versions" / "0001_a.py").write_text('revision = "0001_a"\n')
    monkeypatch.setattr(schema_head, "migration_candidates", lambda: (tmp_path / "absent", d))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return d


def test_recorded_head_is_returned_while_the_scripts_are_unchanged(scripts: Path) -> None:
    assert schema_head.cached_head() is None
    schema_head.remember_head("0001_a")
    assert schema_head.cached_head() == "0001_a"


def test_a_new_migration_forgets_the_head(scripts: Path) -> None:
    schema_head.remember_head("0001_a")
    (scripts / "versions" / "0002_b.py").write_text('revision = "0002_b"\n')
    assert schema_head.cached_head() is None


def test_an_edited_migration_forgets_the_head(scripts: Path) -> None:
    schema_head.remember_head("0001_a")
    f = scripts / "versions" / "0001_a.py"
    st = f.stat()
    f.write_text('revision = "0001_a"  # edited\n')
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert schema_head.cached_head() is None


def test_an_unwritable_cache_only_means_no_fast_path(
    scripts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file: <cache>/orch cannot be created
    schema_head.remember_head("0001_a")
    assert schema_head.cached_head() is None
