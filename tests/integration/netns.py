"""A network namespace for hosts that only a jump host can reach (``unshare -n`` + a veth pair; needs root).

Inside, the namespace's own loopback (127.0.0.1) is invisible from the test's namespace: an sshd listening
there is reachable only through an sshd that also runs inside and listens on the veth address, which the
test's namespace reaches. The holder process keeps the namespace alive; killing it removes the veth pair.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


@dataclass
class Netns:
    pid: int
    outside: str  # the test namespace's end of the veth pair
    inside: str  # the namespace's end: a jump host listens here

    @property
    def wrapper(self) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net"]


def _ip(*args: str, wrapper: list[str] | None = None) -> None:
    subprocess.run([*(wrapper or []), "ip", *args], check=True, capture_output=True, timeout=30)


@contextmanager
def netns() -> Iterator[Netns]:
    """Yield a fresh network namespace linked to this one by a /30 (skips when namespaces are not allowed)."""
    if not shutil.which("unshare") or not shutil.which("nsenter") or not shutil.which("ip") or os.geteuid() != 0:
        pytest.skip("network namespaces need root, unshare, nsenter and ip (iproute2)")
    holder = subprocess.Popen(["unshare", "-n", "sleep", "3600"])
    tag = f"{os.getpid() % 10000}{holder.pid % 100}"
    net = 4 * (holder.pid % 60) + 4
    third = (os.getpid() % 200) + 10
    outside, inside = f"10.254.{third}.{net + 1}", f"10.254.{third}.{net + 2}"
    try:
        mine = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 30
        while os.readlink(f"/proc/{holder.pid}/ns/net") == mine:
            if time.monotonic() > deadline or holder.poll() is not None:
                pytest.skip("unshare -n did not create a network namespace here")
            time.sleep(0.02)
        ns = Netns(holder.pid, outside, inside)
        try:
            _ip("link", "add", f"ov{tag}a", "type", "veth", "peer", "name", f"ov{tag}b", "netns", str(holder.pid))
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create a veth pair here: {exc.stderr.decode(errors='replace').strip()}")
        _ip("addr", "add", f"{outside}/30", "dev", f"ov{tag}a")
        _ip("link", "set", f"ov{tag}a", "up")
        _ip("addr", "add", f"{inside}/30", "dev", f"ov{tag}b", wrapper=ns.wrapper)
        _ip("link", "set", f"ov{tag}b", "up", wrapper=ns.wrapper)
        _ip("link", "set", "lo", "up", wrapper=ns.wrapper)
        yield ns
    finally:
        holder.kill()
        holder.wait()
