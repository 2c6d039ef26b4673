"""orchestrator/cli/fit.py: least widths never break a word (or a no-wrap cell), columns go by rank (a rank's
columns together), and the room left goes to the wrapping columns up to their natural width."""

from __future__ import annotations

from orchestrator.cli.fit import Col, fit, least_width, natural_width, table_width


def test_least_width_is_the_longest_word_or_the_whole_cell() -> None:
    assert least_width(Col("hosts", ["b300-0, b300-1", "gpu-node-01"], wrap=True)) == len("gpu-node-01")
    assert least_width(Col("id", ["8f3a91c2"])) == 8
    assert least_width(Col("started UTC", ["11-30 23:45"])) == len("started UTC")
    assert least_width(Col("x", ["[green]ok[/green]"])) == 2  # markup is not text
    assert least_width(Col("x", [":thumbs_up:"])) == len(":thumbs_up:")  # printed as typed (emoji=False)
    assert natural_width(Col("label", ["fp8 nightly sweep"], wrap=True)) == len("fp8 nightly sweep")


def test_columns_go_by_rank_and_a_rank_goes_together() -> None:
    cols = [Col("id", ["8f3a91c2"]), Col("base", ["1.0 (0.9–1.1)"], drop=2, wrap=True),
            Col("head", ["2.0 (1.9–2.1)"], drop=2, wrap=True), Col("q", ["2.7e-11"], drop=3)]  # fmt: skip
    every = table_width([8, 13, 13, 7])
    shown, widths, gone = fit(cols, every)
    assert [c.header for c in shown] == ["id", "base", "head", "q"] and widths == [8, 13, 13, 7] and gone == []
    shown, widths, gone = fit(cols, table_width([8, 9, 9]))  # base and head fit wrapped once q is gone
    assert [c.header for c in shown] == ["id", "base", "head"] and widths == [8, 9, 9]
    assert [c.header for c in gone] == ["q"]
    shown, _, gone = fit(cols, table_width([8, 9, 9]) - 1)  # one cell short: base and head go together
    assert [c.header for c in shown] == ["id"] and [c.header for c in gone] == ["base", "head", "q"]


def test_room_goes_to_the_narrowest_wrapping_column_first() -> None:
    cols = [Col("a", ["x yy"], wrap=True), Col("b", ["zzz zzz zzz"], wrap=True)]
    _, widths, _ = fit(cols, table_width([4, 3]))
    assert widths == [4, 3]
    _, widths, _ = fit(cols, table_width([4, 3]) + 3)
    assert widths == [4, 6]  # a is at its natural width (4): b takes the rest
    _, widths, _ = fit(cols, 200)
    assert widths == [4, 11]  # never wider than natural


def test_a_fold_column_is_at_most_fold_width_wide_at_least() -> None:
    from orchestrator.cli.fit import FOLD_WIDTH

    path = "/opt/conda/envs/inference-benchmarks-2026/bin/python3.12: command not found"
    assert least_width(Col("error", [path], wrap=True)) == len(path.split()[0])
    assert least_width(Col("error", [path], wrap=True, fold=True)) == FOLD_WIDTH
    assert least_width(Col("error", ["", "no such file"], wrap=True, fold=True)) == len("error")
