"""Numbers in the YAML files orch reads (suites, inventory): YAML 1.2 exponent forms are numbers, and a number a
double cannot hold as written is an error naming its line — never a silent 0.0 or inf (pure)."""

from __future__ import annotations

import math

import pytest

from orchestrator import yamllines
from orchestrator.errors import InventoryError
from orchestrator.inventory import parse_inventory


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e5", 100000.0), ("1.0e5", 100000.0), ("-2.5E-3", -0.0025), (".5e1", 5.0), ("0.0e-400", 0.0), ("0e999", 0.0),
     ("1.5", 1.5), ("12", 12), ("'1e5'", "1e5"), ("1e5x", "1e5x"), ("e5", "e5"), ("5e", "5e")],
)  # fmt: skip
def test_exponent_forms_are_numbers_and_quoted_ones_strings(text: str, value: object) -> None:
    got = yamllines.load(f"a: {text}\n")["a"]
    assert got == value and type(got) is type(value), got


def test_yaml_infinities_and_nan_stay_yamls_own() -> None:
    doc = yamllines.load("a: .inf\nb: -.Inf\nc: .nan\n")
    assert doc["a"] == math.inf and doc["b"] == -math.inf and math.isnan(doc["c"])


@pytest.mark.parametrize(
    ("text", "said"),
    [("1.0e-400", "not zero but below the smallest double"), ("-4e-325", "not zero but below the smallest double"),
     ("1e400", "past the range of a double"), ("-1.8e+309", "past the range of a double")],
)  # fmt: skip
def test_a_number_a_double_cannot_hold_names_its_line(text: str, said: str) -> None:
    with pytest.raises(yamllines.YamlNumberError) as err:
        yamllines.load(f"x: 1\nlist:\n  - 2\n  - {text}\n")
    assert err.value.line == 4 and err.value.problem.startswith(f"the number {text} is {said}")


def test_inventory_number_out_of_range_is_an_inventory_error_with_the_fix() -> None:
    with pytest.raises(InventoryError) as err:
        parse_inventory("groups:\n  g:\n    hosts:\n      h1: {address: h1, port: 1e400}\n", "inv.yaml")
    text = str(err.value)
    assert "inv.yaml:4" in text and "the number 1e400 is past the range of a double" in text, text
    assert "not valid YAML" not in text and err.value.hint == yamllines.YamlNumberError.HINT
