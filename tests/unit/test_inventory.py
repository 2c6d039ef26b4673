"""Inventory parsing (errors name file:line and the fix) and ``--hosts`` selection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import InventoryError, SelectionError
from orchestrator.inventory import GpuOverride, Host, load_inventory, parse_inventory

FILE = "/etc/orch/inventory.yaml"

SAMPLE = """\
defaults: {user: root, port: 22, python: python3}
groups:
  ct200:
    vars: {gpu: {peak_mem_gbps: 1792}, labels: {rack: r1}}
    hosts:
      ct200-0: {address: 10.0.0.10}
      ct200-1: {address: 10.0.0.11, labels: {slot: "2"}}
  b300:
    vars: {python: /opt/venv/bin/python3}
    hosts:
      b300-0: {address: b300-0.example, port: 2222, gpu: {name: B300 SXM}}
      b300-1: {}
  local:
    hosts:
      localhost: {connection: local}
"""


def _error(text: str) -> InventoryError:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, FILE)
    return info.value


def test_sample_resolves_precedence() -> None:
    inv = parse_inventory(SAMPLE, FILE)
    assert [h.name for h in inv.hosts] == ["ct200-0", "ct200-1", "b300-0", "b300-1", "localhost"]
    assert inv.groups == {"ct200": ("ct200-0", "ct200-1"), "b300": ("b300-0", "b300-1"), "local": ("localhost",)}
    c1 = inv.host("ct200-1")
    assert (c1.address, c1.port, c1.user, c1.python, c1.connection) == ("10.0.0.11", 22, "root", "python3", "ssh")
    assert c1.labels == {"rack": "r1", "slot": "2"}
    assert c1.gpu == GpuOverride(peak_mem_gbps=1792)
    b0 = inv.host("b300-0")
    assert (b0.port, b0.python, b0.gpu) == (2222, "/opt/venv/bin/python3", GpuOverride(name="B300 SXM"))
    b1 = inv.host("b300-1")
    assert b1.address is None  # an ~/.ssh/config alias or DNS name: ssh_config decides
    assert inv.host("localhost").connection == "local"


def test_unset_ssh_settings_stay_none_for_ssh_config() -> None:
    inv = parse_inventory("groups:\n  g:\n    hosts:\n      alias-only: {}\n", FILE)
    assert inv.hosts == (Host(name="alias-only", group="g"),)


@pytest.mark.parametrize(
    ("text", "line", "message", "fix"),
    [
        (
            "defaults: {user: root}\ngroups:\n  a:\n    hosts:\n      h1: {adress: 1.2.3.4}\n",
            5,
            "groups.a.hosts.h1.adress: Extra inputs are not permitted",
            "unknown key 'adress'; host keys are: address, port, user, identity_file, python",
        ),
        (
            "groups:\n  a:\n    vars:\n      pyhton: /usr/bin/python3\n    hosts:\n      h1: {}\n",
            4,
            "groups.a.vars.pyhton",
            "unknown key 'pyhton'; host keys are:",
        ),
        ("defaults: {}\ngroup:\n  a: {}\n", 2, "group: Extra inputs", "unknown key 'group'; top-level keys are"),
        (
            "groups:\n  a:\n    hosts:\n      h1:\n        address: x\n        port: 70000\n",
            6,
            "groups.a.hosts.h1.port: Input should be less than or equal to 65535",
            "port must be a whole number from 1 to 65535",
        ),
        (
            "groups:\n  a:\n    hosts:\n      h1:\n        port: ssh\n",
            5,
            "groups.a.hosts.h1.port: Input should be a valid integer",
            "port must be a whole number from 1 to 65535",
        ),
        (
            "groups:\n  a:\n    hosts:\n      h1: {connection: telnet}\n",
            4,
            "groups.a.hosts.h1.connection",
            "connection must be 'ssh' or 'local'",
        ),
        (
            "groups:\n  a:\n    hosts:\n      h1: {address: x\n      h2: {}\n",
            5,
            "not valid YAML",
            "check indentation and quoting",
        ),
        (
            "groups:\n  a:\n    hosts:\n      h1: {}\n      h1: {address: y}\n",
            5,
            "duplicate key 'h1'",
            "remove one of the two entries",
        ),
        (
            "groups:\n  a:\n    hosts:\n      h1: {}\n  b:\n    hosts:\n      h2: {}\n      h1: {}\n",
            8,
            "host 'h1' appears in groups 'a' and 'b'",
            "a host belongs to one group",
        ),
        (
            "groups:\n  a:\n    hosts:\n      b: {}\n  b:\n    hosts:\n      h2: {}\n",
            4,
            "'b' is both a group and a host name",
            "rename one of them",
        ),
        ("- just\n- a list\n", 1, "the top level must be a mapping", "README"),
    ],
    ids=[
        "unknown-host-key",
        "unknown-vars-key",
        "unknown-top-key",
        "port-range",
        "port-not-int",
        "connection",
        "bad-yaml",
        "duplicate-key",
        "host-in-two-groups",
        "group-host-clash",
        "not-a-mapping",
    ],
)
def test_errors_name_file_line_and_fix(text: str, line: int, message: str, fix: str) -> None:
    err = _error(text)
    assert (err.path, err.line) == (FILE, line), err.message
    assert err.message.startswith(f"{FILE}:{line}: "), err.message
    assert message in err.message
    assert fix in err.hint
    assert err.exit_code == 2


def test_missing_file_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as info:
        load_inventory(tmp_path / "nope.yaml")
    assert info.value.message == f"{tmp_path / 'nope.yaml'}: inventory file not found"
    assert "--inventory" in info.value.hint and "ORCH_INVENTORY" in info.value.hint


def test_load_reads_the_file(tmp_path: Path) -> None:
    p = tmp_path / "inv.yaml"
    p.write_text(SAMPLE)
    assert load_inventory(p).path == str(p)
    p.write_text("groups:\n  a:\n    hosts:\n      h1: {prot: 22}\n")
    with pytest.raises(InventoryError, match=re.escape(f"{p}:4: ")):
        load_inventory(p)


def test_empty_file_is_valid_but_selects_nothing() -> None:
    inv = parse_inventory("", FILE)
    assert inv.hosts == ()
    with pytest.raises(SelectionError, match="defines no hosts"):
        inv.select(None)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, ["ct200-0", "ct200-1", "b300-0", "b300-1", "localhost"]),
        ("all", ["ct200-0", "ct200-1", "b300-0", "b300-1", "localhost"]),
        ("b300", ["b300-0", "b300-1"]),
        ("ct200-1", ["ct200-1"]),
        ("*-0", ["ct200-0", "b300-0"]),
        ("b3*", ["b300-0", "b300-1"]),  # a glob over group names selects their members too
        ("b300-1,ct200", ["ct200-0", "ct200-1", "b300-1"]),  # inventory order, not selector order
        ("b300, b300-0 ,local", ["b300-0", "b300-1", "localhost"]),  # duplicates dropped, spaces ignored
        ("ct200-[01]", ["ct200-0", "ct200-1"]),
    ],
)
def test_selection(selector: str | None, expected: list[str]) -> None:
    inv = parse_inventory(SAMPLE, FILE)
    assert [h.name for h in inv.select(selector)] == expected


@pytest.mark.parametrize("selector", ["h100", "b300,h100", "gpu-*"])
def test_a_term_matching_nothing_is_an_error_naming_it(selector: str) -> None:
    inv = parse_inventory(SAMPLE, FILE)
    with pytest.raises(SelectionError) as info:
        inv.select(selector)
    bad = selector.split(",")[-1]
    assert f"--hosts {bad!r} matches no group or host in {FILE}" == info.value.message
    assert "groups: b300, ct200, local" in info.value.hint
    assert "ct200-0" in info.value.hint
    assert info.value.exit_code == 2


def test_empty_selection_is_an_error() -> None:
    inv = parse_inventory(SAMPLE, FILE)
    with pytest.raises(SelectionError, match="selects no host"):
        inv.select(" , ")


def test_unknown_host_name() -> None:
    inv = parse_inventory(SAMPLE, FILE)
    with pytest.raises(SelectionError, match="no host 'nope'"):
        inv.host("nope")


def test_shipped_inventory_parses_with_a_working_local_host() -> None:
    shipped = Path(__file__).resolve().parents[2] / "inventory.yaml"
    inv = load_inventory(shipped)
    local = [h for h in inv.hosts if h.connection == "local"]
    assert local, "the shipped inventory has a `local` host"
