"""Agent pieces without processes: the spool (seq = line number, atomic appends), stats, spec, 3.8 syntax."""

from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest

from agents.orch_agent import spec as agent_spec
from agents.orch_agent.spool import Spool, SpoolWriteError, count_lines, find_done, iter_new_lines, read_lines
from agents.orch_agent.stats import percentile, summarize
from agents.orch_agent.worker import describe_exception
from orchestrator.protocol import parse_line

AGENT_DIR = Path(__file__).resolve().parents[2] / "agents" / "orch_agent"


def test_seq_is_line_number_and_lines_parse(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as sp:
        assert sp.append("hello", agent_version="dev", run_id="r", suite="s", facts={}, cases_total=1) == 0
        assert sp.append("case_start", case_index=0, case={"ms": 1}) == 1
        assert sp.append("done", fsync=True, status="completed", counts={"results": 0, "errors": 0}) == 2
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3
    for i, raw in enumerate(lines):
        ev = parse_line(raw, expected_seq=i)
        assert ev.seq == i and ev.type != "error" and ev.ts is not None
    assert find_done(lines) is not None and find_done(lines)["status"] == "completed"


def test_second_writer_continues_seq_and_repairs_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as a:
        a.append("log", level="info", message="one")
        with open(path, "ab") as f:
            f.write(b"garbage without newline")  # a torn line left by something else
        with Spool(str(path)) as b:
            assert b.append("log", level="info", message="two") == 2
        assert a.append("log", level="info", message="three") == 3
    lines = read_lines(str(path))
    assert [json.loads(x)["seq"] for x in (lines[0], lines[2], lines[3])] == [0, 2, 3]
    assert lines[1] == b"garbage without newline\n"


def test_concurrent_appends_never_share_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    spools = [Spool(str(path)) for _ in range(4)]

    def write(sp: Spool) -> None:
        for i in range(50):
            sp.append("log", level="info", message=f"m{i}")

    threads = [threading.Thread(target=write, args=(sp,)) for sp in spools]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sp in spools:
        sp.close()
    seqs = [json.loads(x)["seq"] for x in read_lines(str(path))]
    assert seqs == list(range(200))


@pytest.mark.parametrize("keep", [0, 1, 2])
def test_a_spool_truncated_under_its_writer_is_refused_not_renumbered(tmp_path: Path, keep: int) -> None:
    """A tester truncated the spool mid-run: the worker numbered its next lines from what was left (seq 0 again),
    and ``--resume``, following from the stored position, stored them as the lost lines. Now the next append
    refuses, naming the truncation, and writes nothing; the same holds for a truncation kept at whole lines."""
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as sp:
        for i in range(3):
            sp.append("log", level="info", message=f"line {i}")
        kept = b"".join(path.read_bytes().splitlines(keepends=True)[:keep])
        with open(path, "r+b") as f:  # cat t > events.jsonl: the same file, cut
            f.truncate(0)
            f.write(kept)
        size = path.stat().st_size
        with pytest.raises(SpoolWriteError) as err:
            sp.append("result", case_index=3, case={}, metrics={})
        assert str(err.value).startswith(f"cannot write {path}: the spool was truncated by something other than "
                                         f"the agent (")  # fmt: skip
        assert f"3 lines, before; {size} bytes now); not numbering new lines from what is left" in str(err.value)
        assert err.value.errno is None and path.read_bytes() == kept
        assert sp.written == 3


def test_a_spool_replaced_or_removed_under_its_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as sp:
        sp.append("log", level="info", message="one")
        (tmp_path / "new").write_bytes(b"")
        (tmp_path / "new").replace(path)  # another file renamed over it
        with pytest.raises(SpoolWriteError, match="the spool was removed or replaced by something other than the "
                                                  "agent; its lines are no longer at this path"):  # fmt: skip
            sp.append("log", level="info", message="two")
        assert path.read_bytes() == b""
    with Spool(str(path)) as sp:
        sp.append("log", level="info", message="one")
        path.unlink()
        with pytest.raises(SpoolWriteError, match="removed or replaced"):
            sp.append("log", level="info", message="two")
        assert not path.exists()


@pytest.mark.parametrize("regrow", [0, 1, 40])
def test_a_spool_rewritten_in_place_under_its_writer_is_refused(tmp_path: Path, regrow: int) -> None:
    """The size alone does not prove the lines are still there: a rewrite at the same length (``regrow`` 0: the
    same bytes count, other lines) and a truncation grown back past the size the writer knew (1, 40 bytes more,
    which looked like another writer's append) were numbered on. The writer reads back its last bytes first."""
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as sp:
        for i in range(3):
            sp.append("log", level="info", message=f"line {i}")
        before = path.read_bytes()
        lines = before.splitlines(keepends=True)
        # head -n 1 events.jsonl > t; cat t > events.jsonl; then lines of the same shape grow it back
        other = lines[0] + lines[2] + lines[1]  # the same bytes count, lines moved
        other += (b"x" * (regrow - 1) + b"\n") if regrow else b""
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(other)
        assert len(other) == len(before) + regrow
        with pytest.raises(SpoolWriteError) as err:
            sp.append("result", case_index=3, case={}, metrics={})
        assert str(err.value).startswith(f"cannot write {path}: the spool was rewritten in place by something other "
                                         f"than the agent (its bytes before {len(before)}, the end of line 2 as the "
                                         f"agent wrote it, differ now; {len(other)} bytes now); not numbering new "
                                         "lines from what is left")  # fmt: skip
        assert err.value.errno is None and path.read_bytes() == other and sp.written == 3


def test_a_spool_swapped_for_a_copy_while_a_hard_link_keeps_it_is_refused(tmp_path: Path) -> None:
    """``ln events.jsonl keep; cp events.jsonl new; mv new events.jsonl``: the writer's file still has a link
    (st_nlink 1, not 0), and the copy at the path has the same bytes, but it is another file: refused."""
    path, keep, new = tmp_path / "events.jsonl", tmp_path / "keep", tmp_path / "new"
    with Spool(str(path)) as sp:
        sp.append("log", level="info", message="one")
        keep.hardlink_to(path)
        new.write_bytes(path.read_bytes())
        new.replace(path)
        assert keep.stat().st_nlink == 1
        with pytest.raises(SpoolWriteError, match="the spool was removed or replaced by something other than the "
                                                  "agent; its lines are no longer at this path"):  # fmt: skip
            sp.append("log", level="info", message="two")
        assert path.read_bytes() == keep.read_bytes() and count_lines(keep.read_bytes()) == 1 and sp.written == 1


def test_a_spool_grown_by_another_writer_is_continued(tmp_path: Path) -> None:
    """Growth is not tampering: ``cancel`` appends ``done`` beside a worker (both through Spool, under flock)."""
    path = tmp_path / "events.jsonl"
    with Spool(str(path)) as a, Spool(str(path)) as b:
        assert a.append("log", level="info", message="one") == 0
        assert b.append("log", level="info", message="two") == 1
        assert a.append("log", level="info", message="three") == 2
        for i in range(3):  # lines shorter than the tail compared, then a's turn again
            assert b.append("x") == 3 + i
        assert a.append("log", level="info", message="four") == 6
        assert b.append("done", status="completed") == 7


def test_count_lines_and_iter_new_lines(tmp_path: Path) -> None:
    assert count_lines(b"") == 0 and count_lines(b"a\n") == 1 and count_lines(b"a\nb") == 2
    path = tmp_path / "s"
    path.write_bytes(b"a\nb\npartial")
    got = list(iter_new_lines(str(path), 0, 0))
    assert [(raw, n) for raw, n, _ in got] == [(b"a\n", 0), (b"b\n", 1)]
    assert got[-1][2] == 4  # offset after "b\n": the partial line is re-read later
    with open(path, "ab") as f:
        f.write(b"\n")
    assert [(raw, n) for raw, n, _ in iter_new_lines(str(path), 4, 2)] == [(b"partial\n", 2)]


def test_summarize_matches_numpy_percentiles() -> None:
    xs = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0]
    m = summarize(xs, "ms")
    assert m["value"] == m["median"] == 3.5
    assert m["p10"] == pytest.approx(1.5) and m["p90"] == pytest.approx(7.5)
    assert (m["min"], m["max"], m["n"], m["samples"]) == (1.0, 10.0, 6, xs)
    assert percentile([7.0], 90) == 7.0


def test_spec_defaults_and_errors() -> None:
    s = agent_spec.validate({"run_id": "r-1", "bench": "sleep", "cases": [{}]})
    assert (s["repeat"], s["warmup"], s["device"], s["seed"], s["suite"]) == (20, 5, "auto", 0, "")
    for bad, word in [
        ({"run_id": "../x", "bench": "sleep", "cases": []}, "run_id"),
        ({"run_id": "r", "bench": "nope", "cases": []}, "bench"),
        ({"run_id": "r", "bench": "sleep", "cases": [1]}, "cases"),
        ({"run_id": "r", "bench": "sleep", "cases": [], "repeat": 0}, "repeat"),
        ({"run_id": "r", "bench": "sleep", "cases": [], "device": "tpu"}, "device"),
    ]:
        with pytest.raises(agent_spec.SpecError, match=word):
            agent_spec.validate(bad)


def test_describe_exception_has_type_message_and_traceback_tail() -> None:
    def boom() -> None:
        raise ValueError("bad M")

    try:
        boom()
    except ValueError as exc:
        text = describe_exception(exc)
    head, *tail = text.splitlines()
    assert head == "ValueError: bad M"
    assert any("boom" in line for line in tail)


@pytest.mark.parametrize("path", sorted(AGENT_DIR.rglob("*.py")), ids=lambda p: p.name)
def test_agent_sources_parse_as_python_38(path: Path) -> None:
    """The agent runs under the host's Python (maybe 3.8): no 3.9+ syntax may slip in (ruff targets 3.10)."""
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    has_future = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    annotated = any(
        isinstance(n, ast.AnnAssign) or (isinstance(n, ast.FunctionDef) and (n.returns or n.args.args))
        for n in ast.walk(tree)
    )
    assert has_future or not annotated, (
        "annotations must stay unevaluated on 3.8 (from __future__ import annotations)"
    )
