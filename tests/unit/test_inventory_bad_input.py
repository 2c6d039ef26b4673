"""Inventory input found wrong by a tester: each is refused with file:line and a fix, or read as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import InventoryError
from orchestrator.inventory import load_inventory, parse_inventory


def _hosts(body: str) -> str:
    return "groups:\n  a:\n    hosts:\n" + body


def test_non_utf8_inventory_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "inv.yaml"
    p.write_bytes(b"groups:\n  a:\n    hosts:\n      h\xff1: {connection: local}\n")
    with pytest.raises(InventoryError) as e:
        load_inventory(p)
    assert e.value.line == 4 and "not UTF-8" in e.value.message and "0xff" in e.value.message
    assert "UTF-8" in e.value.hint


@pytest.mark.parametrize(
    "body",
    ["      ? [x, y]\n      : {connection: local}\n", "      ? {a: 1}\n      : {connection: local}\n"],
)
def test_a_list_or_mapping_as_a_key_is_a_message(body: str) -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts(body), "inv.yaml")
    assert e.value.line == 4 and "mapping key must be a plain value" in e.value.message


@pytest.mark.parametrize("value", ["true", "false", "yes", "on"])
def test_port_true_is_not_port_1(value: str) -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts(f"      h1: {{address: h1, port: {value}}}\n"), "inv.yaml")
    assert e.value.line == 4 and "port" in e.value.message and "1 to 65535" in e.value.hint


def test_port_in_digits_and_quoted_still_read() -> None:
    inv = parse_inventory(_hosts("      h1: {address: h1, port: 0022}\n      h2: {address: h2, port: '2222'}\n"))
    assert [h.port for h in inv.hosts] == [22, 2222]


@pytest.mark.parametrize(
    "names",
    [("0710", "456"), ("0x10", "16"), ("yes", "on"), ("1_000", "1000"), ("1.0", "1"), ("NO", "false"), ("~", "null")],
)
def test_host_names_are_taken_as_written(names: tuple[str, str]) -> None:
    body = "".join(f"      {n}: {{connection: local}}\n" for n in names)
    if "~" in names:
        with pytest.raises(InventoryError):  # a null key is no name at all
            parse_inventory(_hosts(body), "inv.yaml")
        return
    assert [h.name for h in parse_inventory(_hosts(body)).hosts] == list(names)


def test_the_same_name_twice_is_still_a_duplicate() -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts("      h1: {connection: local}\n      'h1': {connection: local}\n"), "inv.yaml")
    assert e.value.line == 5 and "duplicate key 'h1'" in e.value.message


def test_merge_keys_work_and_a_written_key_overrides_the_merged_one() -> None:
    text = (
        "defaults: &base\n  user: bench\n  port: 2200\n"
        "groups:\n  a:\n    hosts:\n"
        "      h1: {<<: *base, address: h1}\n"
        "      h2:\n        <<: *base\n        port: 2201\n        address: h2\n"
    )
    inv = parse_inventory(text)
    assert [(h.name, h.user, h.port) for h in inv.hosts] == [("h1", "bench", 2200), ("h2", "bench", 2201)]


def test_merge_then_the_same_key_twice_is_a_duplicate() -> None:
    text = (
        "defaults: &base\n  user: u\ngroups:\n  a:\n    hosts:\n"
        "      h1:\n        <<: *base\n        port: 1\n        port: 2\n"
    )
    with pytest.raises(InventoryError) as e:
        parse_inventory(text, "inv.yaml")
    assert e.value.line == 9 and "duplicate key 'port'" in e.value.message


@pytest.mark.parametrize("name", ["../../../esc", "h1,h2", "h*", "h 1", ".hidden", "-h", "_h", "h/1", "x" * 129, "hé"])
def test_host_names_the_agent_refuses_are_refused_here(name: str) -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts(f"      {name!r}: {{connection: local}}\n".replace("'", '"')), "inv.yaml")
    assert e.value.line == 4 and "not allowed" in e.value.message
    assert "letters, digits and '._-'" in e.value.hint


def test_allowed_host_names_pass() -> None:
    names = ["h1", "b300-0.example", "A_b", "0", "x" * 128]
    inv = parse_inventory(_hosts("".join(f"      {n}: {{connection: local}}\n" for n in names)))
    assert [h.name for h in inv.hosts] == names


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ('      h1: {address: "10.0.0.1 -oProxyCommand=x"}\n', "' '"),
        ('      h1: {address: "a\\nb"}\n', "'\\n'"),
        ('      h1: {address: "a\\tb"}\n', "'\\t'"),
        ('      h1: {address: "b300-0", user: "ro ot"}\n', "' '"),
    ],
)
def test_an_address_or_user_with_a_space_or_line_break_names_the_inventory_line(line: str, bad: str) -> None:
    """It reached `ssh -G` and came back as 'fix the ssh_config line named above' — a line nobody wrote."""
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts("      h0: {connection: local}\n" + line), "inv.yaml")
    assert e.value.line == 5, e.value
    assert f"contains {bad}" in e.value.message and "without spaces or line breaks" in e.value.message
    assert "ssh_config" not in e.value.hint
    field = "user" if "user" in line else "address"
    assert e.value.message.startswith(f"inv.yaml:5: groups.a.hosts.h1.{field}: Value error, ")
    assert e.value.hint.startswith("write one login name" if field == "user" else "write one host name or IP address")


@pytest.mark.parametrize("value", ["-oProxyCommand=touch", '""', '"  "'])
def test_an_address_ssh_would_read_as_an_option_or_empty_is_refused(value: str) -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts(f"      h1: {{address: {value}}}\n"), "inv.yaml")
    assert e.value.line == 4 and "address" in e.value.message


def test_ipv6_and_names_pass_and_print_in_brackets() -> None:
    from orchestrator.netaddr import host_port
    from orchestrator.transport.sshconfig import JumpHop

    inv = parse_inventory(_hosts("      h1: {address: '::1', port: 39517}\n      h2: {address: b300-0.example}\n"))
    h1, h2 = inv.host("h1"), inv.host("h2")
    assert (h1.address, h2.address) == ("::1", "b300-0.example")
    assert host_port(h1.address, h1.port) == "[::1]:39517" and host_port("10.0.0.1", 22) == "10.0.0.1:22"
    assert host_port("fe80::1%eth0", 22) == "[fe80::1%eth0]:22" and host_port(None, None) == "-:-"
    assert str(JumpHop("::1", "u", 2222)) == "u@[::1]:2222" and str(JumpHop("bastion")) == "bastion"


@pytest.mark.parametrize("port", ["'\u0662\u0662'", "'\uff12\uff12'", "99999999999999999999999"])
def test_a_port_in_other_digits_or_out_of_range_is_refused(port: str) -> None:
    with pytest.raises(InventoryError) as e:
        parse_inventory(_hosts(f"      h1: {{address: h1, port: {port}}}\n"), "inv.yaml")
    assert e.value.line == 4 and "port" in e.value.message and "1 to 65535" in e.value.hint
