"""A tool's stdout on a full disk, end to end over real SSH (sshd test bed): the host's ``orch_home`` on a small
tmpfs, a command printing 256 KiB per run with ``--repeat 8``. The case's error (stored, and printed by ``orch
run``) read "CommandFailed: python3 -c ... exited with status 120; stderr: (empty)" and the agent's own traceback;
now it names ENOSPC and the ``outputs/<case>/<run>.stdout`` path, with no traceback. Needs root to mount the
tmpfs (the test command and CI run as root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

SUITE = """\
name: fill
description: a tool printing 256 KiB per run
command: ["PYTHON", "-c", "import sys; sys.stdout.write('v: 1' + chr(10) + 'x' * 262144)", "{n}"]
params:
  n: {type: list, default: [1, 2, 3], help: "case number"}
timeout_s: 60
repeat: 8
parser: {name: regex, pattern: 'v: (?P<v>[0-9]+)'}
metrics:
  v: {path: v, unit: "1"}
"""


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the test command and CI run as root)")
    mnt = tmp_path / "small-home"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], check=True, timeout=60)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True, timeout=60)


def test_a_full_outputs_disk_is_named_with_the_path_and_no_traceback(
    one_host_any_db: tuple[Orch, SshdHost], small_home: Path, tmp_path: Path
) -> None:
    orch, _ = one_host_any_db
    inv = yaml.safe_load(orch.inventory.read_text())
    inv["groups"]["ct200"]["hosts"]["gpu-a"]["orch_home"] = str(small_home)
    orch.inventory.write_text(yaml.safe_dump(inv, sort_keys=False))
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "fill.yaml").write_text(SUITE.replace("PYTHON", sys.executable))
    res = orch("run", "fill", "--hosts", "ct200", "--suite-dir", str(suites), "--json", timeout=300)
    assert res.returncode != 0, res.stdout[-2000:]
    assert res.stdout.strip(), res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["status"] in ("partial", "failed"), doc
    store = Store.from_url(orch.db_url)
    try:
        errors = [r.error or "" for r in store.results(doc["run_id"], limit=10).items if r.status == "error"]
    finally:
        store.close()
    assert errors, doc
    for e in errors:
        assert "likely failed with ENOSPC, No space left on device" in e, e
        assert f"{small_home}/runs/" in e and ".stdout (" in e, e
        assert "Traceback" not in e and 'File "' not in e, e
    assert "ENOSPC" in res.stderr + res.stdout or "ENOSPC" in orch("runs", "show", doc["run_id"]).stdout
