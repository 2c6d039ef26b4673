"""What a new user following the README hit (issues 21 and 14), through the real ``orch`` process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.protocol import Event
from orchestrator.store.compute import distinct_short_ids, uuid7
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")


def _with_tail(tail: str) -> str:
    """A fresh UUIDv7 whose last 8 hex digits (its short id) are ``tail``."""
    return uuid7()[:-8] + tail


def stored_run(store: Store, run_id: str | None = None, *, suite: str = "moe-sweep", hosts: int = 1,
               results: int = 1, params: dict[str, object] | None = None, preset: str | None = None) -> str:
    """A completed run of ``results`` time_ms results on each of ``hosts`` hosts (h0, h1, ...)."""
    names = [f"h{i}" for i in range(hosts)]
    for h in names:
        store.upsert_host(h, address=f"{h}.example", group="g", labels={})
    rid = store.create_run(suite=suite, params=params or {}, preset=preset, label=None, hosts=names,
                           started_by="t@box", started_on="box", run_id=run_id)  # fmt: skip
    for h in names:
        store.start_host_run(rid, h, facts={}, agent_version="v", build_sha=None)
        metric = {"value": 1.0, "unit": "ms", "median": 1.0, "p10": 1.0, "p90": 1.0}
        store.ingest(rid, h, [Event(seq=i, type="result", data={"case": {"M": 2**i}, "metrics": {"time_ms": metric}})
                              for i in range(results)])  # fmt: skip
        store.finish_host_run(rid, h, "completed")
    store.finish_run(rid, "completed")
    return rid


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_prefix_of_the_printed_short_id_resolves(orch: Orch, store: Store) -> None:
    a = stored_run(store, _with_tail("f5563d1d"))
    b = stored_run(store, _with_tail("f5569e00"))
    c = stored_run(store, _with_tail("08678f18"))
    listed = orch("runs", "list").stdout
    assert {"f5563d1d", "f5569e00", "08678f18"} <= set(re.findall(r"[0-9a-f]{8}", listed))
    for ref, rid in (("0867", c), ("08678", c), ("f5563", a), ("f5569e", b), ("f5563d1d", a), (a[:13], a)):
        res = orch("runs", "show", ref, "--json")
        assert res.returncode == 0, (ref, res.stderr)
        assert f'"id": "{rid}"' in res.stdout, ref
    # ambiguous: exit 2, both matches named by their short ids, and where more characters come from
    res = orch("runs", "show", "f556")
    assert res.returncode == 2, res.stdout
    err = _flat(res.stderr)
    assert "run id 'f556' is ambiguous: it matches" in err
    assert "f5563d1d (moe-sweep" in err and "f5569e00 (moe-sweep" in err and "08678f18" not in err
    assert "name the run by one of the ids above, as the ID column of `orch runs list` prints it" in err
    assert "Traceback" not in res.stderr
    # a prefix of the full id shared by every run started this minute is ambiguous the same way
    res = orch("runs", "show", a[:4])
    assert res.returncode == 2 and "is ambiguous" in _flat(res.stderr)
    # unknown and malformed
    res = orch("runs", "show", "abcd")
    assert res.returncode == 2 and "no run matches 'abcd'" in _flat(res.stderr)
    res = orch("runs", "show", "f5z")
    assert res.returncode == 2
    assert "invalid run id 'f5z'" in _flat(res.stderr) and "latest~N" in _flat(res.stderr)


def test_runs_sharing_a_short_id_are_named_by_longer_ids_everywhere(orch: Orch, store: Store) -> None:
    """The finding: two runs whose ids end in the same 8 hex digits were both listed as ``0badf00d``, and ``runs
    show 0badf00d`` said ambiguous and asked for "more characters of the short id" that no listing printed."""
    a = stored_run(store, _with_tail("0badf00d"))
    b = stored_run(store, _with_tail("0badf00d"))
    other = stored_run(store, _with_tail("1234abcd"))
    longer = distinct_short_ids([a, b])
    assert all(len(longer[r]) > 8 for r in (a, b)) and longer[a] != longer[b]
    listed = orch("runs", "list").stdout
    assert longer[a] in listed and longer[b] in listed and "1234abcd" in listed, listed
    res = orch("runs", "show", "0badf00d")
    assert res.returncode == 2, res.stdout
    err = _flat(res.stderr)
    assert f"{longer[a]} (moe-sweep" in err and f"{longer[b]} (moe-sweep" in err, err
    for rid in (a, b):  # the id the listing and the hint print names the run, and every message prints it
        res = orch("runs", "show", longer[rid])
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(f"run {longer[rid]} ("), res.stdout[:200]
    res = orch("runs", "compare", longer[a], longer[b])
    assert f"head {longer[b]} / base {longer[a]}" in _flat(res.stdout), res.stdout + res.stderr
    assert orch("runs", "show", "1234abcd").stdout.startswith(f"run 1234abcd ({other}")  # unique: 8 digits


def test_logs_of_a_suite_that_runs_no_command_says_so(orch: Orch, store: Store) -> None:
    rid = stored_run(store)
    short = rid[-8:]
    for extra in ((), ("--case", "0")):
        res = orch("runs", "logs", short, *extra)
        assert res.returncode == 2, (extra, res.stdout, res.stderr)
        err = _flat(res.stderr)
        assert f"run {short} ran the built-in suite 'moe-sweep', which runs no command" in err
        assert "the host keeps outputs only for command suites (YAML suites with a `command:`)" in err
        assert f"orch runs show {short}" in err and res.stdout == ""


def test_project_from_a_cpu_run_says_it_has_no_gpu(orch: Orch, store: Store) -> None:
    rid = stored_run(store, results=3)
    res = orch("project", "--run", rid[-8:], "--to", "b300")
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = _flat(res.stderr)
    assert f"run {rid[-8:]} has no GPU: it ran on h0, a CPU host" in err, err
    assert "None" not in err and "Traceback" not in err


def test_counts_are_singular_for_one(orch: Orch, store: Store) -> None:
    one = stored_run(store)
    two = stored_run(store, hosts=2, results=2)
    res = orch("runs", "rm", one[-8:], "--yes")
    assert res.returncode == 0, res.stderr
    assert "1 result on 1 host, started" in _flat(res.stderr)
    assert f"deleted 1 run: {one[-8:]}" in _flat(res.stdout)
    res = orch("runs", "rm", two[-8:], "--yes")
    assert "4 results on 2 hosts, started" in _flat(res.stderr)


def test_a_local_cpu_run_records_its_preset_and_says_what_was_asked(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    home = tmp_path / "home"  # connection: local writes the host side under orch_home, not the real ~/.orch
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {home}}}\n")
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    assert orch("db", "upgrade").returncode == 0
    res = orch("run", "moe-sweep", "--hosts", "localhost", "--set", "M=1", "--repeat", "3")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = orch.json("runs", "show", "latest")
    rid, short = doc["run_id"], doc["run_id"][-8:]
    summary = f"run {short} moe-sweep: completed — 1 result from 1 host; details: orch runs show {short}"
    assert summary in _flat(res.stdout)
    assert doc["run"]["preset"] == "tiny"  # the default the CPU host chose, not null
    show = orch("runs", "show", short)
    chosen = "preset: tiny (chosen by orch: the suite's default for the hosts)"
    assert f"asked: --set M=1 --repeat 3; {chosen}" in show.stdout
    assert "sets=" not in show.stdout and "None" not in show.stdout.splitlines()[2]
    # rerun prints short ids, as everything else does
    rerun = orch("runs", "rerun", short)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    line = next(ln for ln in rerun.stdout.splitlines() if " replays " in ln)
    assert re.fullmatch(rf"run [0-9a-f]{{8}} \(completed\) replays {short}: localhost completed 1 result", line), line
    assert rid not in rerun.stdout
    # asked for explicitly: said so, without "chosen"
    res = orch("run", "moe-sweep", "--hosts", "localhost", "--set", "M=1", "--repeat", "2", "--preset", "tiny")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "asked: --set M=1 --repeat 2 --preset tiny; preset: tiny\n" in orch("runs", "show", "latest").stdout
    # projecting a CPU run: no GPU, exit 2, no "None"
    proj = orch("project", "--run", short, "--to", "b300")
    assert proj.returncode == 2 and f"run {short} has no GPU: it ran on localhost, a CPU host" in _flat(proj.stderr)


def test_plot_of_a_suite_whose_file_is_not_loaded_says_so(orch: Orch, store: Store, tmp_path: Path) -> None:
    rid = stored_run(store, suite="my-engine-bench", results=3)
    out = tmp_path / "x.svg"
    res = orch("runs", "plot", rid[-8:], "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_text().lstrip().startswith("<?xml")
    assert res.stdout.startswith(f"wrote {out}: my-engine-bench time_ms of run {rid[-8:]}")
    err = _flat(res.stderr)
    assert "suite 'my-engine-bench' is not loaded (no suite file defining it under --suite-dir or ORCH_SUITE_DIR" in err
    assert "every stored metric was plotted: time_ms; to plot what the suite declares, add --suite-dir DIR" in err
    # one metric asked for: nothing was guessed, nothing to say
    res = orch("runs", "plot", rid[-8:], "--metric", "time_ms", "-o", str(out))
    assert res.returncode == 0 and res.stderr == "", res.stderr
