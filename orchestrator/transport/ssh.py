"""SSH transport over asyncssh — the only module that imports asyncssh; its exceptions are translated here.

Connecting is a sequence of steps, each with its own deadline, recorded in a :class:`ConnectTrace` so that
``orch doctor`` can say which one failed and why:

1. ``dns``     getaddrinfo of the HostName (inventory ``address`` > ssh_config ``HostName`` > the name).
2. ``tcp``     connect; refused / timeout / no-route / unreachable told apart by errno.
3. ``banner``  peek (MSG_PEEK, so asyncssh still reads it) the server's identification line: a listener that
               never speaks (``banner-timeout``), one that speaks something else (``not-ssh``), one that
               closes at once (``closed``: sshd's MaxStartups drop, retried with jitter, ``throttled`` if it
               persists) and a slow one (banner seen, latency reported) are told apart.
4. ``hostkey`` during key exchange asyncssh hands the offered key to :class:`_HostKeyJudge`, which asks
               :mod:`orchestrator.hostkeys` for the OpenSSH verdict on the name OpenSSH would check
               (HostKeyAlias, else HostName); anything but ``match`` / ``cert-authority`` aborts the handshake
               before authentication. Nothing is ever accepted on first use.
5. ``auth``    public key; permission denied vs too many authentication failures told apart.

Hosts reached through ProxyJump/ProxyCommand skip steps 1-3 (asyncssh opens the tunnel).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import getpass
import os
import random
import shlex
import socket
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.config import SSHClientConfig, SSHConfig

from orchestrator import hostkeys
from orchestrator.errors import (
    AuthError,
    CommandTimeout,
    ConnectError,
    HostError,
    HostKeyError,
    RemoteCommandError,
)
from orchestrator.inventory import Host
from orchestrator.transport.base import DEFAULT_COMMAND_TIMEOUT_S, CommandResult
from orchestrator.transport.lines import MAX_LINE_BYTES, STREAM_CHUNK_BYTES, Line, LineSplitter

BANNER_MAX_BYTES = 8192  # RFC 4253 §4.2 lets a server send other lines before its version line


@dataclass(frozen=True)
class Deadlines:
    """Per-step deadlines in seconds (STYLE: every remote call has one)."""

    dns_s: float = 5.0
    tcp_s: float = 5.0
    banner_s: float = 5.0
    login_s: float = 15.0  # key exchange + host key + authentication
    command_s: float = DEFAULT_COMMAND_TIMEOUT_S


@dataclass
class Step:
    name: str
    status: str  # ok | warn | fail | skipped
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    elapsed_ms: float | None = None


@dataclass
class ConnectTrace:
    """What each connection step found, in order; doctor turns it into checks."""

    steps: dict[str, Step] = field(default_factory=dict)

    def add(
        self,
        name: str,
        status: str,
        detail: str,
        t0: float | None = None,
        data: dict[str, Any] | None = None,
        **more: Any,
    ) -> Step:
        ms = (time.monotonic() - t0) * 1000 if t0 is not None else None
        step = Step(name, status, detail, {**(data or {}), **more}, ms)
        self.steps[name] = step
        return step


class _SshConfig(SSHClientConfig):
    """asyncssh's ssh_config reader, also keeping HashKnownHosts (which asyncssh does not use itself)."""

    _handlers = dict(SSHClientConfig._handlers)
    _handlers["hashknownhosts"] = ("HashKnownHosts", SSHConfig._set_bool)


@dataclass(frozen=True)
class SshTarget:
    """A host's SSH settings after inventory and ~/.ssh/config (Include, Host, Match honoured) are merged.

    Inventory values win over ssh_config, which wins over OpenSSH's defaults.
    """

    name: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    identities_only: bool
    proxy_jump: str | None
    proxy_command: str | None
    host_key_alias: str | None
    user_known_hosts: tuple[str, ...] | None
    global_known_hosts: tuple[str, ...] | None
    hash_known_hosts: bool
    home: Path

    @property
    def key_name(self) -> str:
        """The name known_hosts is searched for, as OpenSSH does: HostKeyAlias, else HostName."""
        return self.host_key_alias or self.hostname

    def known_hosts_files(self) -> list[Path]:
        return hostkeys.default_known_hosts_files(
            self.home,
            list(self.user_known_hosts) if self.user_known_hosts else None,
            list(self.global_known_hosts) if self.global_known_hosts else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "port": self.port,
            "user": self.user,
            "identity_files": list(self.identity_files),
            "proxy_jump": self.proxy_jump,
            "host_key_alias": self.host_key_alias,
        }


def resolve_target(host: Host, *, home: Path | None = None, config_file: Path | None = None) -> SshTarget:
    """Merge the inventory entry with the user's ssh_config for ``host.name`` (OpenSSH's first-match rules)."""
    home = home or Path(os.path.expanduser("~"))
    cfg_path = config_file or home / ".ssh" / "config"
    local_user = getpass.getuser()
    paths = [str(cfg_path)] if cfg_path.is_file() else []
    try:
        cfg = _SshConfig.load(None, paths, False, False, False, local_user, (), host.name, ())
    except (OSError, asyncssh.ConfigParseError) as exc:
        raise ConnectError(host.name, "config", f"cannot read {cfg_path}: {exc}", "fix the ssh_config line") from None

    def opt(name: str) -> Any:
        return cfg.get(name)

    def expand(p: str) -> str:
        return os.path.expanduser(p.replace("%d", str(home)).replace("%u", local_user))

    identity = [host.identity_file] if host.identity_file else list(opt("IdentityFile") or [])
    user_kh = opt("UserKnownHostsFile")
    global_kh = opt("GlobalKnownHostsFile")
    proxy_jump = opt("ProxyJump")
    proxy_cmd = opt("ProxyCommand")
    return SshTarget(
        name=host.name,
        hostname=host.address or opt("Hostname") or host.name,
        port=int(host.port or opt("Port") or 22),
        user=host.user or opt("User") or local_user,
        identity_files=tuple(expand(p) for p in identity),
        identities_only=bool(opt("IdentitiesOnly")),
        proxy_jump=None if proxy_jump in (None, "none") else str(proxy_jump),
        proxy_command=None if not proxy_cmd or proxy_cmd in (["none"], "none") else shlex.join(proxy_cmd),
        host_key_alias=opt("HostKeyAlias"),
        user_known_hosts=tuple(expand(p) for p in user_kh) if user_kh else None,
        global_known_hosts=tuple(expand(p) for p in global_kh) if global_kh else None,
        hash_known_hosts=bool(opt("HashKnownHosts")),
        home=home,
    )


class _Throttle:
    """Bounded concurrency per destination: sshd's default MaxStartups (10:30:100) starts dropping
    unauthenticated connections past 10, so at most ``per_destination`` handshakes run at once per
    (address, port)."""

    def __init__(self, per_destination: int = 8) -> None:
        self.per_destination = per_destination
        self._sems: dict[tuple[str, int], asyncio.Semaphore] = {}

    def for_dest(self, hostname: str, port: int) -> asyncio.Semaphore:
        key = (hostname, port)
        if key not in self._sems:
            self._sems[key] = asyncio.Semaphore(self.per_destination)
        return self._sems[key]


_THROTTLE: _Throttle | None = None


def _throttle() -> _Throttle:
    global _THROTTLE
    if _THROTTLE is None:
        _THROTTLE = _Throttle()
    return _THROTTLE


class _HostKeyJudge(asyncssh.SSHClient):
    """Gives orch's OpenSSH-semantics verdict on the key the server offers, inside the handshake."""

    def __init__(self, target: SshTarget, known: hostkeys.KnownHosts) -> None:
        self.target = target
        self.known = known
        self.verdict: hostkeys.HostKeyVerdict | None = None
        self.offered_ca: str | None = None
        self.offered_blob: bytes | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        # asyncssh hands validate_host_ca_key only the CA key, not the certificate; keep the offered blob so
        # a certificate gets orch's verdict (principal, validity, the @cert-authority line's file:line).
        validate = conn.validate_server_host_key

        def keep_offered(key_data: bytes) -> asyncssh.SSHKey:
            self.offered_blob = bytes(key_data)
            return validate(key_data)

        setattr(conn, "validate_server_host_key", keep_offered)  # noqa: B010 - instance override, not a method

    def _judge(self, offered: hostkeys.OfferedKey) -> hostkeys.HostKeyVerdict:
        t = self.target
        self.verdict = hostkeys.judge(
            self.known, t.hostname, t.port, offered, now=time.time(), host_key_alias=t.host_key_alias,
            inventory_name=t.name,
        )  # fmt: skip
        return self.verdict

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return bool(self._judge(hostkeys.OfferedKey.from_blob(key.public_data)).ok)

    def validate_host_ca_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        # Reached only for a host certificate; asyncssh then checks principals and validity itself.
        self.offered_ca = hostkeys.fingerprint(key.public_data)
        t = self.target
        if self.offered_blob is not None:
            offered = hostkeys.OfferedKey.from_blob(self.offered_blob)
            if offered.is_cert:
                return self._judge(offered).verdict == "cert-authority"
        return bool(
            hostkeys.is_trusted_ca(self.known, t.hostname, t.port, key.public_data, host_key_alias=t.host_key_alias)
        )


def _host_key_algs(known: hostkeys.KnownHosts, target: SshTarget) -> list[str]:
    """Order host key algorithms as OpenSSH does (sshconnect2.c order_hostkeyalgs): types already known for
    the host first; certificate algorithms only when a @cert-authority line covers the host."""
    known_types = known.key_types_for(target.hostname, target.port, host_key_alias=target.host_key_alias)
    plain = [a.decode() for a in asyncssh.public_key.get_default_public_key_algs()]
    certs = [a.decode() for a in asyncssh.public_key.get_default_certificate_algs()]
    preferred = [a for a in plain if _alg_key_type(a) in known_types]
    rest = [a for a in plain if a not in preferred]
    out = preferred + rest
    if known.has_cert_authority_for(target.hostname, target.port, host_key_alias=target.host_key_alias):
        out = certs + out
    return out


def _alg_key_type(alg: str) -> str:
    if alg in ("rsa-sha2-256", "rsa-sha2-512"):
        return "ssh-rsa"
    return alg


async def _peek_banner(sock: socket.socket, timeout_s: float) -> tuple[str, bytes]:
    """Wait for the identification line without consuming it. Returns (kind, bytes seen):
    kind ``ok`` (an ``SSH-`` line), ``silent`` (nothing within the deadline), ``not-ssh``, ``closed``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    seen = b""
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return ("silent" if not seen else "not-ssh"), seen
        fut: asyncio.Future[None] = loop.create_future()

        def ready(f: asyncio.Future[None] = fut) -> None:
            if not f.done():
                f.set_result(None)

        loop.add_reader(sock.fileno(), ready)
        try:
            await asyncio.wait_for(fut, remaining)
        except (asyncio.TimeoutError, TimeoutError):
            return ("silent" if not seen else "not-ssh"), seen
        finally:
            loop.remove_reader(sock.fileno())
        try:
            data = sock.recv(BANNER_MAX_BYTES, socket.MSG_PEEK)
        except (ConnectionResetError, BrokenPipeError):
            return "closed", seen
        except BlockingIOError:
            continue
        if not data:
            return "closed", seen
        if data == seen:  # no new bytes yet (partial line): don't spin
            await asyncio.sleep(0.01)
            continue
        seen = data
        for line in data.split(b"\n")[:-1]:
            if line.startswith(b"SSH-"):
                return "ok", line
        if len(data) >= BANNER_MAX_BYTES or (b"\n" in data and not data.startswith(b"SSH-") and _looks_binary(data)):
            return "not-ssh", data


def _looks_binary(data: bytes) -> bool:
    return any(b < 9 or 13 < b < 32 for b in data[:64])


def _tcp_error_kind(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError) or exc.errno == errno.ECONNREFUSED:
        return "refused"
    if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "no-route"
    if exc.errno == errno.ETIMEDOUT:
        return "timeout"
    return "unreachable"


async def _open_socket(target: SshTarget, dl: Deadlines, trace: ConnectTrace) -> tuple[socket.socket, str]:
    """Steps dns, tcp, banner. Returns a connected socket whose banner is still unread."""
    loop = asyncio.get_running_loop()
    t0 = time.monotonic()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(target.hostname, target.port, type=socket.SOCK_STREAM), dl.dns_s
        )
    except (asyncio.TimeoutError, TimeoutError):
        trace.add("dns", "fail", f"no answer for {target.hostname} within {dl.dns_s:g} s", t0)
        raise ConnectError(
            target.name,
            "dns",
            f"DNS lookup of {target.hostname} timed out",
            "check /etc/resolv.conf or put the address in the inventory",
        ) from None
    except socket.gaierror as exc:
        trace.add("dns", "fail", f"cannot resolve {target.hostname}: {exc.strerror}", t0)
        raise ConnectError(
            target.name,
            "dns",
            f"cannot resolve {target.hostname}: {exc.strerror}",
            "fix the name, set `address:` in the inventory, or add a HostName in ~/.ssh/config",
        ) from None
    addrs = list(dict.fromkeys(str(info[4][0]) for info in infos))
    trace.add("dns", "ok", f"{target.hostname} -> {', '.join(addrs)}", t0, addresses=addrs)

    last_exc: OSError | None = None
    t0 = time.monotonic()
    for family, stype, proto, _, sockaddr in infos:
        sock = socket.socket(family, stype, proto)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, sockaddr), dl.tcp_s)
        except (asyncio.TimeoutError, TimeoutError):
            sock.close()
            last_exc = TimeoutError(errno.ETIMEDOUT, "timed out")
            continue
        except OSError as exc:
            sock.close()
            last_exc = exc
            continue
        trace.add("tcp", "ok", f"connected to {sockaddr[0]}:{target.port}", t0, address=sockaddr[0])
        return sock, str(sockaddr[0])
    assert last_exc is not None
    kind = _tcp_error_kind(last_exc)
    msg = {
        "refused": f"connection refused on port {target.port} (nothing listening: sshd down, or wrong port)",
        "timeout": f"no answer on port {target.port} within {dl.tcp_s:g} s (firewall dropping, or host down)",
        "no-route": f"no route to {target.hostname} (host down or network unreachable)",
        "unreachable": f"cannot connect to port {target.port}: {last_exc.strerror or last_exc}",
    }[kind]
    trace.add("tcp", "fail", msg, t0, kind=kind)
    raise ConnectError(target.name, kind, msg, "check the port in the inventory / ssh_config and that sshd runs")


async def _socket_with_banner(target: SshTarget, dl: Deadlines, trace: ConnectTrace, retries: int) -> socket.socket:
    attempt = 0
    while True:
        sock, _addr = await _open_socket(target, dl, trace)
        t0 = time.monotonic()
        kind, seen = await _peek_banner(sock, dl.banner_s)
        if kind == "ok":
            text = seen.decode("ascii", "replace").strip()
            ms = (time.monotonic() - t0) * 1000
            status = "warn" if ms > dl.banner_s * 500 else "ok"  # over half the deadline: a slow host
            trace.add(
                "banner",
                status,
                text + (f" (slow: {ms:.0f} ms)" if status == "warn" else ""),
                t0,
                banner=text,
                attempts=attempt + 1,
            )
            return sock
        sock.close()
        if kind == "closed" and attempt < retries:
            attempt += 1
            await asyncio.sleep(random.uniform(0.05, 0.3) * attempt)  # MaxStartups drop: back off with jitter
            continue
        if kind == "closed":
            msg = (
                f"server closed the connection before its banner, {attempt + 1} times "
                "(sshd MaxStartups throttling, or TCP wrappers / fail2ban)"
            )
            trace.add("banner", "fail", msg, t0, kind="throttled")
            raise ConnectError(target.name, "throttled", msg, "lower --concurrency or raise MaxStartups in sshd_config")
        if kind == "silent":
            msg = f"port {target.port} accepts TCP but sent no SSH banner within {dl.banner_s:g} s"
            trace.add("banner", "fail", msg, t0, kind="banner-timeout")
            raise ConnectError(
                target.name,
                "banner-timeout",
                msg,
                "a stuck sshd or a non-SSH service on that port; raise --timeout if the host is slow",
            )
        shown = seen[:60].decode("ascii", "replace")
        msg = f"port {target.port} speaks something other than SSH: {shown!r}"
        trace.add("banner", "fail", msg, t0, kind="not-ssh")
        raise ConnectError(target.name, "not-ssh", msg, "check the port: another service listens there")


def _client_keys(target: SshTarget) -> Any:
    if target.identity_files:
        return [f for f in target.identity_files if os.path.exists(f)] or list(target.identity_files)
    return ()


class SshTransport:
    """An open, authenticated SSH connection to one host."""

    def __init__(self, host: str, conn: asyncssh.SSHClientConnection, target: SshTarget) -> None:
        self.host = host
        self._conn = conn
        self.target = target

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
        input: str | None = None,
        check: bool = True,
    ) -> CommandResult:
        cmd = shlex.join(argv)
        t0 = time.monotonic()
        try:
            res = await self._conn.run(cmd, input=input, timeout=timeout_s, check=False)
        except asyncssh.TimeoutError:
            raise CommandTimeout(self.host, list(argv), timeout_s) from None
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(self.host, "closed", f"connection lost while running {argv[0]}: {exc}") from None
        out = res.stdout if isinstance(res.stdout, str) else (res.stdout or b"").decode("utf-8", "replace")
        err = res.stderr if isinstance(res.stderr, str) else (res.stderr or b"").decode("utf-8", "replace")
        result = CommandResult(tuple(argv), res.exit_status, out, err, time.monotonic() - t0)
        if check and result.exit_status != 0:
            raise RemoteCommandError(self.host, list(argv), result.exit_status, err)
        return result

    async def stream(
        self, argv: Sequence[str], *, idle_timeout_s: float | None = None, max_line: int = MAX_LINE_BYTES
    ) -> AsyncIterator[Line]:
        cmd = shlex.join(argv)
        try:
            # bytes, read in chunks and cut by LineSplitter: asyncssh's readline hands back a piece of a line
            # longer than its receive window (2 MiB) as if it were a line
            proc = await self._conn.create_process(cmd, encoding=None)
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(self.host, "closed", f"connection lost starting {argv[0]}: {exc}") from None
        lines = LineSplitter(max_line)
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(proc.stdout.read(STREAM_CHUNK_BYTES), idle_timeout_s)
                except (asyncio.TimeoutError, TimeoutError):
                    raise CommandTimeout(self.host, list(argv), idle_timeout_s or 0) from None
                except (asyncssh.Error, OSError) as exc:
                    raise ConnectError(self.host, "closed", f"connection lost: {exc}") from None
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    yield line
            try:
                await asyncio.wait_for(proc.wait_closed(), 10)
            except (asyncio.TimeoutError, TimeoutError, asyncssh.Error, OSError):
                pass
            status = proc.exit_status
            if status is None and self._conn.is_closed():
                raise ConnectError(self.host, "closed", "connection lost while streaming")
            if status != 0:
                err = await _read_all(proc.stderr)
                raise RemoteCommandError(self.host, list(argv), status, err)
        finally:
            if proc.exit_status is None:
                with contextlib.suppress(Exception):
                    proc.close()

    async def put(self, local: Path, remote: str) -> None:
        parent = str(Path(remote).parent)
        tmp = f"{remote}.{uuid.uuid4().hex[:12]}.part"  # unique: homes shared over NFS see concurrent uploads
        try:
            async with self._conn.start_sftp_client() as sftp:
                if parent not in ("", "."):
                    await sftp.makedirs(parent, exist_ok=True)
                try:
                    await sftp.put(str(local), tmp)
                    await sftp.posix_rename(tmp, remote)
                except BaseException:
                    with contextlib.suppress(asyncssh.SFTPError, asyncssh.Error, OSError):
                        await sftp.remove(tmp)
                    raise
        except (asyncssh.SFTPError, asyncssh.Error, OSError) as exc:
            raise HostError(
                self.host,
                f"SFTP upload of {local.name} to {remote} failed: {exc}",
                "check free disk space and permissions on the host",
            ) from None

    async def close(self) -> None:
        self._conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._conn.wait_closed(), 5)


async def _read_all(stream: Any) -> str:
    try:
        data = await asyncio.wait_for(stream.read(), 2)
    except Exception:  # noqa: BLE001 - best effort tail for an error message
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


async def connect(
    host: Host,
    *,
    deadlines: Deadlines | None = None,
    trace: ConnectTrace | None = None,
    home: Path | None = None,
    retries: int = 3,
) -> SshTransport:
    """Open an authenticated connection to ``host``, judging its host key the OpenSSH way.

    Raises ConnectError (dns / refused / timeout / no-route / banner-timeout / not-ssh / throttled /
    handshake), HostKeyError (verdict other than match / cert-authority), AuthError (denied /
    too-many-failures). ``trace`` receives one Step per stage.
    """
    dl = deadlines or Deadlines()
    trace = trace if trace is not None else ConnectTrace()
    target = resolve_target(host, home=home)
    known = hostkeys.load_known_hosts(target.known_hosts_files())
    via = target.proxy_jump or target.proxy_command
    sem = _throttle().for_dest(target.hostname, target.port)
    async with sem:
        sock: socket.socket | None = None
        if via:
            for name in ("dns", "tcp", "banner"):
                trace.add(name, "skipped", f"reached through {via}")
        else:
            sock = await _socket_with_banner(target, dl, trace, retries)
        judge = _HostKeyJudge(target, known)
        revoked = [asyncssh.import_public_key(line) for line in known.revoked_key_lines()]
        t0 = time.monotonic()
        options: dict[str, Any] = {
            "username": target.user,
            "client_keys": _client_keys(target),
            "known_hosts": lambda _h, _a, _p: ([], [], revoked),
            "client_factory": lambda: judge,
            "server_host_key_algs": _host_key_algs(known, target),
            "config": [],
            "login_timeout": dl.login_s,
            "connect_timeout": dl.login_s,
            "keepalive_interval": 15,
            "keepalive_count_max": 4,
        }
        if target.identities_only:
            options["agent_path"] = None
        if via:
            options["tunnel"] = target.proxy_jump
            if target.proxy_command:
                options["proxy_command"] = target.proxy_command
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(target.hostname, target.port, sock=sock, **options)
                if sock is not None
                else asyncssh.connect(target.hostname, target.port, **options),
                dl.login_s + 1,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            _hostkey_failed(target, judge, str(exc), trace, t0)
            raise AssertionError("unreachable") from exc
        except asyncssh.PermissionDenied as exc:
            _record_hostkey_ok(target, judge, trace, t0)
            _auth_failed(target, str(exc.reason), trace)
            raise AssertionError("unreachable") from exc
        except asyncssh.DisconnectError as exc:
            if judge.verdict is not None and not judge.verdict.ok:
                _hostkey_failed(target, judge, str(exc), trace, t0)
            if "too many authentication failures" in str(exc.reason).lower():
                _record_hostkey_ok(target, judge, trace, t0)
                _auth_failed(target, str(exc.reason), trace, too_many=True)
            msg = f"SSH handshake failed: {exc.reason}"
            trace.add("hostkey" if judge.verdict is None else "auth", "fail", msg, t0)
            raise ConnectError(target.name, "handshake", msg, "check the sshd log on the host") from None
        except (asyncio.TimeoutError, TimeoutError, asyncssh.TimeoutError):
            msg = f"SSH handshake/login did not finish within {dl.login_s:g} s"
            trace.add("hostkey" if judge.verdict is None else "auth", "fail", msg, t0)
            raise ConnectError(target.name, "timeout", msg, "the host is overloaded, or raise --timeout") from None
        except ConnectionResetError:
            trace.add("hostkey", "fail", "connection reset during the SSH handshake", t0)
            raise ConnectError(target.name, "handshake", "connection reset during the SSH handshake") from None
        except OSError as exc:
            kind = _tcp_error_kind(exc)
            trace.add("tcp", "fail", f"{exc}", t0, kind=kind)
            raise ConnectError(target.name, kind, f"cannot connect through {via or 'TCP'}: {exc}") from None
        except asyncssh.Error as exc:
            trace.add("hostkey", "fail", str(exc), t0)
            raise ConnectError(target.name, "handshake", f"SSH error: {exc}") from None
    _record_hostkey_ok(target, judge, trace, t0)
    trace.add("auth", "ok", f"logged in as {target.user}", t0, user=target.user)
    return SshTransport(host.name, conn, target)


def _verdict_data(v: hostkeys.HostKeyVerdict) -> dict[str, Any]:
    """The verdict's fields for a doctor check (``name`` becomes ``lookup_name``; the detail is the check's)."""
    d = dict(v.to_dict())
    d["lookup_name"] = d.pop("name", None)
    d.pop("detail", None)
    return d


def _record_hostkey_ok(target: SshTarget, judge: _HostKeyJudge, trace: ConnectTrace, t0: float) -> None:
    if "hostkey" in trace.steps:
        return
    if judge.verdict is not None:
        trace.add("hostkey", "ok", judge.verdict.detail, t0, data=_verdict_data(judge.verdict))
    else:
        trace.add(
            "hostkey",
            "ok",
            f"host certificate signed by a trusted CA ({judge.offered_ca})",
            t0,
            verdict="cert-authority",
            ca_fingerprint=judge.offered_ca,
            known=[],
        )


def _hostkey_failed(target: SshTarget, judge: _HostKeyJudge, message: str, trace: ConnectTrace, t0: float) -> None:
    v = judge.verdict
    if v is not None and not v.ok:
        trace.add("hostkey", "fail", v.detail, t0, data=_verdict_data(v))
        raise HostKeyError(target.name, v.verdict, v.detail, v.hint)
    low = message.lower()
    if "revoked" in low:
        verdict, detail = "revoked", f"the host's key or its CA is marked @revoked ({message})"
        hint = "the key was revoked on purpose: do not connect; ask who manages the host"
    elif judge.offered_ca is not None or "certificate" in low or "principal" in low:
        verdict = "cert-invalid"
        detail = f"host certificate rejected: {message}"
        hint = "renew the host certificate with a principal matching the host name and a valid period"
    else:
        verdict, detail, hint = "unknown", message, f"orch hosts trust {target.name}"
    trace.add(
        "hostkey",
        "fail",
        detail,
        t0,
        verdict=verdict,
        offered_fingerprint=None,
        ca_fingerprint=judge.offered_ca,
        known=[],
    )
    raise HostKeyError(target.name, verdict, detail, hint)


def _auth_failed(target: SshTarget, reason: str, trace: ConnectTrace, *, too_many: bool = False) -> None:
    keys = ", ".join(target.identity_files) or "the default keys (~/.ssh/id_*) and the agent"
    if too_many or "too many" in reason.lower():
        msg = f"too many authentication failures for {target.user}: the client offered too many keys"
        hint = (
            "set `IdentitiesOnly yes` and `IdentityFile` for this host in ~/.ssh/config, or "
            "`identity_file:` in the inventory, so only the right key is offered"
        )
        trace.add("auth", "fail", msg, kind="too-many-failures", user=target.user)
        raise AuthError(target.name, "too-many-failures", msg, hint)
    msg = f"permission denied for {target.user} (tried {keys})"
    trace.add("auth", "fail", msg, kind="denied", user=target.user)
    raise AuthError(
        target.name,
        "denied",
        msg,
        f"put your public key in ~{target.user}/.ssh/authorized_keys on the host, or set "
        "`identity_file:`/`user:` in the inventory",
    )


async def fetch_offered_key(
    host: Host, *, home: Path | None = None, timeout_s: float = 10.0
) -> tuple[bytes, SshTarget]:
    """Fetch the host key the server offers, without trusting it and without authenticating.

    Returns (public key blob, target). Used by ``orch hosts trust`` to show the fingerprint to confirm.
    """
    target = resolve_target(host, home=home)
    known = hostkeys.load_known_hosts(target.known_hosts_files())
    try:
        key = await asyncio.wait_for(
            asyncssh.get_server_host_key(
                target.hostname,
                target.port,
                server_host_key_algs=[a for a in _host_key_algs(known, target) if "cert" not in a],
                config=[],
            ),
            timeout_s,
        )
    except (asyncio.TimeoutError, TimeoutError):
        raise ConnectError(
            host.name, "timeout", f"no host key from {target.hostname}:{target.port} within {timeout_s:g} s"
        ) from None
    except (OSError, asyncssh.Error) as exc:
        raise ConnectError(
            host.name, "handshake", f"cannot fetch the host key from {target.hostname}:{target.port}: {exc}"
        ) from None
    if key is None:
        raise ConnectError(host.name, "handshake", "the server offered no host key")
    return bytes(key.public_data), target
