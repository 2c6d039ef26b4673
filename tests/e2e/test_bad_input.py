"""Bad input found by a tester, through the real ``orch`` process: each is a message naming the place and the
fix with exit 2 — never a traceback (exit 70), a misleading "database error" or a silent success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch


@pytest.fixture
def local(tmp_path: Path) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text("groups:\n  l:\n    hosts:\n      l1: {connection: local}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    done = orch("run", "noop", "--hosts", "l1")
    assert done.returncode == 0, done.stderr
    return orch


def _usage(res: object, *expected: str) -> None:
    rc, err = res.returncode, res.stderr  # type: ignore[attr-defined]
    assert rc == 2, err
    assert "Traceback" not in err and "hit a bug" not in err and "database error" not in err, err
    for text in expected:
        assert text in err, err


# Python hands a non-UTF-8 argv byte over as a lone surrogate (surrogateescape); subprocess encodes it back.
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("runs", "label", "latest", "\udcff"), "argument 4 ('\\xff') is not valid UTF-8"),
        (("run", "sglang-one-batch", "--hosts", "l1", "--set", "model=\udcff"), "--set 'model=\\xff' is not valid"),
        (("run", "sglang-one-batch", "--hosts", "l1", "--set=model=\udcff"), "--set 'model=\\xff' is not valid"),
        (("runs", "list", "--label", "a\udce9b"), "--label 'a\\xe9b' is not valid UTF-8"),
        (("run", "noop", "--hosts", "l\udcff"), "--hosts 'l\\xff'"),
        (("runs", "list", "--since", "99999999d"), "--since '99999999d' reaches back before the year 1"),
        (("runs", "list", "--since", "1e300w"), "--since '1e300w'"),
        # other scripts' digits, which Python's int()/float() (and so click) would read as numbers
        (("run", "noop", "--hosts", "l1", "--repeat", "\u0661\u0662"),
         "--repeat '\u0661\u0662': a number must be written in ASCII digits 0-9"),
        (("runs", "check", "latest", "--base", "latest", "--min-change=\u0660\u066b\u0665"),
         "--min-change '\u0660\u066b\u0665': a number must be written in ASCII digits 0-9"),
        (("runs", "list", "--limit", "\uff11"), "--limit '\uff11': a number must be written in ASCII digits 0-9"),
        (("runs", "list", "--since", "\u0661\u0662d"), "--since '\u0661\u0662d'"),
    ],
)
def test_undecodable_and_out_of_range_arguments(local: Orch, args: tuple[str, ...], expected: str) -> None:
    _usage(local(*args), expected)
    assert local.json("runs", "show", "latest")["run"]["label"] is None  # nothing was written


def test_an_existing_non_utf8_file_name_is_still_a_path(local: Orch) -> None:
    odd = local.cwd / "inv\udcff.yaml"
    odd.write_text(local.inventory.read_text())
    res = local("-i", str(odd), "hosts", "list", "--json")
    assert res.returncode == 0, res.stderr


def test_non_utf8_suite_file_names_file_and_line(local: Orch) -> None:
    suites = local.cwd / "suites"
    suites.mkdir()
    (suites / "bad.yaml").write_bytes(b"name: bad\ndescription: \xff\xfe\n")
    _usage(local("suites", "list", "--suite-dir", str(suites)), "bad.yaml:2: not UTF-8 text: byte 0xff")


def test_suite_dir_that_is_a_file_says_so(local: Orch) -> None:
    _usage(local("suites", "list", "--suite-dir", str(local.inventory)), "is a file, not a directory")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"groups:\n  a:\n    hosts:\n      h\xff1: {connection: local}\n", "inventory.yaml:4: not UTF-8 text"),
        (b"groups:\n  a:\n    hosts:\n      ? [x, y]\n      : {connection: local}\n", "inventory.yaml:4:"),
        (b"groups:\n  a:\n    hosts:\n      h1: {address: h1, port: true}\n", "port"),
        (b"groups:\n  a:\n    hosts:\n      '../../../esc': {connection: local}\n", "'._-'"),
    ],
)
def test_bad_inventories(local: Orch, text: bytes, expected: str) -> None:
    local.inventory.write_bytes(text)
    _usage(local("hosts", "list"), expected)


@pytest.mark.parametrize("args", [("runs", "list"), ("db", "upgrade"), ("run", "noop", "--hosts", "l1")])
@pytest.mark.parametrize("what", ["text file", "directory"])
def test_db_that_is_not_an_sqlite_database(local: Orch, args: tuple[str, ...], what: str) -> None:
    target = local.cwd / "not-a-db"
    if what == "directory":
        target.mkdir()
        expected = "names a directory, not an SQLite database"
    else:
        target.write_text("hello\n")
        expected = "not-a-db is not an SQLite database"
    _usage(local("--db", f"sqlite:///{target}", *args), expected, "--db sqlite:///PATH")
    assert "reachable" not in local("--db", f"sqlite:///{target}", *args).stderr
    if what == "text file":
        assert target.read_text() == "hello\n"  # left as it was


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("runs", "list", "--status", "bogus"), "use one of: pending, running, completed, partial, failed, cancelled"),
        (("runs", "changes", "--suite", "nosuch", "--metric", "val"), "no run of suite 'nosuch' is stored"),
        (("runs", "changes", "--suite", "noop", "--metric", "val"), "metrics stored: time_ms"),
        (("runs", "list", "--suite", "nosuch"), "--suite 'nosuch' is neither a known suite nor one with stored runs"),
    ],
)
def test_unknown_status_suite_or_metric_is_exit_2(local: Orch, args: tuple[str, ...], expected: str) -> None:
    _usage(local(*args), expected)


def test_runs_list_of_a_known_suite_without_runs_is_an_empty_answer(local: Orch) -> None:
    assert local.json("runs", "list", "--suite", "hbm-bandwidth")["items"] == []  # built-in, never run here


def test_known_suite_and_metric_still_scan(local: Orch) -> None:
    report = local.json("runs", "changes", "--suite", "noop", "--metric", "time_ms")
    assert (report["suite"], report["series"]) == ("noop", 1)


def test_db_before_and_after_the_subcommand_the_later_wins(local: Orch) -> None:
    other = local.cwd / "other.db"
    assert local("--db", f"sqlite:///{other}", "run", "noop", "--hosts", "l1").returncode == 0
    before, after = f"sqlite:///{local.cwd / 'orch.db'}", f"sqlite:///{other}"
    runs = local.json("--db", before, "runs", "list", "--db", after)["items"]
    runs_other = local.json("--db", after, "runs", "list", "--db", before)["items"]
    assert len(runs) == 1 and len(runs_other) == 1 and runs[0]["id"] != runs_other[0]["id"]
    assert runs[0]["id"] == local.json("--db", after, "runs", "list")["items"][0]["id"]
    assert "the last one counts" in local("--help").stdout


def test_every_spelling_of_the_inventory_option_means_the_same_before_and_after_the_subcommand(local: Orch) -> None:
    """The finding: `orch hosts list -i/path/inv.yaml` failed with "No such option: -i", and `orch -i=/path/inv.yaml
    hosts list` read the file "=/path/inv.yaml" (after the subcommand -i= meant the path already)."""
    inv = local.cwd / "other.yaml"
    inv.write_text("groups:\n  o:\n    hosts:\n      other1: {connection: local}\n")
    for spelling in (["-i", str(inv)], [f"-i{inv}"], [f"-i={inv}"], ["--inventory", str(inv)], [f"--inventory={inv}"]):
        for args in ([*spelling, "hosts", "list", "--json"], ["hosts", "list", "--json", *spelling]):
            res = local(*args)
            assert res.returncode == 0, (args, res.stderr)
            assert [h["name"] for h in json.loads(res.stdout)["hosts"]] == ["other1"], args
    helped = " ".join(local("--help").stdout.split())
    assert "-i PATH, -iPATH and -i=PATH alike, before or after the subcommand" in helped


@pytest.mark.parametrize("option", ["--db", "--inventory", "-i"])
def test_global_option_without_its_value_after_the_subcommand(local: Orch, option: str) -> None:
    _usage(local("runs", "list", option), f"{option} needs a value")


@pytest.mark.parametrize("label", ["two\nlines", "x" * 256, "bell\x07"])
def test_run_label_is_refused_as_runs_label_refuses_it(local: Orch, label: str) -> None:
    """The finding: `orch run --label` stored a label with a newline or over 255 characters, which `orch runs
    label` refuses; now both refuse it with one message, exit 2, before any run starts."""
    before = len(local.json("runs", "list")["items"])
    for args in (("runs", "label", "latest", label), ("run", "noop", "--hosts", "l1", "--label", label)):
        _usage(local(*args), "a label is one line of at most 255 characters, without control characters")
    assert len(local.json("runs", "list")["items"]) == before  # no run was started
    assert local("run", "noop", "--hosts", "l1", "--label", "x" * 255).returncode == 0
