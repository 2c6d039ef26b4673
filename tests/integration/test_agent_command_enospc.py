"""A tool's stdout on a full disk (a variant tester's report): with the outputs on a 1 MiB tmpfs and a command
printing 64 KiB per run, 8 runs, each case read "CommandFailed: python3 -c ... exited with status 120; stderr:
(empty)" followed by the agent's own traceback; ENOSPC and the ``outputs/<case>/<run>.stdout`` path were never
named. Right: the command bench names ENOSPC, the file system's free bytes and the paths, and the worker reports
an expected failure (CommandFailed) without its traceback.

A real tmpfs of 1 MiB, mounted for the test (the test command runs as root, as CI does; ``mount`` needs it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent.benches import Context, load
from agents.orch_agent.worker import describe_exception

run_case = load("command")
PRINTS_64K = "import sys; sys.stdout.write('x' * 65536)"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 1 MiB tmpfs needs root (the test command and CI run as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True, timeout=60)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True, timeout=60)


def test_a_command_that_fills_the_disk_names_enospc_and_the_path_without_a_traceback(full_disk: Path) -> None:
    case = {"argv": [sys.executable, "-c", PRINTS_64K], "env": {}, "timeout_s": 60.0}
    ctx = Context(repeat=8, warmup=0)
    ctx.run_dir = str(full_disk)
    ok = 0
    for index in range(4):  # 4 cases x 8 runs x 64 KiB = 2 MiB: the 1 MiB tmpfs is full by the third case
        ctx.case_index = index
        try:
            run_case(case, ctx)
            ok += 1
            continue
        except RuntimeError as exc:
            failed: BaseException = exc
        break
    else:
        raise AssertionError("2 MiB of output fitted on a 1 MiB file system")
    assert 1 <= ok <= 2, ok  # 512 KiB a case: one or two fit, with the file system's own blocks
    out_dir = full_disk / "outputs" / str(ok)
    message = describe_exception(failed)
    m = re.fullmatch(
        r"CommandFailed: \S+ -c import sys; sys.stdout.write\('x' \* 65536\) exited with status (?:1|120) "
        rf"\(the file system holding {re.escape(str(out_dir))} is full: (\d+) bytes free; the command's writes to "
        rf"{re.escape(str(out_dir))}/(\d)\.stdout \(([\d,]+) bytes\), {re.escape(str(out_dir))}/\2\.stderr \(0 bytes\) "
        r"likely failed with ENOSPC, No space left on device: free space there, or point the host's orch_home "
        r"elsewhere\); stderr: \(empty\)",
        message,
    )
    assert m is not None, message  # one line: no "Traceback" and none of the agent's own frames
    assert int(m.group(1)) < 64 * 1024 and int(m.group(3).replace(",", "")) < 65536


def test_a_failed_command_on_a_disk_with_room_says_nothing_of_space(tmp_path: Path) -> None:
    case = {"argv": [sys.executable, "-c", "import sys; sys.exit(3)"], "env": {}, "timeout_s": 60.0}
    ctx = Context(repeat=1, warmup=0)
    ctx.run_dir = str(tmp_path)
    with pytest.raises(RuntimeError) as exc:
        run_case(case, ctx)
    assert describe_exception(exc.value) == (
        f"CommandFailed: {sys.executable} -c import sys; sys.exit(3) exited with status 3; stderr: (empty)"
    )
