"""``cli/prose.wrap``: free text broken at spaces only, indentation kept, a suggested command never broken."""

from __future__ import annotations

from rich.text import Text

from orchestrator.cli.prose import COMMAND_INDENT, wrap


def _lines(markup: str, width: int) -> list[str]:
    return [t.plain for t in wrap(Text.from_markup(markup), width)]


def test_a_line_that_fits_is_left_as_given() -> None:
    assert _lines("  hint: fits  ", 40) == ["  hint: fits  "]


def test_words_are_never_broken_and_indentation_is_kept() -> None:
    out = _lines("    hint: check the port in the inventory / ssh_config and that sshd runs", 30)
    assert out == ["    hint: check the port in", "    the inventory / ssh_config", "    and that sshd runs"]
    assert all(len(ln) <= 30 for ln in out)


def test_a_word_longer_than_the_width_stays_whole_where_it_is() -> None:
    path = "/home/u/.orch/runs/01a2303c-9352-7727-8c5c-a222891a3c15/localhost/"
    assert _lines(f"run state on the hosts: {path} kept", 40) == [f"run state on the hosts: {path}", "kept"]


def test_a_command_that_does_not_fit_goes_on_its_own_indented_line() -> None:
    out = _lines("run 891a3c15 fake-sleep: completed — 2 results from 1 host; details: orch runs show 891a3c15", 80)
    assert out == ["run 891a3c15 fake-sleep: completed — 2 results from 1 host; details:",
                   " " * COMMAND_INDENT + "orch runs show 891a3c15"]  # fmt: skip


def test_a_command_longer_than_the_width_is_not_wrapped_and_the_text_goes_on_after_it() -> None:
    out = _lines("  collect it with: orch run --resume abcdef12 --hosts b300-0,b300-1; the worker goes on", 30)
    assert out == ["  collect it with:", "    orch run --resume abcdef12 --hosts b300-0,b300-1;",
                   "  the worker goes on"]  # fmt: skip


def test_a_command_that_fits_stays_in_the_sentence() -> None:
    text = "no calibration stored (orch calibrate SUITE --hosts SEL), so the floor is from within-run samples"
    assert _lines(text, 60) == ["no calibration stored (orch calibrate SUITE --hosts SEL), so",
                                "the floor is from within-run samples"]  # fmt: skip


def test_styles_are_kept_across_the_breaks() -> None:
    [first, second] = wrap(Text.from_markup("[yellow]cannot judge[/yellow]: a b c [red]slower by far[/red]"), 24)
    assert first.plain == "cannot judge: a b c" and first.spans[0].style == "yellow"
    assert second.plain == "slower by far" and second.spans[0].style == "red"
