"""End-to-end helpers: run the real ``orch`` CLI as a subprocess against the sshd test bed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.plugins.sshd import SshdBed

LOCAL_INVENTORY = "groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n"
"""One ``connection: local`` host, ``localhost`` in group ``local``."""

TINY_CASE = {"E": 16, "k": 4, "shared": 1, "H": 256, "I": 128, "dtype": "fp32"}
"""The moe-sweep ``tiny`` preset's case parameters but M (orchestrator/suites.py)."""


@dataclass
class Orch:
    inventory: Path
    db_url: str
    cwd: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            ORCH_INVENTORY=str(self.inventory),
            ORCH_DB_URL=self.db_url,
            COLUMNS="160",
            XDG_CACHE_HOME=str(self.cwd / "cache"),
        )
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "orchestrator", *args]

    def __call__(
        self, *args: str, timeout: float = 240, columns: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = self.env() if columns is None else {**self.env(), "COLUMNS": str(columns)}
        return subprocess.run(self.argv(*args), cwd=self.cwd, env=env, capture_output=True, text=True, timeout=timeout)

    def json(self, *args: str, expect_rc: int | None = 0, timeout: float = 240) -> Any:
        res = self(*args, "--json", timeout=timeout)
        if expect_rc is not None:
            assert res.returncode == expect_rc, res.stderr[-3000:] + res.stdout[-2000:]
        return json.loads(res.stdout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args), cwd=self.cwd, env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


def _two_hosts(sshd_bed: SshdBed, tmp_path: Path, db_url: str) -> tuple[Orch, list[Any]]:
    a = sshd_bed.add("gpu-a")
    b = sshd_bed.add("gpu-b")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [a], "b300": [b]}))
    return Orch(inv, db_url, tmp_path), [a, b]


@pytest.fixture
def two_hosts(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Orch, list[Any]]:
    """Two sshd hosts (gpu-a in group ct200, gpu-b in b300) and the embedded SQLite store."""
    return _two_hosts(sshd_bed, tmp_path, f"sqlite:///{tmp_path / 'orch.db'}")


@pytest.fixture
def one_host_any_db(sshd_bed: SshdBed, tmp_path: Path, db_url: str) -> tuple[Orch, Any]:
    """One sshd host (gpu-a in group ct200) and orch on the parametrized store (SQLite, PostgreSQL), migrated."""
    a = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [a]}))
    store = Store.from_url(db_url)
    store.upgrade()
    store.close()
    return Orch(inv, db_url, tmp_path), a


@pytest.fixture
def two_hosts_any_db(sshd_bed: SshdBed, tmp_path: Path, db_url: str) -> tuple[Orch, list[Any]]:
    """As ``two_hosts``, once on SQLite and once on a real PostgreSQL (``db_url`` of tests/plugins/pg.py),
    migrated with ``orch db upgrade`` as a user of a server database would."""
    orch, hosts = _two_hosts(sshd_bed, tmp_path, db_url)
    up = orch("db", "upgrade")
    assert up.returncode == 0, up.stdout + up.stderr
    return orch, hosts


def local_orch(tmp_path: Path) -> Orch:
    """``orch`` over ``LOCAL_INVENTORY`` and an SQLite store in ``tmp_path``, upgraded to head with ``orch db
    upgrade``. Test modules take it as their ``orch`` fixture: ``orch = pytest.fixture(local_orch, name="orch")``."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(LOCAL_INVENTORY)
    o = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = o("db", "upgrade")
    assert res.returncode == 0, res.stderr
    return o


def store_of(orch: Orch) -> Iterator[Store]:
    """The module's ``orch`` fixture's store, opened in this process and closed after the test
    (``store = pytest.fixture(store_of, name="store")``)."""
    s = Store.from_url(orch.db_url)
    yield s
    s.close()


def sqlite_db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """An SQLite store at head in ``tmp_path``: its URL for the CLI and the open store to fill
    (``db = pytest.fixture(sqlite_db, name="db")``)."""
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    store = Store.from_url(url)
    store.upgrade()
    yield url, store
    store.close()


def deploy_fake_tool(orch: Orch, tmp_path: Path, tool: str, samples: dict[str, str],
                     suites: dict[str, str]) -> Path:  # fmt: skip
    """Deploy a build holding ``fake-tool`` (the script ``tool``) and ``samples/NAME.txt`` to group b300 of
    ``two_hosts``; write the suite files ``suites`` (name -> YAML) into ``tmp_path/suites`` and return that folder."""
    build = tmp_path / "tool-build"
    (build / "samples").mkdir(parents=True)
    fake = build / "fake-tool"
    fake.write_text(tool)
    fake.chmod(0o755)
    for name, text in samples.items():
        (build / "samples" / f"{name}.txt").write_text(text)
    doc = orch.json("deploy", "--hosts", "b300", "--build", str(build))
    assert [r["build"] for r in doc["hosts"]] == ["uploaded"]
    folder = tmp_path / "suites"
    folder.mkdir()
    for name, text in suites.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


def run_suite_b300(orch: Orch, suites: Path, suite: str) -> tuple[dict[str, Any], dict[Any, Any]]:
    """``orch run SUITE --hosts b300 --suite-dir SUITES --json``: its JSON and the stored rows by ``case["case"]``."""
    res = orch("run", suite, "--hosts", "b300", "--suite-dir", str(suites), "--json")
    doc = json.loads(res.stdout)
    store = Store.from_url(orch.db_url)
    try:
        rows = {r.case["case"]: r for r in store.results(doc["run_id"], limit=100).items}
    finally:
        store.close()
    return doc, rows


def finished_run(store: Store, suite: str, host: str, events: list[Event], *, facts: dict[str, Any] | None = None,
                 preset: str | None = None) -> str:  # fmt: skip
    """A completed run of ``suite`` on one ``host`` (facts: no GPU unless given) holding ``events``, written
    straight into ``store`` — for tests of what the CLI shows of stored runs. Returns the run id."""
    store.upsert_host(host, address=None, group="g", labels={})
    rid = store.create_run(suite=suite, params={}, preset=preset, label=None, hosts=[host],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, host, facts={"gpus": []} if facts is None else facts, agent_version="v", build_sha=None)
    store.ingest(rid, host, events)
    store.finish_host_run(rid, host, "completed")
    store.finish_run(rid, "completed")
    return rid
