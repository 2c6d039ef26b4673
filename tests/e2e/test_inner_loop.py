"""The inner loop (issue 21 item 8): what one short ``orch run`` costs, checked by what it does, never by a clock.

- a run on a ``connection: local`` host imports no SSH stack (asyncssh is imported when an SSH host connects),
  nor the CLI's other command modules, nor (on SQLite, one host, nothing drawn) PostgreSQL's dialects,
  ClusterShell or rich's progress bars;
- the store opens on its own thread while the hosts are reached, and what opening it raises still ends the run
  with the one clear line and exit 2 (nothing stored, nothing drawn on stderr);
- a run of a host that already has the agent opens one SSH connection and the sessions counted in sshd's own log;
- ``orch run`` ends without the interpreter's teardown (``cli/fastexit.py``), but not under a profiler, whose data
  is written at exit.
"""

from __future__ import annotations

import json
import pstats
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed

DEADLINE_S = 240  # spawns Python processes on a loaded machine


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_a_run_on_a_local_host_imports_no_ssh_stack(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {tmp_path}/h}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", "run", "noop", "--hosts", "localhost", "--json"],
        cwd=tmp_path, env=orch.env(), capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert json.loads(proc.stdout)["status"] == "completed"
    imported = _imported(proc.stderr)
    assert "orchestrator.runner" in imported and "sqlalchemy" in imported  # it did run and store
    assert not imported & {"asyncssh", "orchestrator.hostkeys", "orchestrator.transport.ssh", "pydantic_settings"}
    # only the run command's module of the CLI: the others are neither imported nor built into the click tree
    other_commands = {f"orchestrator.cli.{m}" for m in ("doctor", "fleet", "hosts", "suites", "serve", "project")}
    assert not imported & other_commands
    # the next run (the schema is there: no Alembic, whose DDL modules import every dialect): on SQLite no
    # PostgreSQL dialect (models' JSONB variant), for one host no host-name folding (ClusterShell), and with
    # nothing drawn (--json) no progress bars
    again = subprocess.run(proc.args, cwd=tmp_path, env=orch.env(), capture_output=True, text=True, timeout=DEADLINE_S)
    assert again.returncode == 0, again.stderr[-3000:] + again.stdout[-2000:]
    imported = _imported(again.stderr)
    assert "sqlalchemy" in imported and "alembic" not in imported
    unused = {"sqlalchemy.dialects.postgresql", "ClusterShell", "rich.progress", "orchestrator.cli.progress"}
    assert not imported & unused


def test_a_bad_database_url_ends_an_ssh_run_with_one_clear_line(sshd_bed: SshdBed, tmp_path: Path) -> None:
    """The store opens while the host is reached; its error is still the run's only output, exit 2."""
    h = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"g": [h]}))
    orch = Orch(inv, "nosuchdriver://orch@127.0.0.1/orch", tmp_path)
    res = orch("run", "noop", "--hosts", "gpu-a")
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        "error: --db / ORCH_DB_URL names a database driver that is not installed: 'nosuchdriver'",
        "hint: use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB (install orch[postgres] for psycopg)",
    ]


def test_a_run_whose_agent_is_there_uses_one_connection_and_two_sessions(sshd_bed: SshdBed, tmp_path: Path) -> None:
    """sshd's own log (LogLevel VERBOSE) counts what a run costs the host: after the first run (which uploads
    the agent) one connection, one session for the deploy check with the facts, one for starting the detached
    worker and following its spool."""
    h = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"g": [h]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    first = orch.json("run", "noop", "--hosts", "gpu-a")
    assert first["status"] == "completed"
    log = h.root / "sshd.log"
    before = log.read_text().splitlines()
    second = orch.json("run", "noop", "--hosts", "gpu-a")
    assert second["status"] == "completed" and second["hosts"][0]["results"] == first["hosts"][0]["results"] > 0
    new = log.read_text().splitlines()[len(before) :]
    assert sum("Accepted publickey" in ln for ln in new) == 1, new
    assert sum("Starting session: command" in ln for ln in new) == 2, new


def test_a_run_under_cprofile_still_writes_its_profile(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {tmp_path}/h}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    prof = tmp_path / "orch.prof"
    argv = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "orchestrator", "run", "noop", "--hosts",
            "localhost", "--json"]  # fmt: skip
    proc = subprocess.run(argv, cwd=tmp_path, env=orch.env(), capture_output=True, text=True, timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["status"] == "completed"
    stats = pstats.Stats(str(prof))
    assert any(fn == "run" and path.endswith("cli/run.py") for path, _, fn in stats.stats)  # type: ignore[attr-defined]


def test_a_regex_suite_run_leaves_no_leaked_semaphore_warning_and_a_json_one_starts_no_parse_worker(
    tmp_path: Path,
) -> None:
    """The regex parse runs in the parse worker (parsepool.py), whose exit handlers must run: after an
    ``os._exit`` multiprocessing's resource tracker printed "There appear to be 2 leaked semaphore objects" on every
    such run. A json suite's small output is parsed in orch's own process: no forkserver, no worker."""
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "rx.yaml").write_text(
        "name: rx\ndescription: one regex case\ncommand: [echo, 'v: 7']\nparams: {}\n"
        "parser: {name: regex, pattern: 'v: (?P<v>\\d+)'}\nmetrics:\n  v: {unit: ms}\n"
    )
    (tmp_path / "suites" / "js.yaml").write_text(
        "name: js\ndescription: one json case\ncommand: [echo, '{{\"v\": 7}}']\nparams: {}\nparser: json\n"
        "metrics:\n  v: {unit: ms}\n"
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {tmp_path}/h}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    for suite in ("rx", "js"):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "orchestrator", "run", suite, "--hosts", "localhost",
             "--suite-dir", str(tmp_path / "suites"), "--json"],
            cwd=tmp_path, env=orch.env(), capture_output=True, text=True, timeout=DEADLINE_S,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
        doc = json.loads(proc.stdout)
        assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 1
        noise = [ln for ln in proc.stderr.splitlines() if not ln.startswith("import time:")]
        assert not [ln for ln in noise if "leaked" in ln or "resource_tracker" in ln], noise
        assert ("pebble" in _imported(proc.stderr)) == (suite == "rx")  # the worker only where a pattern runs
