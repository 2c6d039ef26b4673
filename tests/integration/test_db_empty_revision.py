"""A database whose ``alembic_version`` row holds an empty revision (``version_num = ''``) is not "written by a
newer orch": every command, ``db upgrade`` and ``serve`` included, says the revision is empty and exits 2,
SQLite and PostgreSQL alike, and nothing in the database is changed (issue 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import migrate
from orchestrator.store.repo import Store
from tests.integration.test_db_lifecycle import _free_port, _orch, _stamp_future


@pytest.mark.parametrize("revision", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize(
    "args", [("db", "upgrade"), ("runs", "list"), ("serve",)], ids=["db-upgrade", "runs-list", "serve"]
)
def test_an_empty_revision_is_said_to_be_empty_exit_2(
    db_url: str, tmp_path: Path, args: tuple[str, ...], revision: str
) -> None:
    _stamp_future(db_url, revision)
    if args[0] == "serve":
        args = ("serve", "--port", str(_free_port()))
    res = _orch(db_url, tmp_path, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert err.startswith(
        "error: the database's schema revision is empty (its alembic_version table holds a row with an empty "
        "version_num)"
    ), res.stderr
    assert "newer orch" not in err and "Traceback" not in err
    assert "hint: restore alembic_version from the backup" in err and "nothing in this one was changed" in err
    store = Store.from_url(db_url)
    try:
        assert migrate.current_revision(store.engine) == revision
    finally:
        store.close()
