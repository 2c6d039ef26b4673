"""The agent reading its spool (``status``, ``cancel``, ``follow``): an I/O error, a spool that is not a regular
file (a FIFO, a device) and a last line that never ends are the host's error or bounded, never a traceback, a
blocked open or the whole file in memory."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import cli, spool

ROOT = Path(__file__).resolve().parents[2]
HOST = "h1"
LINE = b'{"v":1,"seq":0,"type":"hello","ts":1}\n'
DONE = b'{"v":1,"seq":2,"type":"done","ts":2,"status":"completed","counts":{"results":0,"errors":0}}\n'


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "events.jsonl"
    os.mkfifo(path)
    yield path
    try:  # a reader still blocked in open() (before the fix) gets EOF: its thread ends
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def finishes(fn: Callable[[], Any], timeout: float = 5.0) -> BaseException | object:
    """What ``fn()`` raised or returned, failing the test when it does not end within ``timeout`` (blocked)."""
    box: list[Any] = []

    def go() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout)
    assert box, "reading the spool blocked"
    return box[0]


def test_read_lines_refuses_a_fifo_at_once(fifo: Path) -> None:
    got = finishes(lambda: spool.read_lines(str(fifo)))
    assert isinstance(got, spool.SpoolReadError)
    assert str(got) == f"cannot read {fifo}: it is a FIFO, not a regular file"


def test_follow_cursor_refuses_a_fifo_at_once(fifo: Path) -> None:
    got = finishes(lambda: list(spool.SpoolCursor(str(fifo)).new_lines()))
    assert isinstance(got, spool.SpoolReadError) and "a FIFO" in str(got) and str(fifo) in str(got)


def test_read_lines_refuses_a_link_to_a_device_and_a_directory(tmp_path: Path) -> None:
    link = tmp_path / "events.jsonl"
    link.symlink_to("/dev/zero")
    got = finishes(lambda: spool.read_lines(str(link)))
    assert isinstance(got, spool.SpoolReadError) and str(got).endswith("it is a character device, not a regular file")
    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(spool.SpoolReadError, match="it is a directory, not a regular file"):
        spool.read_lines(str(d))


class _Eio:
    """A spool file whose reads fail with EIO, as on a filesystem shut down under the agent."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def __enter__(self) -> _Eio:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def read(self, *a: Any) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO), self._f.name)


def _eio_spool(monkeypatch: pytest.MonkeyPatch) -> None:
    real = spool.open_spool
    monkeypatch.setattr(spool, "open_spool", lambda path: (lambda f: f and _Eio(f))(real(path)))


def test_read_lines_and_the_cursor_name_an_io_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(LINE)
    _eio_spool(monkeypatch)
    want = f"cannot read {path}: Input/output error (EIO)"
    with pytest.raises(spool.SpoolReadError) as got:
        spool.read_lines(str(path))
    assert str(got.value) == want and got.value.errno == errno.EIO
    with pytest.raises(spool.SpoolReadError) as got:
        list(spool.SpoolCursor(str(path)).new_lines())
    assert str(got.value) == want


def _run(home: Path, run_id: str) -> Path:
    run = home / "runs" / run_id / HOST
    run.mkdir(parents=True)
    return run


def test_status_and_follow_answer_an_io_error_with_the_host_s_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, "r")
    (run / "events.jsonl").write_bytes(LINE)
    _eio_spool(monkeypatch)
    opts = ["--orch-home", str(tmp_path), "--host", HOST]
    assert cli.main(["status", "r", *opts]) == cli.EXIT_WRITE
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"error": f"cannot read {run / 'events.jsonl'}: Input/output error (EIO)", "code": "read_failed",
                   "path": str(run / "events.jsonl")}  # fmt: skip
    assert cli.main(["follow", "r", "--from", "0", "--no-worker-check", *opts]) == cli.EXIT_WRITE
    err = capsys.readouterr()
    assert json.loads(err.err)["code"] == "read_failed" and "(EIO)" in json.loads(err.err)["error"]


def test_status_of_a_fifo_spool_answers_at_once(tmp_path: Path) -> None:
    run = _run(tmp_path, "f")
    os.mkfifo(run / "events.jsonl")
    try:
        st = subprocess.run(
            [sys.executable, "-m", "agents.orch_agent", "status", "f", "--orch-home", str(tmp_path), "--host", HOST],
            cwd=ROOT, capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("agent status blocked on a FIFO spool")
    assert st.returncode == cli.EXIT_WRITE and "Traceback" not in st.stdout + st.stderr
    doc = json.loads(st.stdout)
    assert doc["code"] == "read_failed" and doc["error"].endswith("it is a FIFO, not a regular file")


def test_an_over_cap_line_is_one_error_line_never_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool, "MAX_LINE_BYTES", 1000, raising=False)
    monkeypatch.setattr(spool, "READ_CHUNK_BYTES", 64, raising=False)  # lines cross chunk boundaries
    path = tmp_path / "events.jsonl"
    exact = b'{"type":"log","m":"' + b"x" * (1000 - 21) + b'"}\n'  # 1000 bytes without its newline: kept
    assert len(exact) == 1001
    path.write_bytes(LINE + b"y" * 2500 + b"\n" + exact + DONE + b"z" * 3000)
    lines = spool.read_lines(str(path))
    assert len(lines) == 4
    assert lines[0] == LINE and lines[2] == exact and lines[3] == DONE
    assert spool.line_type(lines[1]) == "error" and b"2500 bytes" in lines[1]
    assert spool.find_done(lines) is not None


def test_a_huge_unfinished_last_line_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    cap = 64 * 1024 * 1024
    assert getattr(spool, "MAX_LINE_BYTES", cap) == cap  # orch's cap on a followed line (transport/lines.py)
    path.write_bytes(LINE + DONE)
    with open(path, "r+b") as f:  # a sparse tail of NULs without a newline, as a crashed writer leaves
        f.truncate(len(LINE + DONE) + 3 * cap)
    tracemalloc.start()
    try:
        lines = spool.read_lines(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [LINE, DONE]
    assert peak < 1.5 * cap  # bounded by the cap, not by the file (3 caps)
