"""The controller record of a run (``orchestrator/controller.py``): a live process is not gone; a dead one, a
reused pid or a reboot is, named; another machine's pid, or nothing recorded, says nothing."""

from __future__ import annotations

import subprocess
import sys

from orchestrator import controller


def test_this_process_is_not_gone_and_a_finished_one_is() -> None:
    me = controller.this_process()
    assert isinstance(me["start_ticks"], int) and me["pid"] > 1
    assert controller.gone(me) is None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = {**me, "pid": child.pid, "start_ticks": 1}
    assert controller.gone(dead) == f"the orch process that drove it (pid {child.pid} on {me['host']}) is gone"


def test_a_reused_pid_a_reboot_and_another_machine() -> None:
    me = controller.this_process()
    reused = controller.gone({**me, "start_ticks": me["start_ticks"] + 1})
    assert reused is not None and reused.endswith(f"(pid {me['pid']} is now another process)")
    rebooted = controller.gone({**me, "boot_id": "00000000-0000-0000-0000-000000000000"})
    assert rebooted is not None and rebooted.endswith(f"{me['host']} has rebooted since")
    assert controller.gone({**me, "host": me["host"] + "-elsewhere", "pid": 1 << 30}) is None
    assert controller.gone(None) is None and controller.gone({"host": me["host"], "pid": True}) is None
