"""The inventory's ``orch_home:`` through the real ``orch`` process (``connection: local`` hosts, ``COLUMNS``
fixed), issue 21: a relative path is refused naming the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import Orch

INVENTORIES = {  # where orch_home is written: the inventory, and (LINES) the line of orch_home in it
    "host": "groups:\n  local:\n    hosts:\n      localhost:\n        connection: local\n"
            "        orch_home: scratch/orch\n",
    "vars": "groups:\n  local:\n    vars:\n      orch_home: scratch/orch\n    hosts:\n"
            "      localhost: {connection: local}\n",
    "defaults": "defaults:\n  orch_home: scratch/orch\ngroups:\n  local:\n    hosts:\n"
                "      localhost: {connection: local}\n",
}  # fmt: skip
LINES = {"host": 6, "vars": 4, "defaults": 2}


@pytest.mark.parametrize("where", sorted(LINES))
@pytest.mark.parametrize("command", [("doctor",), ("run", "noop", "--hosts", "local")], ids=["doctor", "run"])
def test_a_relative_orch_home_is_refused_naming_the_line_and_the_fix(tmp_path: Path, where: str,
                                                                      command: tuple[str, ...]) -> None:  # fmt: skip
    """Before: ``orch_home: scratch/orch`` passed doctor and a run's state went to ``scratch/orch`` under
    whatever directory the agent started in (the login home over SSH, orch's own working directory for a
    ``connection: local`` host), without a word. A path on the host is resolved there, not next to the
    inventory on this machine: orch asks for an absolute path or one under the login home (``~/``)."""
    inv = tmp_path / "inventory.yaml"
    inv.write_text(INVENTORIES[where])
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = orch(*command, columns=100)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {inv}:{LINES[where]}: "), res.stderr
    assert "orch_home 'scratch/orch' is a relative path" in lines[0], res.stderr
    hint = " ".join(" ".join(lines[1:]).split())
    assert hint.startswith("hint: ") and "an absolute path" in hint and "~/scratch/orch" in hint, res.stderr
    assert not (tmp_path / "scratch").exists() and res.stdout == ""


@pytest.mark.parametrize("below", [False, True], ids=["the-file", "below-a-file"])
def test_doctor_fails_a_host_whose_orch_home_is_a_file(tmp_path: Path, below: bool) -> None:
    """Before: ``orch_home:`` naming a regular file (or a path below one) passed doctor's disk check ("ok: N GB
    free at FILE"), and the first run failed on the host. The disk check fails naming the file and the fix."""
    blocker = tmp_path / "orch-home"
    blocker.write_text("not a directory\n")
    home = blocker / "runs-here" if below else blocker
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {home}}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    doc = orch.json("doctor", expect_rc=1)
    [host] = doc["hosts"]
    disk = next(c for c in host["checks"] if c["name"] == "disk")
    assert host["ok"] is False and disk["status"] == "fail", disk
    assert f"{blocker} is a file, not a directory" in disk["detail"] and str(home) in disk["detail"], disk
    assert "orch_home:" in disk["hint"] and str(blocker) in disk["hint"], disk
    res = orch("doctor", columns=100)
    assert res.returncode == 1, res.stdout + res.stderr
    said = " ".join(res.stdout.split())
    assert f"{blocker} is a file, not a directory" in said and "0/1 hosts passed" in said, res.stdout
