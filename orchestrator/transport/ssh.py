"""SSH transport over asyncssh — the only module that opens asyncssh connections; its exceptions are translated here.

What to connect to and how is OpenSSH's answer (:mod:`orchestrator.transport.sshconfig`, ``ssh -G``); this
module carries it out with asyncssh. Connecting is a sequence of steps, each with its own deadline, recorded in
a :class:`ConnectTrace` so that ``orch doctor`` can say which one failed and why:

1. ``dns``     getaddrinfo of the HostName ssh -G printed.
2. ``tcp``     connect; refused / timeout / no-route / unreachable told apart by errno. ConnectTimeout, when
               ssh_config sets one shorter than orch's deadline, bounds this step and the banner.
3. ``banner``  peek (MSG_PEEK, so asyncssh still reads it) the server's identification line: a listener that
               never speaks (``banner-timeout``), one that speaks something else (``not-ssh``), a slow one
               (banner seen, latency reported), and sshd's MaxStartups drop — a close before any banner, with
               or without sshd's ``Exceeded MaxStartups`` line — which is retried with exponential backoff
               and jitter and reported as ``throttled`` only when the retries run out.
4. ``hostkey`` during key exchange asyncssh hands the offered key to :class:`_Client`, which asks
               :mod:`orchestrator.hostkeys` for the OpenSSH verdict on the name OpenSSH would check
               (HostKeyAlias, else HostName; certificates' principals are checked against the same name);
               anything but ``match`` / ``cert-authority`` aborts the handshake before authentication.
5. ``auth``    public keys in OpenSSH's order (sshconnect2.c ``pubkey_prepare``): the agent's keys first
               (unless IdentitiesOnly), then the IdentityFiles that exist (with their certificates and
               CertificateFile), a file whose key the agent holds signed by the agent. Failures name the
               user, the methods the server allowed and every identity tried.

ProxyJump: every hop is resolved by ``ssh -G`` like a host, connected with the same steps (the first hop's
dns/tcp/banner are this host's), its key judged by the same rules; the hops are listed in the ``hostkey``
step's ``hops``. ProxyCommand: run whole, as ssh runs it; steps 1-3 are then skipped.

Handshakes run at most :data:`PER_ADDRESS_HANDSHAKES` at once per resolved (address, port): sshd's default
``MaxStartups 10:30:100`` starts dropping unauthenticated connections past 10, whatever names they used.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import random
import shlex
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import asyncssh

from orchestrator import hostkeys
from orchestrator.errors import (
    AuthError,
    CommandTimeout,
    ConnectError,
    HostError,
    HostKeyError,
    OrchError,
    RemoteCommandError,
    command_shown,
)
from orchestrator.inventory import Host
from orchestrator.netaddr import host_port
from orchestrator.transport.base import DEFAULT_COMMAND_TIMEOUT_S, CommandResult
from orchestrator.transport.lines import MAX_LINE_BYTES, STREAM_CHUNK_BYTES, Line, LineSplitter
from orchestrator.transport.sshconfig import (
    MAX_JUMP_DEPTH,
    SshResolver,
    SshSettings,
    client_tokens,
    parse_jump,
    proxy_command_argv,
)
from orchestrator.transport.watch import IdleTimeout, Silent, StreamWatch, silent_error

BANNER_MAX_BYTES = 8192  # RFC 4253 §4.2 lets a server send other lines before its version line
PER_ADDRESS_HANDSHAKES = 8  # below sshd's default MaxStartups start (10), see the module docstring
THROTTLE_RETRIES = 7  # backoff 0.25, 0.5, 1, 2, 3, 3, 3 s (x0.5-1.5 jitter): ~13 s at most before `throttled`
MAXSTARTUPS_TEXT = b"Exceeded MaxStartups"  # sshd.c server_accept_loop writes this before closing (OpenSSH 9.2)


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
    """What each connection step found, in order; doctor turns it into checks. ``settings``: what ssh -G
    resolved for the host (None when resolution failed); ``hops``: one summary per ProxyJump hop."""

    steps: dict[str, Step] = field(default_factory=dict)
    settings: SshSettings | None = None
    hops: list[dict[str, Any]] = field(default_factory=list)

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


class _Throttle:
    """One semaphore per resolved (address, port): at most ``per_destination`` handshakes at once there."""

    def __init__(self, per_destination: int = PER_ADDRESS_HANDSHAKES) -> None:
        self.per_destination = per_destination
        self._sems: dict[tuple[str, int], asyncio.Semaphore] = {}

    def for_dest(self, address: str, port: int) -> asyncio.Semaphore:
        key = (address, port)
        if key not in self._sems:
            self._sems[key] = asyncio.Semaphore(self.per_destination)
        return self._sems[key]


_THROTTLES: dict[int, _Throttle] = {}


def _throttle() -> _Throttle:
    """The throttle of the running event loop (a semaphore belongs to one loop)."""
    loop_id = id(asyncio.get_running_loop())
    if loop_id not in _THROTTLES:
        _THROTTLES.clear()
        _THROTTLES[loop_id] = _Throttle()
    return _THROTTLES[loop_id]


@dataclass
class _Identity:
    label: str
    keypair: asyncssh.SSHKeyPair


class _Client(asyncssh.SSHClient):
    """Judges the offered host key (orch's OpenSSH-semantics verdict, inside the handshake) and hands out the
    identities one at a time, recording what was tried and which methods the server allowed."""

    def __init__(self, settings: SshSettings, known: hostkeys.KnownHosts, identities: list[_Identity]) -> None:
        self.settings = settings
        self.known = known
        self.verdict: hostkeys.HostKeyVerdict | None = None
        self.offered_ca: str | None = None
        self.offered_blob: bytes | None = None
        self.peer_address: str | None = None
        self._queue = list(identities)
        self.tried: list[str] = []
        self.methods: list[str] = []
        self._conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn
        # asyncssh hands validate_host_ca_key only the CA key, not the certificate; keep the offered blob so
        # a certificate gets orch's verdict (principal, validity, the @cert-authority line's file:line).
        validate = conn.validate_server_host_key

        def keep_offered(key_data: bytes) -> asyncssh.SSHKey:
            self.offered_blob = bytes(key_data)
            return validate(key_data)

        setattr(conn, "validate_server_host_key", keep_offered)  # noqa: B010 - instance override, not a method

    def _judge(self, offered: hostkeys.OfferedKey, addr: str | None) -> hostkeys.HostKeyVerdict:
        s = self.settings
        self.peer_address = addr
        self.verdict = hostkeys.judge(
            self.known, s.hostname, s.port, offered, now=time.time(), host_key_alias=s.host_key_alias,
            inventory_name=s.name,
        )  # fmt: skip
        if self.verdict.ok and s.check_host_ip and addr and not s.host_key_alias and addr != s.hostname.lower():
            self.verdict = hostkeys.check_ip(self.known, self.verdict, addr, s.port, offered)
        return self.verdict

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return bool(self._judge(hostkeys.OfferedKey.from_blob(key.public_data), addr).ok)

    def validate_host_ca_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        # Reached only for a host certificate; asyncssh then checks principals (against host_key_alias or
        # the host) and validity itself, as orch's verdict did.
        self.offered_ca = hostkeys.fingerprint(key.public_data)
        s = self.settings
        if self.offered_blob is not None:
            offered = hostkeys.OfferedKey.from_blob(self.offered_blob)
            if offered.is_cert:
                return self._judge(offered, addr).verdict == "cert-authority"
        return bool(
            hostkeys.is_trusted_ca(self.known, s.hostname, s.port, key.public_data, host_key_alias=s.host_key_alias)
        )

    def _note(self, method: str) -> None:
        allowed = list(self._conn.get_server_auth_methods()) if self._conn is not None else []
        for m in [method, *allowed]:
            if m not in self.methods:
                self.methods.append(m)

    def public_key_auth_requested(self) -> asyncssh.SSHKeyPair | None:
        self._note("publickey")
        if not self._queue:
            return None
        ident = self._queue.pop(0)
        self.tried.append(ident.label)
        return ident.keypair

    def kbdint_auth_requested(self) -> str | None:
        self._note("keyboard-interactive")  # orch answers no prompts (it runs unattended, like BatchMode)
        return None

    def password_auth_requested(self) -> str | None:
        self._note("password")
        return None


async def _identities(s: SshSettings) -> tuple[list[_Identity], list[str], asyncssh.SSHAgentClient | None]:
    """The keys to offer, in OpenSSH's order, and notes on what was skipped (missing, encrypted, no agent)."""
    notes = [f"{p} (no such file; skipped, as OpenSSH skips it)" for p in s.missing_identities]
    agent: asyncssh.SSHAgentClient | None = None
    agent_keys: list[asyncssh.SSHKeyPair] = []
    if s.identity_agent:
        if os.path.exists(s.identity_agent):
            agent = asyncssh.SSHAgentClient(s.identity_agent)
            try:
                agent_keys = list(await asyncio.wait_for(agent.get_keys(), 10))
            except (OSError, asyncssh.Error, ValueError, asyncio.TimeoutError, TimeoutError) as exc:
                notes.append(f"the agent at {s.identity_agent} did not answer ({exc or type(exc).__name__})")
                agent.close()
                agent = None
        else:
            notes.append(f"IdentityAgent {s.identity_agent} does not exist")
    by_blob = {bytes(k.key_public_data): k for k in agent_keys}
    files: list[_Identity] = []
    in_files: set[bytes] = set()
    certs = [c for c in s.certificate_files if os.path.exists(c)]
    for path in s.identity_files:
        if path in s.missing_identities:
            continue
        pub_blob = _public_blob(path)
        if pub_blob is not None and pub_blob in by_blob:
            in_files.add(pub_blob)
            files.append(_Identity(f"{path} (signed by the agent)", by_blob[pub_blob]))
            continue
        try:
            pairs = asyncssh.load_keypairs([path], certlist=certs, ignore_encrypted=True)
        except (OSError, ValueError, asyncssh.Error) as exc:
            notes.append(f"{path} (cannot be read: {exc})")
            continue
        if not pairs:
            notes.append(f"{path} (passphrase-protected and not in the agent; skipped)")
        for pair in pairs:
            in_files.add(bytes(pair.key_public_data))
            cert = " with its certificate" if pair.public_data != pair.key_public_data else ""
            files.append(_Identity(f"{path}{cert}", pair))
    from_agent = [
        _Identity(f"agent key {hostkeys.fingerprint(bytes(k.key_public_data))} ({_comment(k)})", k)
        for k in agent_keys
        if bytes(k.key_public_data) not in in_files and not s.identities_only
    ]
    return from_agent + files, notes, agent


def _comment(k: asyncssh.SSHKeyPair) -> str:
    c = k.get_comment()
    return c or "no comment"


def _public_blob(path: str) -> bytes | None:
    """The public key of an IdentityFile, from ``PATH.pub`` (as ssh loads it) — None when unreadable."""
    try:
        return bytes(asyncssh.read_public_key(path + ".pub").public_data)
    except (OSError, ValueError, asyncssh.Error):
        return None


def _host_key_algs(known: hostkeys.KnownHosts, s: SshSettings) -> list[str]:
    """Order host key algorithms as OpenSSH does (sshconnect2.c order_hostkeyalgs): types already known for
    the host first; certificate algorithms only when a @cert-authority line covers the host."""
    known_types = known.key_types_for(s.hostname, s.port, host_key_alias=s.host_key_alias)
    plain = [a.decode() for a in asyncssh.public_key.get_default_public_key_algs()]
    certs = [a.decode() for a in asyncssh.public_key.get_default_certificate_algs()]
    preferred = [a for a in plain if _alg_key_type(a) in known_types]
    rest = [a for a in plain if a not in preferred]
    out = preferred + rest
    if known.has_cert_authority_for(s.hostname, s.port, host_key_alias=s.host_key_alias):
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


def _step_deadlines(dl: Deadlines, s: SshSettings) -> Deadlines:
    """ConnectTimeout (ssh_config) bounds TCP connect and the banner, as in ssh; orch's deadline when shorter."""
    if s.connect_timeout_s is None:
        return dl
    ct = s.connect_timeout_s
    return Deadlines(dl.dns_s, min(dl.tcp_s, ct), min(dl.banner_s, ct), dl.login_s, dl.command_s)


async def _resolve(s: SshSettings, dl: Deadlines, trace: ConnectTrace) -> list[tuple[Any, ...]]:
    loop = asyncio.get_running_loop()
    t0 = time.monotonic()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(s.hostname, s.port, type=socket.SOCK_STREAM), dl.dns_s)
    except (asyncio.TimeoutError, TimeoutError):
        trace.add("dns", "fail", f"no answer for {s.hostname} within {dl.dns_s:g} s", t0)
        raise ConnectError(
            s.name,
            "dns",
            f"DNS lookup of {s.hostname} timed out",
            "check /etc/resolv.conf or put the address in the inventory",
        ) from None
    except socket.gaierror as exc:
        trace.add("dns", "fail", f"cannot resolve {s.hostname}: {exc.strerror}", t0)
        raise ConnectError(
            s.name,
            "dns",
            f"cannot resolve {s.hostname}: {exc.strerror}",
            "fix the name, set `address:` in the inventory, or add a HostName in ~/.ssh/config",
        ) from None
    addrs = list(dict.fromkeys(str(info[4][0]) for info in infos))
    trace.add("dns", "ok", f"{s.hostname} -> {', '.join(addrs)}", t0, addresses=addrs)
    return list(infos)


async def _tcp(info: tuple[Any, ...], s: SshSettings, dl: Deadlines, trace: ConnectTrace) -> socket.socket:
    loop = asyncio.get_running_loop()
    family, stype, proto, _, sockaddr = info
    t0 = time.monotonic()
    sock = socket.socket(family, stype, proto)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, sockaddr), dl.tcp_s)
    except (asyncio.TimeoutError, TimeoutError):
        sock.close()
        exc: OSError = TimeoutError(errno.ETIMEDOUT, "timed out")
    except OSError as e:
        sock.close()
        exc = e
    else:
        trace.add("tcp", "ok", f"connected to {host_port(sockaddr[0], s.port)}", t0, address=sockaddr[0])
        return sock
    kind = _tcp_error_kind(exc)
    msg = {
        "refused": f"connection refused on port {s.port} (nothing listening: sshd down, or wrong port)",
        "timeout": f"no answer on port {s.port} within {dl.tcp_s:g} s (firewall dropping, or host down)",
        "no-route": f"no route to {s.hostname} (host down or network unreachable)",
        "unreachable": f"cannot connect to port {s.port}: {exc.strerror or exc}",
    }[kind]
    trace.add("tcp", "fail", msg, t0, kind=kind)
    raise ConnectError(s.name, kind, msg, "check the port in the inventory / ssh_config and that sshd runs")


def _throttled(kind: str, seen: bytes) -> bool:
    """sshd's MaxStartups drop: closed before any banner, or its ``Exceeded MaxStartups`` line then close."""
    return (
        kind == "closed"
        and (not seen or seen.lstrip().startswith(MAXSTARTUPS_TEXT))
        or (kind == "not-ssh" and seen.lstrip().startswith(MAXSTARTUPS_TEXT))
    )


def _backoff(attempt: int) -> float:
    """Seconds before retry ``attempt`` (1-based): exponential from 0.25 s, capped at 3 s, jitter x0.5-1.5."""
    return float(min(3.0, 0.25 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5))


async def _banner(
    info: tuple[Any, ...], s: SshSettings, dl: Deadlines, trace: ConnectTrace, retries: int
) -> socket.socket:
    """Steps tcp and banner for one address; sshd's MaxStartups drop retried with backoff and jitter."""
    attempt = 0
    t_first = time.monotonic()
    while True:
        sock = await _tcp(info, s, dl, trace)
        t0 = time.monotonic()
        kind, seen = await _peek_banner(sock, dl.banner_s)
        if kind == "ok":
            text = seen.decode("ascii", "replace").strip()
            ms = (time.monotonic() - t0) * 1000
            status = "warn" if ms > dl.banner_s * 500 else "ok"  # over half the deadline: a slow host
            detail = text + (f" (slow: {ms:.0f} ms)" if status == "warn" else "")
            if attempt:
                detail += f" (after {attempt} MaxStartups drop(s), retried)"
            trace.add("banner", status, detail, t0, banner=text, attempts=attempt + 1)
            return sock
        sock.close()
        if _throttled(kind, seen):
            if attempt < retries:
                attempt += 1
                await asyncio.sleep(_backoff(attempt))
                continue
            said = " with `Exceeded MaxStartups`" if seen else " before its banner"
            msg = (
                f"the server closed the connection{said} {attempt + 1} times in "
                f"{time.monotonic() - t_first:.1f} s (sshd MaxStartups throttling, or TCP wrappers / fail2ban)"
            )
            trace.add("banner", "fail", msg, t0, kind="throttled", attempts=attempt + 1)
            raise ConnectError(s.name, "throttled", msg, "lower --concurrency or raise MaxStartups in sshd_config")
        if kind == "closed":
            msg = "the server closed the connection after sending " + repr(seen[:60].decode("ascii", "replace"))
            trace.add("banner", "fail", msg, t0, kind="closed")
            raise ConnectError(s.name, "closed", msg, "check the sshd log on the host")
        if kind == "silent":
            msg = f"port {s.port} accepts TCP but sent no SSH banner within {dl.banner_s:g} s"
            trace.add("banner", "fail", msg, t0, kind="banner-timeout")
            raise ConnectError(
                s.name,
                "banner-timeout",
                msg,
                "a stuck sshd or a non-SSH service on that port; raise --timeout if the host is slow",
            )
        shown = seen[:60].decode("ascii", "replace")
        msg = f"port {s.port} speaks something other than SSH: {shown!r}"
        trace.add("banner", "fail", msg, t0, kind="not-ssh")
        raise ConnectError(s.name, "not-ssh", msg, "check the port: another service listens there")


class SshTransport:
    """An open, authenticated SSH connection to one host."""

    def __init__(
        self,
        host: str,
        conn: asyncssh.SSHClientConnection,
        settings: SshSettings,
        tunnels: Sequence[asyncssh.SSHClientConnection] = (),
    ) -> None:
        self.host = host
        self._conn = conn
        self.settings = settings
        self._tunnels = list(tunnels)  # jump-host connections under this one, first hop first

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
        if res.exit_status is None or res.exit_signal:  # asyncssh: -1 with the signal sshd named
            _no_status(self.host, argv, res.exit_signal, err)
        result = CommandResult(tuple(argv), res.exit_status, out, err, time.monotonic() - t0)
        if check and result.exit_status != 0:
            raise RemoteCommandError(self.host, list(argv), result.exit_status, err)
        return result

    async def stream(
        self,
        argv: Sequence[str],
        *,
        idle_timeout_s: float | None = None,
        max_line: int = MAX_LINE_BYTES,
        input: bytes | None = None,
        silent_s: float | None = None,
    ) -> AsyncIterator[Line]:
        cmd = shlex.join(argv)
        try:
            # bytes, read in chunks and cut by LineSplitter: asyncssh's readline hands back a piece of a line
            # longer than its receive window (2 MiB) as if it were a line. `input` is written, then EOF.
            proc = await self._conn.create_process(cmd, encoding=None, input=input)
        except (asyncssh.Error, OSError) as exc:
            raise ConnectError(self.host, "closed", f"connection lost starting {argv[0]}: {exc}") from None
        watch = StreamWatch(lambda: proc.stderr.read(STREAM_CHUNK_BYTES), silent_s=silent_s,
                            idle_timeout_s=idle_timeout_s)  # fmt: skip
        lines = LineSplitter(max_line)
        try:
            while True:
                try:
                    chunk = await watch.next_chunk(lambda: proc.stdout.read(STREAM_CHUNK_BYTES))
                except IdleTimeout:
                    raise CommandTimeout(self.host, list(argv), idle_timeout_s or 0) from None
                except Silent as why:
                    # sshd delivers a "signal" request as killpg() of the session's command, which a stopped one
                    # dies of too — but not on a root login (no privilege separation there: sshd refuses), so the
                    # caller also kills the pid named by the heartbeats (the runner: ``agent stop-follower``)
                    with contextlib.suppress(Exception):
                        proc.send_signal("KILL")
                    raise silent_error(self.host, argv, why.silent_s, why.pid) from None
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
            if status is None or proc.exit_signal:  # asyncssh: -1 with the signal sshd named
                _no_status(self.host, argv, proc.exit_signal, await watch.stderr_text() if proc.exit_signal else "")
            if status != 0:
                raise RemoteCommandError(self.host, list(argv), status, await watch.stderr_text())
        finally:
            if proc.exit_status is None:
                with contextlib.suppress(Exception):
                    proc.close()
            await watch.close()

    async def put(self, local: Path, remote: str) -> None:
        parent = str(Path(remote).parent)
        tmp = f"{remote}.{uuid.uuid4().hex[:12]}.part"  # unique: homes shared over NFS see concurrent uploads
        try:
            client = await self._conn.start_sftp_client()
        except (asyncssh.SFTPError, asyncssh.Error, OSError) as exc:  # sshd refused the subsystem request
            raise HostError(
                self.host,
                f"cannot upload {local.name}: the host's sshd offers no SFTP subsystem ({exc})",
                "enable it in the host's sshd_config (`Subsystem sftp internal-sftp`, or Debian's "
                "`Subsystem sftp /usr/lib/openssh/sftp-server`) and reload sshd; orch deploys over SFTP",
            ) from None
        try:
            async with client as sftp:
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
        await _close_all([self._conn, *reversed(self._tunnels)])


def _no_status(host: str, argv: Sequence[str], exit_signal: Any, stderr: str) -> NoReturn:
    """A channel closed without an exit status: the command was killed by a signal (sshd sent ``exit-signal``:
    RemoteCommandError naming it), or the session or connection was cut before any status came (sshd's session
    process killed, the network dropped): ConnectError ``closed``, which callers treat as a dropped connection."""
    if exit_signal:
        raise RemoteCommandError(host, list(argv), None, stderr, signal=str(exit_signal[0]))
    shown = command_shown(argv)
    raise ConnectError(host, "closed", f"the SSH session dropped while `{shown}` ran: no exit status came back")


async def _close_all(conns: Iterable[asyncssh.SSHClientConnection]) -> None:
    """Close each connection and wait (5 s at most each) until it is closed: a ProxyCommand's process is reaped
    then, instead of being left to the garbage collector ("subprocess ... is still running")."""
    for conn in conns:
        conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.wait_closed(), 5)
        # The connection's close kills its ProxyCommand process, which is reaped a moment later: wait for that
        # (asyncssh's tunnel sets its close event in process_exited), or a loop closed right after finds it
        # unreaped and Popen.__del__ warns "subprocess N is still running" (seen under load in the tests).
        tunnel = getattr(conn, "_tunnel", None)
        if tunnel is not None and type(tunnel).__name__ == "_ProxyCommandTunnel":
            with contextlib.suppress(Exception):
                await asyncio.wait_for(tunnel.wait_closed(), 5)


async def connect(
    host: Host,
    *,
    deadlines: Deadlines | None = None,
    trace: ConnectTrace | None = None,
    resolver: SshResolver | None = None,
    retries: int = THROTTLE_RETRIES,
) -> SshTransport:
    """Open an authenticated connection to ``host`` the way OpenSSH would (``ssh -G``), judging host keys the
    OpenSSH way.

    Raises ToolMissingError (no ``ssh``), ConfigError (ssh_config OpenSSH refuses), ConnectError (dns /
    refused / timeout / no-route / banner-timeout / not-ssh / throttled / handshake / proxy), HostKeyError
    (verdict other than match / cert-authority, of the host or a jump host), AuthError (denied /
    too-many-failures / no-method). ``trace`` receives one Step per stage and the resolved settings.
    """
    dl = deadlines or Deadlines()
    trace = trace if trace is not None else ConnectTrace()
    resolver = resolver or SshResolver()
    settings = await resolver.resolve(host)
    trace.settings = settings
    chain: list[asyncssh.SSHClientConnection] = []
    try:
        conn = await _open(settings, resolver, dl, trace, retries, chain, depth=0)
    except BaseException:
        await _close_all(reversed(chain))
        raise
    finally:
        _attach_hops(trace)
    return SshTransport(host.name, conn, settings, chain[:-1])


def _attach_hops(trace: ConnectTrace) -> None:
    """Name the jump hosts and their verdicts in the ``hostkey`` step (doctor shows every hop)."""
    hk = trace.steps.get("hostkey")
    if not trace.hops or hk is None or "hops" in hk.data:
        return
    hk.data["hops"] = trace.hops
    shown = []
    for h in trace.hops:
        v = h["hostkey"] or {}
        shown.append(f"{h['hop']} ({host_port(h['hostname'], h['port'])}) {v.get('verdict', 'not reached')}")
    if hk.status != "fail" or not hk.detail.startswith("jump host"):
        hk.detail += "; via " + ", ".join(shown)


async def _open(
    s: SshSettings,
    resolver: SshResolver,
    dl: Deadlines,
    trace: ConnectTrace,
    retries: int,
    chain: list[asyncssh.SSHClientConnection],
    *,
    depth: int,
    tunnel: asyncssh.SSHClientConnection | None = None,
) -> asyncssh.SSHClientConnection:
    """Connect to ``s`` (through ``tunnel`` when given, else through its own ProxyJump / ProxyCommand, else
    directly); appends every opened connection to ``chain`` (the caller closes them)."""
    dl = _step_deadlines(dl, s)
    known = resolver.known_hosts(s)
    proxy_argv: list[str] | None = None
    via: str | None = None
    if tunnel is None and s.proxy_jump:
        if depth >= MAX_JUMP_DEPTH:
            raise ConnectError(s.name, "proxy", f"more than {MAX_JUMP_DEPTH} nested ProxyJump hops", "check for a loop")
        tunnel = await _open_jumps(s, resolver, dl, trace, retries, chain, depth)
        via = f"ProxyJump {s.proxy_jump}"
    elif tunnel is None and s.proxy_command:
        tokens = client_tokens(s.name, s.hostname, s.port, s.user, None, s.host_key_alias)
        proxy_argv = proxy_command_argv(s.proxy_command, tokens)
        via = f"ProxyCommand {s.proxy_command}"
        for name in ("dns", "tcp", "banner"):
            trace.add(name, "skipped", f"reached through {via}")
    identities, notes, agent = await _identities(s)
    client = _Client(s, known, identities)
    options: dict[str, Any] = {
        "username": s.user,
        "client_keys": None,  # _Client.public_key_auth_requested hands them out (and records them)
        "agent_path": None,
        "known_hosts": lambda _h, _a, _p: ([], [], [asyncssh.import_public_key(x) for x in known.revoked_key_lines()]),
        "client_factory": lambda: client,
        "server_host_key_algs": _host_key_algs(known, s),
        "host_key_alias": s.host_key_alias,
        "preferred_auth": "publickey,keyboard-interactive,password",
        "config": [],
        "login_timeout": dl.login_s,
        "connect_timeout": dl.login_s,
        "keepalive_interval": s.server_alive_interval_s,
        "keepalive_count_max": s.server_alive_count_max,
    }
    try:
        if tunnel is not None or proxy_argv is not None:
            if tunnel is not None:
                options["tunnel"] = tunnel
            else:
                options["proxy_command"] = proxy_argv
            t0 = time.monotonic()
            conn = await _login(s, client, notes, options, dl, trace, t0, via or "")
        else:
            infos = await _resolve(s, dl, trace)
            address = str(infos[0][4][0])
            async with _throttle().for_dest(address, s.port):
                sock = await _banner(infos[0], s, dl, trace, retries)
                t0 = time.monotonic()
                conn = await _login(s, client, notes, dict(options, sock=sock), dl, trace, t0, None)
    finally:
        if agent is not None:
            agent.close()
    chain.append(conn)
    return conn


async def _open_jumps(
    s: SshSettings,
    resolver: SshResolver,
    dl: Deadlines,
    trace: ConnectTrace,
    retries: int,
    chain: list[asyncssh.SSHClientConnection],
    depth: int,
) -> asyncssh.SSHClientConnection:
    """Open the ProxyJump hops of ``s`` in order (``ssh -J a,b``: b reached through a, a by its own settings);
    the first hop's dns/tcp/banner steps become this host's, each hop's verdict goes to ``trace.hops``."""
    tunnel: asyncssh.SSHClientConnection | None = None
    for i, hop in enumerate(parse_jump(s.proxy_jump or "")):
        hs = await resolver.resolve_hop(hop)
        hop_trace = ConnectTrace(settings=hs)
        label = f"jump host {hop}"
        try:
            tunnel = await _open(hs, resolver, dl, hop_trace, retries, chain, depth=depth + 1, tunnel=tunnel)
        except HostError as exc:
            _copy_steps(hop_trace, trace, label, first=i == 0)
            raise _relabel(exc, s.name, label) from None
        finally:
            trace.hops.append(_hop_summary(str(hop), hs, hop_trace))
        _copy_steps(hop_trace, trace, label, first=i == 0)
    assert tunnel is not None
    return tunnel


def _copy_steps(src: ConnectTrace, dst: ConnectTrace, label: str, *, first: bool) -> None:
    """A hop's steps as this host's: dns/tcp/banner of the first hop always, a failed hostkey/auth too."""
    for name, st in src.steps.items():
        if (first and name in ("dns", "tcp", "banner")) or st.status == "fail":
            dst.steps[name] = Step(name, st.status, f"{label}: {st.detail}", dict(st.data), st.elapsed_ms)


def _hop_summary(spec: str, hs: SshSettings, t: ConnectTrace) -> dict[str, Any]:
    hk = t.steps.get("hostkey")
    auth = t.steps.get("auth")
    return {
        "hop": spec,
        "hostname": hs.hostname,
        "port": hs.port,
        "user": hs.user,
        "hostkey": None if hk is None else {"status": hk.status, "detail": hk.detail, **hk.data},
        "auth": None if auth is None else {"status": auth.status, "detail": auth.detail},
    }


def _relabel(exc: HostError, host: str, label: str) -> HostError:
    msg = f"{label}: {exc.reason}"
    if isinstance(exc, HostKeyError):
        return HostKeyError(host, exc.verdict, msg, exc.hint)
    if isinstance(exc, AuthError):
        return AuthError(host, exc.kind, msg, exc.hint)
    if isinstance(exc, ConnectError):
        return ConnectError(host, exc.kind, msg, exc.hint)
    return HostError(host, msg, exc.hint)


async def _login(
    s: SshSettings,
    client: _Client,
    notes: list[str],
    options: dict[str, Any],
    dl: Deadlines,
    trace: ConnectTrace,
    t0: float,
    via: str | None,
) -> asyncssh.SSHClientConnection:
    """Key exchange, host key verdict and authentication; every asyncssh failure translated."""
    try:
        conn = await asyncio.wait_for(asyncssh.connect(s.hostname, s.port, **options), dl.login_s + 1)
    except asyncssh.HostKeyNotVerifiable as exc:
        _hostkey_failed(s, client, str(exc), trace, t0)
        raise AssertionError("unreachable") from exc
    except asyncssh.PermissionDenied as exc:
        _record_hostkey_ok(s, client, trace, t0)
        _auth_failed(s, client, notes, str(exc.reason), trace)
        raise AssertionError("unreachable") from exc
    except asyncssh.DisconnectError as exc:
        if client.verdict is not None and not client.verdict.ok:
            _hostkey_failed(s, client, str(exc), trace, t0)
        if via is not None and client.verdict is None and client.offered_ca is None:
            _proxy_closed(s, via, str(exc.reason), trace, t0)
        if "too many authentication failures" in str(exc.reason).lower():
            _record_hostkey_ok(s, client, trace, t0)
            _auth_failed(s, client, notes, str(exc.reason), trace, too_many=True)
        msg = f"SSH handshake failed: {exc.reason}"
        trace.add("hostkey" if client.verdict is None else "auth", "fail", msg, t0)
        raise ConnectError(s.name, "handshake", msg, "check the sshd log on the host") from None
    except (asyncio.TimeoutError, TimeoutError, asyncssh.TimeoutError):
        msg = f"SSH handshake/login did not finish within {dl.login_s:g} s"
        trace.add("hostkey" if client.verdict is None else "auth", "fail", msg, t0)
        raise ConnectError(s.name, "timeout", msg, "the host is overloaded, or raise --timeout") from None
    except (BrokenPipeError, ConnectionResetError) as exc:
        if via is not None and client.verdict is None and client.offered_ca is None:
            # A ProxyCommand that exits at once closes its stdin and its stdout: which asyncio sees first decides
            # between EOF (DisconnectError above) and EPIPE on the version write (here) — one failure, one message.
            _proxy_closed(s, via, exc.strerror or type(exc).__name__, trace, t0)
        if isinstance(exc, BrokenPipeError):
            trace.add("hostkey", "fail", "connection closed during the SSH handshake", t0)
            raise ConnectError(s.name, "handshake", "connection closed during the SSH handshake") from None
        trace.add("hostkey", "fail", "connection reset during the SSH handshake", t0)
        raise ConnectError(s.name, "handshake", "connection reset during the SSH handshake") from None
    except OSError as exc:
        kind = _tcp_error_kind(exc)
        step = "tcp" if via is None else "banner"
        trace.add(step, "fail", f"{exc}", t0, kind=kind)
        raise ConnectError(s.name, kind, f"cannot connect through {via or 'TCP'}: {exc}") from None
    except asyncssh.ChannelOpenError as exc:  # a jump host refused to open the tunnel
        msg = f"the jump host could not open a connection to {host_port(s.hostname, s.port)}: {exc.reason}"
        trace.add("tcp", "fail", msg, t0, kind="proxy")
        raise ConnectError(s.name, "proxy", msg, "check HostName/Port as the jump host sees them") from None
    except asyncssh.Error as exc:
        step = "banner" if via is not None and client.verdict is None else "hostkey"
        trace.add(step, "fail", str(exc), t0)
        raise ConnectError(s.name, "handshake" if via is None else "proxy", f"SSH error: {exc}") from None
    _record_hostkey_ok(s, client, trace, t0)
    used = client.tried[-1] if client.tried else "no key (the server accepted `none`)"
    detail = f"logged in as {s.user} with {used}"
    if notes:
        detail += "; skipped: " + "; ".join(notes)
    trace.add("auth", "ok", detail, t0, user=s.user, identity=used, tried=list(client.tried), skipped=notes)
    return conn


def _proxy_closed(s: SshSettings, via: str, reason: str, trace: ConnectTrace, t0: float) -> NoReturn:
    """Nothing of the server was seen: the path there (the ProxyCommand, or the jump host's forward) ended, not
    the host key exchange — say so, and how to see why, instead of blaming the host key or sshd.

    Raises:
        ConnectError: kind ``proxy``, always.
    """
    msg = f"the connection through {via} closed before the SSH handshake ({reason})"
    hint = (
        f"run it by hand to see its error: ssh -G {s.name} | grep -i proxycommand shows it as ssh expands it"
        if via.startswith("ProxyCommand")
        else "check that the jump host can reach the host's sshd (HostName/Port as the jump host sees them)"
    )
    trace.add("banner", "fail", msg, t0, kind="proxy")
    raise ConnectError(s.name, "proxy", msg, hint) from None


def _verdict_data(v: hostkeys.HostKeyVerdict) -> dict[str, Any]:
    """The verdict's fields for a doctor check (``name`` becomes ``lookup_name``; the detail is the check's)."""
    d = dict(v.to_dict())
    d["lookup_name"] = d.pop("name", None)
    d.pop("detail", None)
    return d


def _record_hostkey_ok(target: SshSettings, judge: _Client, trace: ConnectTrace, t0: float) -> None:
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


def _hostkey_failed(target: SshSettings, judge: _Client, message: str, trace: ConnectTrace, t0: float) -> None:
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


def _auth_failed(
    s: SshSettings, client: _Client, notes: list[str], reason: str, trace: ConnectTrace, *, too_many: bool = False
) -> None:
    methods = ", ".join(client.methods) or "none reported"
    tried = ", ".join(client.tried) or "no key"
    skipped = f"; skipped: {'; '.join(notes)}" if notes else ""
    data: dict[str, Any] = {
        "user": s.user,
        "methods": list(client.methods),
        "tried": list(client.tried),
        "skipped": notes,
    }
    where = f"{s.user}@{host_port(s.hostname, s.port)}"
    if too_many or "too many" in reason.lower():
        msg = f"too many authentication failures for {where}: the server disconnected after {tried}{skipped}"
        hint = (
            "set `IdentitiesOnly yes` and `IdentityFile` for this host in ~/.ssh/config, or "
            "`identity_file:` in the inventory, so only the right key is offered"
        )
        trace.add("auth", "fail", msg, data=data, kind="too-many-failures")
        raise AuthError(s.name, "too-many-failures", msg, hint)
    if client.methods and "publickey" not in client.methods:
        msg = (
            f"{where} allows only {methods} authentication, which orch does not use (it logs in with keys, "
            f"unattended); no key was offered{skipped}"
        )
        hint = "enable `PubkeyAuthentication yes` for this user in the host's sshd_config and install your key"
        trace.add("auth", "fail", msg, data=data, kind="no-method")
        raise AuthError(s.name, "no-method", msg, hint)
    if not client.tried:
        msg = f"permission denied for {where} (server allows {methods}): orch had no key to offer{skipped}"
        hint = (
            "create a key (ssh-keygen), load it into ssh-agent, or name an existing one with IdentityFile in "
            "~/.ssh/config / `identity_file:` in the inventory"
        )
        trace.add("auth", "fail", msg, data=data, kind="denied")
        raise AuthError(s.name, "denied", msg, hint)
    msg = f"permission denied for {where} (server allows {methods}); tried {tried}{skipped}"
    trace.add("auth", "fail", msg, data=data, kind="denied")
    raise AuthError(
        s.name,
        "denied",
        msg,
        f"put your public key in ~{s.user}/.ssh/authorized_keys on the host, or set "
        "`identity_file:`/`user:` in the inventory",
    )


async def fetch_offered_key(
    host: Host, *, timeout_s: float = 10.0, resolver: SshResolver | None = None
) -> tuple[bytes, SshSettings, SshResolver]:
    """Fetch the host key the server offers, without trusting it and without authenticating to it (jump hosts
    on the way are connected as usual, their keys judged).

    Returns (public key blob, settings, the resolver used). Used by ``orch hosts trust`` to show the fingerprint.
    """
    resolver = resolver or SshResolver()
    s = await resolver.resolve(host)
    known = resolver.known_hosts(s)
    dl = Deadlines(timeout_s, timeout_s, timeout_s, max(timeout_s, 5.0) * 1.5)
    chain: list[asyncssh.SSHClientConnection] = []
    options: dict[str, Any] = {
        "server_host_key_algs": [a for a in _host_key_algs(known, s) if "cert" not in a],
        "config": [],
    }
    try:
        if s.proxy_jump:
            options["tunnel"] = await _open_jumps(s, resolver, dl, ConnectTrace(), THROTTLE_RETRIES, chain, 0)
        elif s.proxy_command:
            tokens = client_tokens(s.name, s.hostname, s.port, s.user, None, s.host_key_alias)
            options["proxy_command"] = proxy_command_argv(s.proxy_command, tokens)
        key = await asyncio.wait_for(asyncssh.get_server_host_key(s.hostname, s.port, **options), timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        raise ConnectError(
            host.name, "timeout", f"no host key from {host_port(s.hostname, s.port)} within {timeout_s:g} s"
        ) from None
    except (OSError, asyncssh.Error) as exc:
        raise ConnectError(
            host.name, "handshake", f"cannot fetch the host key from {host_port(s.hostname, s.port)}: {exc}"
        ) from None
    finally:
        await _close_all(reversed(chain))
    if key is None:
        raise ConnectError(host.name, "handshake", "the server offered no host key")
    return bytes(key.public_data), s, resolver


__all__ = ["ConnectTrace", "Deadlines", "OrchError", "SshTransport", "Step", "connect", "fetch_offered_key"]
