"""Slurm groups in inventory.yaml: the slurm: block, login:, agent_dir:, and clear errors for bad fields."""

from __future__ import annotations

import pytest

from orchestrator.errors import InventoryError, SelectionError
from orchestrator.inventory import parse_inventory

GOOD = """\
groups:
  login:
    hosts:
      login-0: {address: 10.0.0.2}
  h200:
    slurm: {partition: gpu, account: ml, nodes: 2, gpus_per_node: 8, time: 30:00, constraint: h200&ib,
            reservation: bench, qos: high}
    login: login-0
    agent_dir: /local/orch
    vars: {python: /opt/venv/bin/python3, orch_home: /shared/orch}
"""


def test_a_slurm_group_resolves_with_its_options() -> None:
    inv = parse_inventory(GOOD)
    g = inv.slurm["h200"]
    assert (g.login, g.agent_dir, g.python, g.orch_home) == ("login-0", "/local/orch", "/opt/venv/bin/python3",
                                                               "/shared/orch")  # fmt: skip
    o = g.options
    assert (o.partition, o.account, o.nodes, o.gpus_per_node, o.constraint, o.reservation, o.qos) == (
        "gpu", "ml", 2, 8, "h200&ib", "bench", "high")  # fmt: skip
    assert o.time == "30:00"  # as written: YAML 1.1 would read 30:00 as 1800
    assert inv.slurm_group("h200") is g and inv.slurm_group("login") is None
    assert [h.name for h in inv.select("login-0")] == ["login-0"]


def test_a_slurm_group_is_selected_alone() -> None:
    inv = parse_inventory(GOOD)
    with pytest.raises(SelectionError, match="'h200' is a Slurm group") as exc:
        inv.select("h200,login-0")
    assert exc.value.hint == (
        "orch run and orch doctor take it alone (--hosts h200); other commands reach the cluster through its login "
        "node (--hosts login-0)"
    )
    with pytest.raises(SelectionError, match="is a Slurm group"):
        inv.select("h200")  # e.g. orch deploy --hosts h200: its nodes are not known before a job


@pytest.mark.parametrize(
    ("group", "message", "hint"),
    [
        ("{slurm: {nodes: 0}, login: local}", "groups.h.slurm.nodes: Input should be greater than or equal to 1",
         "nodes must be a whole number"),
        ("{slurm: {node: 2}, login: local}", "groups.h.slurm.node: Extra inputs are not permitted",
         "a group's slurm: takes partition, account, nodes"),
        ("{slurm: {time: 1h}, login: local}", "time '1h' is not an sbatch time limit", "docs/slurm.md"),
        ("{slurm: {partition: 'gpu; rm'}, login: local}", "is not a Slurm name", "docs/slurm.md"),
        ("{slurm: {}, login: nope}", "groups.h.login: 'nope' is not a host of this inventory", "login: local"),
        ("{slurm: {}}", "a Slurm group needs login:", "login: HOST"),
        ("{login: local}", "groups.h.login is only for a Slurm group", "add a slurm: block"),
        ("{slurm: {}, login: local, hosts: {a: {}}}", "has slurm: and hosts:", "delete hosts:"),
        ("{slurm: {}, login: local, agent_dir: orch}", "agent_dir: 'orch' is not an absolute path", "node-local"),
    ],
)
def test_bad_slurm_fields_name_the_place_and_the_fix(group: str, message: str, hint: str) -> None:
    with pytest.raises(InventoryError) as exc:
        parse_inventory(f"groups:\n  h: {group}\n", "inv.yaml")
    assert message in exc.value.message and exc.value.message.startswith("inv.yaml:2: ")
    assert hint in exc.value.hint
