"""The run's recorded preset when several hosts start without ``--preset`` (the runner asks the store once per
distinct preset its hosts chose, not once per host: issue 18's per-host CPU)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Orch


def test_three_cpu_hosts_without_preset_record_the_one_they_chose(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    hosts = "".join(
        f"      local-{i}: {{connection: local, orch_home: {tmp_path / f'home-{i}'}}}\n" for i in range(3)
    )
    inv.write_text(f"groups:\n  local:\n    hosts:\n{hosts}")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    assert orch("db", "upgrade").returncode == 0
    res = orch("run", "moe-sweep", "--hosts", "local", "--set", "M=1", "--repeat", "2", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = orch.json("runs", "show", "latest")
    assert doc["run"]["preset"] == "tiny"  # the CPU hosts' default, recorded for the run
    assert sorted((h["host"], h["info"]["preset"]) for h in doc["run"]["host_runs"]) == [
        ("local-0", "tiny"), ("local-1", "tiny"), ("local-2", "tiny"),
    ]  # fmt: skip
