"""The CLI for daily use, through the real ``orch`` process: global options anywhere, short run ids and
``latest``, runs label/rm and list filters, one exit-code contract, tables that fit a 100-column terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from pathlib import Path

import pytest

from orchestrator.protocol import Event
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")


def _run(store: Store, suite: str = "moe-sweep", label: str | None = None, median: float = 1.0) -> str:
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite=suite, params={}, preset=None, label=label, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    store.ingest(
        rid,
        "h1",
        [
            Event(
                seq=0,
                type="result",
                data={
                    "case": {"M": 1},
                    "metrics": {
                        "time_ms": {"value": median, "unit": "ms", "median": median, "p10": median, "p90": median}
                    },
                },
            )
        ],
    )
    store.finish_host_run(rid, "h1", "completed")
    store.finish_run(rid, "completed")
    return rid


def _ids_listed(stdout: str) -> list[str]:
    return re.findall(r"^│ ([0-9a-f]{8}) ", stdout, flags=re.M)


def test_global_options_after_the_subcommand(orch: Orch, store: Store, tmp_path: Path) -> None:
    rid = _run(store)
    other = Orch(tmp_path / "missing.yaml", "sqlite:///" + str(tmp_path / "nope.db"), tmp_path)
    # the environment points at a store that does not exist; --db after the subcommand points at the real one
    res = other("runs", "list", "--db", orch.db_url)
    assert res.returncode == 0, res.stderr
    assert _ids_listed(res.stdout) == [short_run_id(rid)]
    res = other("runs", "show", short_run_id(rid), f"--db={orch.db_url}", "-i", str(orch.inventory))
    assert res.returncode == 0, res.stderr
    assert f"run {short_run_id(rid)} ({rid})" in res.stdout
    # the value of a subcommand's own option is never taken for a global option
    res = orch("runs", "list", "--label", "--db")
    assert res.returncode == 0, res.stderr
    assert _ids_listed(res.stdout) == []
    # before the subcommand works as it always did
    res = other("--db", orch.db_url, "runs", "list")
    assert _ids_listed(res.stdout) == [short_run_id(rid)]


def test_short_ids_of_runs_started_together_are_unique_and_resolve(orch: Orch, store: Store) -> None:
    ids = [_run(store, median=float(i + 1)) for i in range(5)]
    assert len({i[:8] for i in ids}) == 1  # the documented 8-character prefix would be ambiguous
    res = orch("runs", "list")
    listed = _ids_listed(res.stdout)
    assert sorted(listed) == sorted(short_run_id(i) for i in ids) and len(set(listed)) == 5
    for rid in ids:
        out = orch("runs", "show", short_run_id(rid), "--json")
        assert out.returncode == 0, out.stderr
        assert f'"id": "{rid}"' in out.stdout
    res = orch("runs", "show", ids[0][:8])
    assert res.returncode == 2
    assert "is ambiguous: it matches" in " ".join(res.stderr.split())


def test_latest_and_show_without_id(orch: Orch, store: Store) -> None:
    first, second = _run(store, label="a"), _run(store, label="b", median=2.0)
    assert f"({second})" in orch("runs", "show").stdout
    assert f"({second})" in orch("runs", "show", "latest").stdout
    assert f"({first})" in orch("runs", "show", "latest~1").stdout
    res = orch("runs", "show", "latest~2")
    assert res.returncode == 2 and "fewer than 3 runs are stored" in " ".join(res.stderr.split())
    res = orch("runs", "compare", "latest~1", "latest")
    assert res.returncode == 0, res.stderr
    assert "2.000" in res.stdout  # medians 1.0 -> 2.0


def test_label_rm_and_list_filters(orch: Orch, store: Store) -> None:
    a, b = _run(store, label="old"), _run(store, suite="hbm-bandwidth")
    res = orch("runs", "label", short_run_id(b), "nightly [/b] fp8")
    assert res.returncode == 0, res.stderr
    assert store.get_run(b).label == "nightly [/b] fp8"
    assert _ids_listed(orch("runs", "list", "--label", "nightly [/b] fp8").stdout) == [short_run_id(b)]
    assert _ids_listed(orch("runs", "list", "--suite", "moe-sweep").stdout) == [short_run_id(a)]
    assert sorted(_ids_listed(orch("runs", "list", "--since", "1h").stdout)) == sorted(map(short_run_id, [a, b]))
    assert _ids_listed(orch("runs", "list", "--since", "2999-01-01").stdout) == []
    bad = orch("runs", "list", "--since", "yesterday")
    assert bad.returncode == 2 and "--since 'yesterday' is neither an age nor an ISO 8601 time" in bad.stderr
    assert orch("runs", "label", "latest", "").returncode == 0
    assert store.get_run(b).label is None
    # rm asks; without a terminal it refuses and deletes nothing
    res = orch("runs", "rm", short_run_id(a))
    assert res.returncode == 2 and "pass --yes" in res.stderr
    assert len(store.list_runs().items) == 2
    res = orch("runs", "rm", short_run_id(a), "--yes")
    assert res.returncode == 0, res.stderr
    assert f"deleted 1 run: {short_run_id(a)}" in res.stdout
    assert [r.id for r in store.list_runs().items] == [b]
    assert orch("runs", "show", a).returncode == 2


def test_runs_list_status_is_case_insensitive_and_an_unknown_one_names_the_states(orch: Orch, store: Store) -> None:
    """Issue 21: ``runs list --status RUNNING`` was refused ("--status 'RUNNING' is not a run state"); a state is
    taken in any case. An unknown one still lists the states, exit 2."""
    done = _run(store)
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    running = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                               started_by="t@box", started_on="box")  # fmt: skip
    for given, want in (("RUNNING", running), ("Running", running), ("COMPLETED", done)):
        res = orch("runs", "list", "--status", given)
        assert res.returncode == 0, res.stderr
        assert _ids_listed(res.stdout) == [short_run_id(want)], res.stdout
    assert [r["id"] for r in orch.json("runs", "list", "--status", "RUNNING")["items"]] == [running]
    bad = orch("runs", "list", "--status", "RUNING")
    assert bad.returncode == 2 and bad.stdout == "", bad.stderr
    assert bad.stderr.splitlines() == ["error: --status 'RUNING' is not a run state",
                                       "hint: use one of: pending, running, completed, partial, failed, cancelled"]

def test_rm_declined_at_the_prompt_says_nothing_was_removed_and_exits_0(orch: Orch, store: Store) -> None:
    """The finding: answering no to `orch runs rm`'s question exited 1 ("a host or run failed") without a word."""
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.finish_run(rid, "completed")
    master, slave = pty.openpty()  # a terminal on stdin: rm asks
    try:
        proc = subprocess.Popen(orch.argv("runs", "rm", short_run_id(rid)), cwd=orch.cwd, env=orch.env(),
                                stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        os.write(master, b"n\n")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(master)
        os.close(slave)
    assert proc.returncode == 0, out + err
    assert f"nothing removed: 1 run kept: {short_run_id(rid)}" in out, out
    assert store.get_run(rid).id == rid


def test_rm_refuses_a_running_run(orch: Orch, store: Store) -> None:
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    res = orch("runs", "rm", rid, "--yes")
    assert res.returncode == 2 and "orch cancel" in res.stderr
    assert store.get_run(rid).id == rid


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list", "--db", "not a url"),
        ("runs", "show", "latest", "--db", "sqlite:////nonexistent/dir/orch.db"),
        ("runs", "list", "--db", "mysql+nodriver://u@h/db"),
        ("runs", "show", "0123456789ab"),
        ("runs", "show", "zz-not-an-id"),
    ],
)
def test_configuration_and_usage_errors_exit_2(orch: Orch, args: tuple[str, ...]) -> None:
    res = orch(*args)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stderr.startswith("error:") and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_runs_list_fits_100_columns(orch: Orch, store: Store) -> None:
    ids = [_run(store, label="a long label for the nightly fp8 sweep") for _ in range(3)]
    env_orch = Orch(orch.inventory, orch.db_url, orch.cwd)
    res = env_orch("runs", "list", columns=100)
    assert res.returncode == 0, res.stderr
    assert all(len(line) <= 100 for line in res.stdout.splitlines())
    assert sorted(_ids_listed(res.stdout)) == sorted(map(short_run_id, ids))  # each id whole on one line


def test_help_states_the_exit_codes_once_per_default(orch: Orch) -> None:
    res = orch("--help")
    text = " ".join(res.stdout.split())
    assert "0 success; 1 a host or run failed; 2 usage or configuration error" in text
    for cmd in (("run", "--help"), ("runs", "list", "--help"), ("deploy", "--help")):
        out = orch(*cmd).stdout
        for line in out.splitlines():
            assert not (re.search(r"default \w", line, re.I) and "[default:" in line), line


def test_runs_show_prints_spread_and_sample_count(orch: Orch, store: Store) -> None:
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rids = []
    for suite, case, name, unit in (
        ("moe-sweep", {"M": 64}, "time_ms", "ms"),
        ("hbm-bandwidth", {"size": 1}, "gbps", "GB/s"),
    ):
        rid = store.create_run(suite=suite, params={}, preset=None, label=None, hosts=["h1"],
                               started_by="t@box", started_on="box")  # fmt: skip
        store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
        store.ingest(
            rid,
            "h1",
            [
                Event(
                    seq=0,
                    type="result",
                    data={
                        "case": case,
                        "metrics": {
                            name: {"value": 7.96, "unit": unit, "median": 7.96, "p10": 7.9, "p90": 8.12, "n": 20}
                        },
                    },
                )
            ],
        )
        rids.append(rid)
    moe = orch("runs", "show", rids[0]).stdout
    rows = [line for line in moe.splitlines() if line.startswith("│") and "(7.90" in line]
    assert len(rows) == 1, moe
    row = rows[0]
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:2] == ["64", "7.96 (7.90–8.12)"] and cells[-2] == "20"
    gen = orch("runs", "show", rids[1]).stdout
    [row] = [line for line in gen.splitlines() if line.startswith("│") and "(7.90" in line]
    assert [c.strip() for c in row.split("│")[1:-1]][1:3] == ["7.96 (7.90–8.12) GB/s", "20"]
