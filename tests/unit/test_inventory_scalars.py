"""Inventory scalars as written (issue 12 item 12): YAML 1.1 would turn ``NO`` into False, ``0710`` into 456 and
``12:30`` into 750 (sexagesimal); names, labels and text settings keep the text in the file."""

from __future__ import annotations

import pytest

from orchestrator.errors import InventoryError
from orchestrator.inventory import parse_inventory

WRITTEN = ["NO", "no", "off", "Yes", "y", "0710", "1e3", "12:30", "1_000", "0x1F", "0o17", "true", ".inf", "2026-11-30",
           "null_ish", "+12", "1.50"]  # fmt: skip


@pytest.mark.parametrize("text", WRITTEN)
def test_label_values_keep_their_text(text: str) -> None:
    inv = parse_inventory(f"groups:\n  g:\n    hosts:\n      h: {{labels: {{country: {text}}}}}\n")
    assert inv.hosts[0].labels == {"country": text}


@pytest.mark.parametrize("text", ["NO", "0710", "1e3", "12:30", "on"])
def test_names_and_label_keys_keep_their_text(text: str) -> None:
    inv = parse_inventory(
        f"groups:\n  {text}:\n    vars: {{labels: {{{text}: x}}}}\n    hosts:\n      h1: {{}}\n"
    )
    assert inv.groups == {text: ("h1",)}
    assert inv.host("h1").labels == {text: "x"}
    assert [h.name for h in inv.select(text)] == ["h1"]
    if ":" in text:  # not a host name the agent accepts (letters, digits, '._-'): test_inventory_bad_input.py
        return
    hosts = parse_inventory(f"groups:\n  g:\n    hosts:\n      {text}: {{}}\n      {text}x: {{}}\n")
    assert [h.name for h in hosts.select(text)] == [text]


def test_string_settings_keep_their_text_and_port_is_decimal() -> None:
    inv = parse_inventory(
        "defaults: {user: 0710, python: 3.10, identity_file: 12:30}\n"
        "groups:\n  g:\n    hosts:\n      h: {address: 1e3, port: 0022}\n"
    )
    h = inv.hosts[0]
    assert (h.user, h.python, h.identity_file, h.address, h.port) == ("0710", "3.10", "12:30", "1e3", 22)


def test_quoted_values_are_unchanged_and_null_is_unset() -> None:
    inv = parse_inventory("groups:\n  g:\n    hosts:\n      h: {user: 'NO', address: ~, labels: {a: \"0710\"}}\n")
    h = inv.hosts[0]
    assert (h.user, h.address, h.labels) == ("NO", None, {"a": "0710"})


def test_a_label_without_a_value_names_the_line() -> None:
    with pytest.raises(InventoryError) as exc:
        parse_inventory("groups:\n  g:\n    hosts:\n      h:\n        labels:\n          rack:\n")
    assert exc.value.message == "inventory.yaml:6: groups.g.hosts.h.labels.rack: Input should be a valid string"


def test_labels_select_by_their_written_text() -> None:
    inv = parse_inventory("groups:\n  NO:\n    hosts:\n      oslo-1: {labels: {country: NO}}\n  SE:\n    hosts:\n"
                          "      sto-1: {labels: {country: SE}}\n")  # fmt: skip
    assert [h.name for h in inv.select("NO")] == ["oslo-1"]
    assert inv.hosts[0].labels["country"] == "NO"


def test_build_dir_is_gone_with_a_hint() -> None:
    with pytest.raises(InventoryError) as exc:
        parse_inventory("groups:\n  g:\n    hosts:\n      h: {build_dir: /scratch/builds}\n")
    assert exc.value.message == "inventory.yaml:4: groups.g.hosts.h.build_dir: Extra inputs are not permitted"
    assert exc.value.hint.startswith("build_dir was removed (it never had an effect)")
