"""``orch runs list`` and ``orch runs compare`` in 80 and 100 columns (the real ``orch``, piped, ``COLUMNS`` set),
issue 21. Before: ``runs list`` in 80 columns squeezed label, hosts and "by" to one letter a line (and "by" to
nothing), in 100 it broke ``localho|st``; ``runs compare`` in 100 columns split numbers over lines
(``(134,444–137,1`` / ``60)``). Now no word or number is broken: the columns that do not fit are left out and a
note names them."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest

from orchestrator.protocol import Event
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")

BY = "engineer@workstation-17"
RUNS = [("fp8 nightly sweep", ["gpu-node-01", "localhost"]), (None, ["localhost"]),
        ("bf16 baseline run", ["b300-0", "b300-1", "b300-2"])]  # fmt: skip


def _run(store: Store, label: str | None, hosts: list[str], scale: float, seed: int) -> str:
    """A completed moe-sweep run on ``hosts``: time_ms at M=1..1024 from 20 samples of 1% spread around
    ``1,358.02 ms * scale * M`` (numbers wide enough that a squeezed column would split them)."""
    rng = np.random.default_rng(seed)
    for h in hosts:
        store.upsert_host(h, address=None, group="g", labels={})
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=label, hosts=hosts,
                           started_by=BY, started_on="box")  # fmt: skip
    for h in hosts:
        store.start_host_run(rid, h, facts={"gpus": []}, agent_version="v", build_sha=None)
        events = []
        for i, m in enumerate((1, 8, 64, 256, 1024)):
            xs = [float(x) for x in 1_358.02 * scale * m * (1 + 0.01 * rng.standard_normal(20))]
            p10, med, p90 = (float(q) for q in np.quantile(xs, [0.1, 0.5, 0.9]))
            metric = {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": 20, "samples": xs}
            events.append(Event(seq=i, type="result", data={"case": {"M": m, "dtype": "bf16"},
                                                            "metrics": {"time_ms": metric}}))  # fmt: skip
        store.ingest(rid, h, events)
        store.finish_host_run(rid, h, "completed")
    store.finish_run(rid, "completed")
    return rid


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """The header cells (joined over their lines) and the logical rows of the one table in ``text``: a row's cells
    are its physical lines' pieces joined by one space (a row starts where its first cell is not empty)."""
    lines = text.splitlines()
    heads = [[c.strip() for c in ln.split("┃")[1:-1]] for ln in lines if ln.startswith("┃")]
    header = [" ".join(p for p in parts if p) for parts in zip(*heads, strict=True)]
    rows: list[list[str]] = []
    for ln in lines:
        if not ln.startswith("│"):
            continue
        cells = [c.strip() for c in ln.split("│")[1:-1]]
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
    return header, rows


def _fits(text: str, columns: int) -> None:
    """The table's lines, the title and the note fit (the summary lines after the table are soft-wrapped)."""
    assert max(len(ln) for ln in text.splitlines() if ln[:1] in "┏┃┡│└" or "shown" in ln) <= columns, text


@pytest.mark.parametrize("columns", [80, 100])
def test_runs_list_never_breaks_a_word_and_names_what_it_left_out(orch: Orch, store: Store, columns: int) -> None:
    ids = [_run(store, label, hosts, 1.0, seed) for seed, (label, hosts) in enumerate(RUNS)]
    res = orch("runs", "list", columns=columns)
    assert res.returncode == 0, res.stderr
    _fits(res.stdout, columns)
    header, rows = _table(res.stdout)
    assert header[:3] == ["id", "suite", "status"] and {"results", "errors", "started UTC"} <= set(header)
    assert all(len(h) > 1 for h in header), header  # no column squeezed to a letter
    want = {short_run_id(rid): (label or "-", ", ".join(hosts)) for rid, (label, hosts) in zip(ids, RUNS, strict=True)}
    assert sorted(r[0] for r in rows) == sorted(want)
    note = " ".join(ln for ln in res.stdout.splitlines() if ln.startswith("not shown") or "--json shows" in ln)
    for r in rows:
        label, hosts = want[r[0]]
        for col, value in (("label", label), ("hosts", hosts), ("by", BY)):
            if col in header:
                assert r[header.index(col)] == value, res.stdout  # joined at word breaks only
            else:
                assert col in note.split(": ", 1)[1], res.stdout
    if columns == 100:  # the label and the hosts fit in 100 columns; only "by" gives way
        assert header == ["id", "suite", "status", "label", "hosts", "results", "errors", "started UTC"]
        assert "not shown in 100 columns: by" in res.stdout
    js = orch("runs", "list", "--json", columns=columns)  # --json: every field, whatever the width
    doc = json.loads(js.stdout)
    assert {r["started_by"] for r in doc["items"]} == {BY} and len(doc["items"]) == 3


@pytest.mark.parametrize("columns", [80, 100])
def test_runs_compare_never_splits_a_number(orch: Orch, store: Store, columns: int) -> None:
    base = _run(store, None, ["localhost"], 1.0, seed=1)
    head = _run(store, None, ["localhost"], 1.09, seed=2)
    res = orch("runs", "compare", base, head, columns=columns)
    assert res.returncode == 0, res.stderr
    _fits(res.stdout, columns)
    header, rows = _table(res.stdout)
    doc = json.loads(orch("runs", "compare", base, head, "--json").stdout)
    assert [r[header.index("case")] for r in rows] == [f"M={c['case']['M']}" for c in doc["cases"]]
    assert {r[header.index("verdict")] for r in rows} == {"regression"}
    assert "samples per case: base 20, head 20" in res.stdout  # n, the same for every case: once, not a column
    numbers = [w for ln in res.stdout.splitlines() if ln.startswith("│") for w in ln.replace("│", " ").split()]
    for word in numbers:  # every figure whole: a median, a (p10–p90) range, a ratio, a CI, a q
        assert not word.startswith((",", "–", ".")) and not word.endswith((",", "–", ".")), res.stdout
    if columns == 100:  # base and head fit, each a median and its range on one line or two
        for side in ("base", "head"):
            cells = [r[header.index(f"{side} (p10–p90)")] for r in rows]
            assert all(len(c.split()) == 2 and c.split()[1].startswith("(") and c.endswith(")") for c in cells), cells
        assert "not shown in 100 columns: 95% CI, q" in res.stdout
    else:
        assert header == ["host", "case", "head/base", "verdict"]
        assert "not shown in 80 columns: base (p10–p90), head (p10–p90), 95% CI, q" in res.stdout


def _stacked(text: str) -> dict[str, str]:
    """The rows of a stacked table (one column: a row's first cell alone on its line, then its fields indented
    under it) by first cell, each row's lines joined by one space."""
    rows: dict[str, str] = {}
    first = ""
    for ln in text.splitlines():
        if not ln.startswith("│"):
            continue
        inner = ln[1:].rstrip().removesuffix("│")
        if not inner.startswith("   "):  # a first cell: "│ 8f3a91c2 ..."
            first = inner.strip()
            rows[first] = ""
        else:
            rows[first] = f"{rows[first]} {inner.strip()}".strip()
    return rows


def test_runs_list_in_60_columns_shows_every_field_of_every_run(orch: Orch, store: Store) -> None:
    """Issue 21: at 60 columns the columns ``runs list`` never leaves out (id, suite, status, results, errors,
    started UTC) were wider than the terminal, and the last was cut (``┃ starte``, ``│ 12-03``). A terminal too
    narrow for them gets the runs stacked instead: each id, then every other field by name, wrapped at words."""
    ids = [_run(store, label, hosts, 1.0, seed) for seed, (label, hosts) in enumerate(RUNS)]
    res = orch("runs", "list", columns=60)
    assert res.returncode == 0, res.stderr
    assert max(len(ln) for ln in res.stdout.splitlines()) <= 60, res.stdout
    rows = _stacked(res.stdout)
    doc = orch.json("runs", "list")
    assert sorted(rows) == sorted(short_run_id(rid) for rid in ids), res.stdout
    for item in doc["items"]:
        fields = rows[short_run_id(item["id"])]
        for want in (f"suite {item['suite']}", f"status {item['status']}", f"hosts {', '.join(item['hosts'])}",
                     f"results {item['results']}", f"errors {item['errors']}", f"by {item['started_by']}",
                     *([f"label {item['label']}"] if item["label"] else [])):  # fmt: skip
            assert want in fields, res.stdout
        assert re.search(r"started UTC \d\d-\d\d \d\d:\d\d", fields), res.stdout


# A python: path as long as a conda env's: the failed host's error holds it, a word wider than the error column
LONG_PYTHON = "/opt/conda/envs/inference-benchmarks-2026-q4/bin/python3.12"
FAILED_RUN_LABEL = "fp8 nightly sweep of the kimi-k2 layer after the driver update on the shared fleet"


@pytest.fixture(scope="module")
def failed_host_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Orch, str, str]]:
    """One real ``orch run noop --hosts local`` (COLUMNS=100) of two ``connection: local`` hosts, ``localhost``
    and ``broken`` (its ``python:`` does not exist: it fails before starting) with a long label: the ``orch``,
    the run's output and its state directory on ``localhost`` (a short ``orch_home`` under /tmp, so no single
    word of the output is wider than 100 columns)."""
    tmp = tmp_path_factory.mktemp("failed-host")
    with tempfile.TemporaryDirectory(prefix="o21-", dir="/tmp") as home:
        inv = tmp / "inventory.yaml"
        inv.write_text("groups:\n  local:\n    hosts:\n"
                       f"      localhost: {{connection: local, orch_home: {home}}}\n"
                       f"      broken: {{connection: local, orch_home: {home}, python: {LONG_PYTHON}}}\n")  # fmt: skip
        orch = Orch(inv, f"sqlite:///{tmp / 'orch.db'}", tmp)
        res = orch("run", "noop", "--hosts", "local", "--label", FAILED_RUN_LABEL, columns=100)
        assert res.returncode == 1, res.stdout + res.stderr  # partial: broken failed
        yield orch, res.stdout, home


def test_runs_show_keeps_a_failed_host_s_error_in_100_columns(failed_host_run: tuple[Orch, str, str]) -> None:
    """Issue 21: at 100 columns ``runs show`` left the failed host's error column out ("not shown in 100 columns:
    warnings, agent, error") when the error held a word (the interpreter's path) wider than the column could be.
    The error is why the host failed: its column stays, a word too long for it folded."""
    orch, _, _ = failed_host_run
    res = orch("runs", "show", "latest", columns=100)
    assert res.returncode == 0, res.stderr
    hosts_table = res.stdout.split("\nHosts\n", 1)[1].split("└", 1)[0]
    header, rows = _table(hosts_table)
    assert "error" in header, res.stdout
    assert max(len(ln) for ln in hosts_table.splitlines()) <= 100, res.stdout
    doc = orch.json("runs", "show", "latest")
    said = next(h["error"] for h in doc["hosts"] if h["host"] == "broken").splitlines()[-1]
    assert LONG_PYTHON in said
    row = next(r for r in rows if r[0] == "broken")
    assert "".join(row[header.index("error")].split()) == "".join(said.split()), res.stdout  # whole, if folded


def test_run_and_runs_show_wrap_their_header_and_summary_lines(failed_host_run: tuple[Orch, str, str]) -> None:
    """Issue 21: the lines around the tables — ``runs show``'s and ``run``'s header (run id, suite, status, label;
    who started it), ``run``'s summary (a failed host's reason, where each host's run state went) — ran past the
    terminal's width unwrapped. They wrap at words now; a path or an id is never broken."""
    orch, run_out, home = failed_host_run
    shown = orch("runs", "show", "latest", columns=100)
    assert shown.returncode == 0, shown.stderr
    rid = orch.json("runs", "show", "latest")["run_id"]
    for out in (run_out, shown.stdout):
        over = [ln for ln in out.splitlines() if len(ln) > 100 and len(ln.split()) > 1]  # a lone word may not fit
        assert not over, out
        said = " ".join(out.split())
        assert f"status partial label {FAILED_RUN_LABEL}" in said, out
    said = " ".join(run_out.split())
    assert f"run state (spool, spec, outputs) on the hosts: localhost: {home}/runs/{rid}/localhost/" in said, run_out
    assert any(f"{home}/runs/{rid}/localhost/" in ln for ln in run_out.splitlines()), run_out  # whole on a line
    assert "broken: failed — " in said and any(LONG_PYTHON in ln for ln in run_out.splitlines()), run_out
