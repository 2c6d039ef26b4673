"""The SSH test bed: real OpenSSH ``sshd`` processes (Debian's openssh-server), one per simulated host.

Each host binds its own loopback address (127.0.0.12, .13, ... — all of 127.0.0.0/8 is loopback) on a free
port, has its own host keys, and its own remote HOME (sshd ``SetEnv HOME=...`` and ``internal-sftp -d``), so two
simulated hosts never share ``~/.orch`` — unless a test passes one ``home=`` to both, as an NFS home would.
sshd runs as the current user (root in CI). The client side is a temporary HOME with a generated key, a
known_hosts file and an ssh_config; tests point orch at it by setting ``HOME``.

Pathological peers (no banner, garbage banner) are small asyncio servers elsewhere in the tests.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.plugins.services import service_unavailable
from tests.plugins.timing import scaled

SSHD = shutil.which("sshd", path="/usr/sbin:/usr/bin:" + os.environ.get("PATH", "")) or "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
_addr_counter = itertools.count(11)


def next_loopback_address() -> str:
    """The next loopback address for a test sshd: 127.0.0.12, 127.0.0.13, ... then on into 127.0.1.1 and beyond
    (all of 127/8 is loopback on Linux). One pytest process adds several hundred hosts: counting in the last
    octet only ran past 127.0.0.255 once the suite grew ("Name or service not known" in CI)."""
    n = next(_addr_counter)
    return f"127.0.{n // 254}.{n % 254 + 1}"


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def keygen(path: Path, key_type: str = "ed25519") -> Path:
    args = [SSH_KEYGEN, "-q", "-t", key_type, "-N", "", "-f", str(path), "-C", path.name]
    if key_type == "rsa":
        args[4:4] = ["-b", "2048"]
    subprocess.run(args, check=True)
    return path


@dataclass
class SshdHost:
    """One simulated host: a real sshd on ``address:port``."""

    name: str
    address: str
    port: int
    root: Path
    host_keys: dict[str, Path]
    home: Path
    authorized_keys: Path
    extra_config: list[str] = field(default_factory=list)
    host_certs: list[Path] = field(default_factory=list)
    wrapper: list[str] = field(default_factory=list)  # e.g. nsenter into a network namespace
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the host's sessions (sshd takes one SetEnv line: HOME and these go in it)."""

    @property
    def config_path(self) -> Path:
        return self.root / "sshd_config"

    def pubkey_line(self, key_type: str = "ed25519") -> str:
        return self.host_keys[key_type].with_suffix(".pub").read_text().strip()

    def known_hosts_line(self, key_type: str = "ed25519", name: str | None = None) -> str:
        typ, blob = self.pubkey_line(key_type).split()[:2]
        n = name or self.address
        host = n if self.port == 22 else f"[{n}]:{self.port}"
        return f"{host} {typ} {blob}"

    def write_config(self) -> None:
        lines = [
            f"ListenAddress {f'[{self.address}]' if ':' in self.address else self.address}:{self.port}",  # IPv6
            *(f"HostKey {p}" for p in self.host_keys.values()),
            *(f"HostCertificate {c}" for c in self.host_certs),
            f"PidFile {self.root / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "StrictModes no",
            *(
                ()
                if any(x.lower().startswith("maxstartups") for x in self.extra_config)
                else ["MaxStartups 100:30:200"]
            ),
            "MaxAuthTries 6",
            "SetEnv " + " ".join(f"{k}={v}" for k, v in {"HOME": str(self.home), **self.env}.items()),
            *(
                ()  # a test's own Subsystem lines replace the default (no SFTP: a subsystem of another name)
                if any(x.lower().startswith("subsystem") for x in self.extra_config)
                else [f"Subsystem sftp internal-sftp -d {self.home}"]
            ),
            "LogLevel VERBOSE",
            *self.extra_config,
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        self.write_config()
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        with open(self.root / "sshd.log", "ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [*self.wrapper, SSHD, "-D", "-e", "-f", str(self.config_path)], stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + scaled(30)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.root / "sshd.log").read_text()[-2000:]
                raise RuntimeError(f"sshd for {self.name} exited: {log}")
            if self.wrapper:  # not reachable from here (another network namespace): sshd says when it listens
                if f"Server listening on {self.address} port {self.port}" in (self.root / "sshd.log").read_text():
                    return
                time.sleep(0.05)
                continue
            try:
                with socket.create_connection((self.address, self.port), timeout=scaled(5)) as s:
                    s.settimeout(scaled(10))
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd for {self.name} did not come up on {self.address}:{self.port}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(scaled(20))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill_sessions(self) -> None:
        """Kill the per-connection sshd children (drops every open SSH session) but keep the listener."""
        if not self.proc:
            return
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        for pid in out.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reinstall(self, key_type: str = "ed25519") -> None:
        """Simulate a reinstall: new host key, restart."""
        self.stop()
        for suffix in ("", ".pub"):
            Path(str(self.host_keys[key_type]) + suffix).unlink(missing_ok=True)
        keygen(self.host_keys[key_type], key_type)
        self.start()


@dataclass
class ClientHome:
    """The orch user's side: HOME with ~/.ssh/{id_ed25519, known_hosts, config}."""

    home: Path
    key: Path

    @property
    def ssh_dir(self) -> Path:
        return self.home / ".ssh"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.ssh_dir / "config"

    def trust(self, *hosts_lines: str) -> None:
        with self.known_hosts.open("a") as f:
            for line in hosts_lines:
                f.write(line + "\n")

    def add_config(self, text: str) -> None:
        """Add ``text`` to ~/.ssh/config ahead of the bed's ``Host *`` defaults (OpenSSH: first value wins)."""
        cfg = self.ssh_config.read_text()
        head, marker, tail = cfg.partition(BED_DEFAULTS_MARKER)
        self.ssh_config.write_text(head + text.rstrip("\n") + "\n" + marker + tail)


class SshdBed:
    """Factory for simulated hosts sharing one client HOME."""

    def __init__(self, root: Path, client: ClientHome) -> None:
        self.root = root
        self.client = client
        self.hosts: list[SshdHost] = []

    def add(
        self,
        name: str,
        *,
        key_types: tuple[str, ...] = ("ed25519",),
        port: int | None = None,
        trusted: bool = True,
        authorized: bool = True,
        extra_config: list[str] | None = None,
        start: bool = True,
        home: Path | None = None,
        address: str | None = None,
        wrapper: list[str] | None = None,
    ) -> SshdHost:
        """A new host; ``home``: a remote HOME to share with other hosts (as over NFS), else its own;
        ``address``: where it listens (default: the next 127.0.0.X); ``wrapper``: a command prefix for sshd
        (e.g. nsenter into a network namespace)."""
        address = address or next_loopback_address()
        root = self.root / name
        (root / "keys").mkdir(parents=True)
        if home is None:
            home = root / "home"
            home.mkdir()
        keys = {t: keygen(root / "keys" / f"ssh_host_{t}_key", t) for t in key_types}
        ak = root / "authorized_keys"
        ak.write_text(self.client.key.with_suffix(".pub").read_text() if authorized else "")
        ak.chmod(0o600)
        host = SshdHost(
            name=name,
            address=address,
            port=port or free_port(address),
            root=root,
            host_keys=keys,
            home=home,
            authorized_keys=ak,
            extra_config=list(extra_config or []),
            wrapper=list(wrapper or []),
        )
        if trusted:
            self.client.trust(*(host.known_hosts_line(t) for t in key_types))
        if start:
            host.start()
        self.hosts.append(host)
        return host

    def inventory_yaml(self, groups: dict[str, list[SshdHost]], python: str | None = None) -> str:
        import yaml

        doc: dict[str, object] = {"defaults": {"python": python or _venv_python()}, "groups": {}}
        for g, hs in groups.items():
            doc["groups"][g] = {  # type: ignore[index]
                "hosts": {h.name: {"address": h.address, "port": h.port} for h in hs}
            }
        return yaml.safe_dump(doc, sort_keys=False)

    def close(self) -> None:
        for h in self.hosts:
            h.stop()
        kill_processes_under(self.root)


def kill_processes_under(root: Path) -> list[int]:
    """SIGKILL every process whose command line names a path under ``root`` (agents that a test left detached on a
    simulated host, e.g. after a timeout), so a failed test cannot leave benchmarks burning the CI machine's CPU.
    Returns the pids killed."""
    needle = str(root)
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def _venv_python() -> str:
    import sys

    return sys.executable


BED_DEFAULTS_MARKER = "# -- test bed defaults"


def make_client_home(home: Path) -> ClientHome:
    """A fresh orch-user HOME: ~/.ssh (0700) with a generated ed25519 key, empty known_hosts, and a config.

    OpenSSH expands ``~`` to the account's home (the password database's), not ``$HOME``; orch passes
    ``-F $HOME/.ssh/config`` to ``ssh -G`` when they differ. The config therefore names this HOME's key and
    known_hosts in a final ``Host *`` block (what OpenSSH's defaults would be under this HOME); tests add
    their blocks before it with :meth:`ClientHome.add_config`.
    """
    ssh = home / ".ssh"
    ssh.mkdir(parents=True)
    ssh.chmod(0o700)
    key = keygen(ssh / "id_ed25519")
    (ssh / "known_hosts").touch()
    (ssh / "config").write_text(
        f"{BED_DEFAULTS_MARKER}: OpenSSH's defaults as if ~ were $HOME\n"
        f"Host *\n  IdentityFile {key}\n  UserKnownHostsFile {ssh / 'known_hosts'} {ssh / 'known_hosts2'}\n"
    )
    return ClientHome(home=home, key=key)


@pytest.fixture
def client_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientHome:
    client = make_client_home(tmp_path / "client")
    monkeypatch.setenv("HOME", str(client.home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client


@pytest.fixture
def sshd_bed(tmp_path: Path, client_home: ClientHome) -> Iterator[SshdBed]:
    if not os.path.exists(SSHD):
        service_unavailable(
            "sshd", f"no OpenSSH sshd at {SSHD}", "apt-get install openssh-server (scripts/setup.sh --system)"
        )
    bed = SshdBed(tmp_path / "bed", client_home)
    try:
        yield bed
    finally:
        bed.close()
