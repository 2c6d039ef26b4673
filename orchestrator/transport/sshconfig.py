"""What OpenSSH would do to reach a host: ``ssh -G`` asked once per host per run, its answer parsed.

orch does not read ssh_config itself. For every host it runs the installed OpenSSH client as
``ssh -G [-F FILE] [-l USER] [-p PORT] [-o HostName=ADDRESS] [-i IDENTITY_FILE] -- NAME`` (the inventory's
``user``/``port``/``address``/``identity_file`` as the command-line options a user would type) and connects with
exactly what it prints: HostName, Port, User, IdentityFile, CertificateFile, IdentitiesOnly, IdentityAgent,
ProxyJump, ProxyCommand, HostKeyAlias, UserKnownHostsFile, GlobalKnownHostsFile, CheckHostIP, ConnectTimeout,
ServerAliveInterval/CountMax, HashKnownHosts. ``Host``/``Match`` (every form), ``Include`` and the
order of precedence are OpenSSH's own.

Two things ``ssh -G`` (OpenSSH 9.2) leaves to the connecting ``ssh``, which orch therefore does as ssh.c does:

* IdentityFile and CertificateFile are printed unexpanded; :func:`expand_path` applies ssh.c's
  ``tilde_expand_filename`` (the account's home from the password database, as ssh) and
  ``default_client_percent_dollar_expand`` (tokens ``%% %C %d %h %i %j %k %L %l %n %p %r %u`` and ``${VAR}``).
  ``tests/integration/test_ssh_config.py`` checks the result against what ``ssh -v`` says it loads.
* ProxyCommand is printed unexpanded; sshconnect.c ``expand_proxy_command`` expands ``%% %h %k %n %p %r`` and
  runs ``exec COMMAND`` under ``$SHELL -c`` (:func:`proxy_command_argv`).

OpenSSH reads ``~/.ssh/config`` of the account (the password database's home), not ``$HOME``. When ``$HOME``
names another directory (a test bed, a service account's sandbox) orch passes ``-F $HOME/.ssh/config``
(``-F none`` when that file does not exist), so that the configuration under ``$HOME`` is the one used; ssh then
reads that file instead of both ``~/.ssh/config`` and ``/etc/ssh/ssh_config``.

I/O: runs ``ssh`` as a subprocess (argv list, no shell), at most :data:`SPAWN_CONCURRENCY` at once; each
distinct argv once per :class:`SshResolver` (one per run).
"""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import os
import pwd
import re
import shutil
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import hostkeys
from orchestrator.errors import ConfigError, ToolMissingError
from orchestrator.inventory import Host
from orchestrator.netaddr import host_port
from orchestrator.textlines import output_lines
from orchestrator.transport import children

SSH_CLIENT_HINT = (
    "install the OpenSSH client: apt-get install openssh-client (Debian/Ubuntu), dnf install openssh-clients "
    "(RHEL/Fedora); orch asks it (ssh -G) how to reach every host"
)
SPAWN_CONCURRENCY = 8  # ssh -G takes ~5-10 ms of CPU; more at once only queues on a small machine
RESOLVE_TIMEOUT_S = 30.0  # Match exec runs user commands; generous, a loaded box must not fail here
MAX_JUMP_DEPTH = 8
# readconf.c fill_default_options: the identity files ssh uses when none is configured; a missing one is
# skipped silently (not worth a note), as ssh does.
DEFAULT_IDENTITY_NAMES = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa")
_APPLYING = re.compile(r"^debug\d: (?P<file>.+) line (?P<line>\d+): Applying options for (?P<what>.*)$")
_READING = re.compile(r"^debug\d: Reading configuration data (?P<file>.+)$")
_CHECKING = re.compile(r"^debug\d: checking match for '(?P<what>.*)' host ")


def ssh_binary() -> str:
    """The ``ssh`` on PATH. Raises ToolMissingError (with the package to install) when there is none."""
    path = shutil.which("ssh")
    if path is None:
        raise ToolMissingError("the OpenSSH client `ssh` is not installed (not found on PATH)", SSH_CLIENT_HINT)
    return path


def account_home() -> Path:
    """The home directory OpenSSH uses for ``~`` and ``%d``: the password database's, not ``$HOME``."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return Path(os.path.expanduser("~"))


def config_args() -> list[str]:
    """``-F $HOME/.ssh/config`` (or ``-F none``) when ``$HOME`` is not the account's home; else nothing."""
    home = os.environ.get("HOME")
    if not home or os.path.realpath(home) == os.path.realpath(account_home()):
        return []
    cfg = Path(home) / ".ssh" / "config"
    return ["-F", str(cfg) if cfg.is_file() else "none"]


# ServerAliveInterval when ssh_config leaves it at OpenSSH's default, 0 (off; ssh_config(5)): a host that dies
# without closing its TCP connection (power loss, a kernel panic, a partitioned network) would otherwise leave a
# run's follow waiting on it without end. With ServerAliveCountMax's default 3, a silent host is dropped after
# about 45-60 s, and the runner reconnects (or names the host lost, with --resume). An explicit interval is kept.
DEFAULT_SERVER_ALIVE_INTERVAL_S = 15.0


@dataclass(frozen=True)
class JumpHop:
    """One ProxyJump hop, ``[user@]host[:port]`` or ``ssh://[user@]host[:port]`` (readconf.c parse_jump)."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        where = host_port(self.host, self.port) if self.port else self.host
        return (f"{self.user}@" if self.user else "") + where


def parse_jump(value: str) -> list[JumpHop]:
    """The hops of a ProxyJump value, first hop first. Raises ConfigError for one OpenSSH would refuse."""
    hops: list[JumpHop] = []
    for part in value.split(","):
        spec = part.strip()
        if spec.startswith("ssh://"):
            spec = spec[len("ssh://") :].rstrip("/")
        user, _, hostport = spec.rpartition("@")
        port: int | None = None
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            if rest.startswith(":"):
                port = _port(rest[1:], value)
        elif hostport.count(":") == 1:
            host, _, p = hostport.partition(":")
            port = _port(p, value)
        else:
            host = hostport
        if not host:
            raise ConfigError(f"ProxyJump {value!r}: empty host in {part!r}", "write [user@]host[:port],...")
        hops.append(JumpHop(host, user or None, port))
    return hops


def _port(text: str, value: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"ProxyJump {value!r}: bad port {text!r}", "write [user@]host[:port],...")
    return int(text)


@dataclass(frozen=True)
class SshSettings:
    """A host's connection settings as ``ssh -G`` printed them (paths expanded as ssh.c expands them).

    ``name`` is the name given to ssh (the inventory host or the ProxyJump hop); ``options`` holds every
    option ssh printed, lower-case keyword -> values in order; ``given`` the options that came from the
    command line orch built (keyword -> where in the inventory); ``applied`` the ``Host``/``Match`` blocks
    ssh applied as ``(file, line, text)``; ``missing_identities`` the IdentityFile paths (expanded) that do not
    exist, which OpenSSH skips.
    """

    name: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    certificate_files: tuple[str, ...]
    identities_only: bool
    identity_agent: str | None
    proxy_jump: str | None
    proxy_command: str | None
    host_key_alias: str | None
    user_known_hosts: tuple[str, ...]
    global_known_hosts: tuple[str, ...]
    check_host_ip: bool
    connect_timeout_s: float | None
    server_alive_interval_s: float
    server_alive_count_max: int
    hash_known_hosts: bool
    argv: tuple[str, ...] = ()
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    given: Mapping[str, str] = field(default_factory=dict)
    applied: tuple[tuple[str, int, str], ...] = ()
    missing_identities: tuple[str, ...] = ()

    @property
    def key_name(self) -> str:
        """The name known_hosts is searched for, as OpenSSH does: HostKeyAlias, else HostName."""
        return self.host_key_alias or self.hostname

    def known_hosts_files(self) -> list[Path]:
        """UserKnownHostsFile then GlobalKnownHostsFile, as ssh -G printed them (already expanded)."""
        return [Path(p) for p in (*self.user_known_hosts, *self.global_known_hosts)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "port": self.port,
            "user": self.user,
            "identity_files": list(self.identity_files),
            "certificate_files": list(self.certificate_files),
            "identities_only": self.identities_only,
            "identity_agent": self.identity_agent,
            "proxy_jump": self.proxy_jump,
            "proxy_command": self.proxy_command,
            "host_key_alias": self.host_key_alias,
            "user_known_hosts_files": list(self.user_known_hosts),
            "global_known_hosts_files": list(self.global_known_hosts),
            "check_host_ip": self.check_host_ip,
            "connect_timeout_s": self.connect_timeout_s,
            "server_alive_interval_s": self.server_alive_interval_s,
            "server_alive_count_max": self.server_alive_count_max,
        }


def parse_ssh_g(text: str) -> dict[str, tuple[str, ...]]:
    """``ssh -G`` output (``keyword value...`` per line, a keyword repeated for list options) -> mapping."""
    out: dict[str, list[str]] = {}
    for line in output_lines(text):
        key, _, value = line.strip().partition(" ")
        if key:
            out.setdefault(key.lower(), []).append(value.strip())
    return {k: tuple(v) for k, v in out.items()}


def _expand_tokens(raw: str, tokens: Mapping[str, str], what: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        t = raw[i + 1 : i + 2]
        if t not in tokens:
            raise ConfigError(
                f"{what} {raw!r}: unknown token %{t}" if t else f"{what} {raw!r} ends with a lone '%'",
                "see ssh_config(5) TOKENS; write %% for a literal %",
            )
        out.append(tokens[t])
        i += 2
    return "".join(out)


def client_tokens(
    name: str, hostname: str, port: int, user: str, proxy_jump: str | None, alias: str | None
) -> dict[str, str]:
    """ssh.c's ``DEFAULT_CLIENT_PERCENT_EXPAND_ARGS`` for one connection (values as ssh computes them)."""
    local = socket.gethostname()
    jump = proxy_jump or ""
    return {
        "%": "%",
        "C": hashlib.sha1(f"{local}{hostname}{port}{user}{jump}".encode()).hexdigest(),  # ssh_connection_hash
        "L": local.split(".")[0],
        "i": str(os.getuid()),
        "k": alias or name,
        "l": local,
        "n": name,
        "p": str(port),
        "h": hostname,
        "r": user,
        "u": getpass.getuser(),
        "d": str(account_home()),
        "j": jump,
    }


def expand_path(raw: str, tokens: Mapping[str, str], environ: Mapping[str, str] | None = None) -> str:
    """ssh.c: ``tilde_expand_filename`` (``~`` and ``~user``) then ``${VAR}`` and ``%`` tokens.

    Raises ConfigError for an unknown token or an unset variable (ssh refuses to connect then too).
    """
    s = raw
    if s.startswith("~"):
        user, sep, rest = s[1:].partition("/")
        try:
            base = str(account_home()) if not user else pwd.getpwnam(user).pw_dir
        except KeyError:
            raise ConfigError(f"path {raw!r}: no such user {user!r}") from None
        s = base + (("/" + rest) if sep else "")
    env = os.environ if environ is None else environ

    def var(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise ConfigError(f"path {raw!r}: environment variable ${{{m.group(1)}}} is not set")
        return env[m.group(1)]

    s = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", var, s)
    return _expand_tokens(s, tokens, "path")


def proxy_command_argv(command: str, tokens: Mapping[str, str]) -> list[str]:
    """The argv ssh runs for a ProxyCommand (sshconnect.c ``ssh_proxy_connect``): ``$SHELL -c "exec CMD"``
    with ``%% %h %k %n %p %r`` expanded; the command is the user's own config text, passed whole."""
    subset = {k: tokens[k] for k in ("%", "h", "k", "n", "p", "r")}
    shell = os.environ.get("SHELL") or "/bin/sh"
    return [shell, "-c", "exec " + _expand_tokens(command, subset, "ProxyCommand")]


def _bool(values: tuple[str, ...] | None, default: bool = False) -> bool:
    if not values:
        return default
    return values[0].lower() in ("yes", "true")


def _opt(opts: Mapping[str, tuple[str, ...]], key: str) -> str | None:
    v = opts.get(key)
    if not v or v[0].lower() == "none":
        return None
    return v[0]


def _files(opts: Mapping[str, tuple[str, ...]], key: str) -> tuple[str, ...]:
    out: list[str] = []
    for v in opts.get(key, ()):
        out += [p for p in v.split() if p.lower() != "none"]
    return tuple(out)


def settings_from_output(
    name: str,
    stdout: str,
    *,
    argv: Sequence[str] = (),
    given: Mapping[str, str] | None = None,
    stderr: str = "",
    environ: Mapping[str, str] | None = None,
) -> SshSettings:
    """Build :class:`SshSettings` from ``ssh -G`` output (pure apart from the existence check of key files)."""
    opts = parse_ssh_g(stdout)
    hostname = _opt(opts, "hostname") or name
    port = int(_opt(opts, "port") or 22)
    user = _opt(opts, "user") or getpass.getuser()
    jump = _opt(opts, "proxyjump")
    alias = _opt(opts, "hostkeyalias")
    tokens = client_tokens(name, hostname, port, user, jump, alias)
    ids = [expand_path(p, tokens, environ) for p in opts.get("identityfile", ())]
    certs = [expand_path(p, tokens, environ) for p in opts.get("certificatefile", ())]
    agent = _opt(opts, "identityagent")
    if agent is None and "identityagent" not in opts:
        agent = (os.environ if environ is None else environ).get("SSH_AUTH_SOCK") or None
    elif agent == "SSH_AUTH_SOCK":
        agent = (os.environ if environ is None else environ).get("SSH_AUTH_SOCK") or None
    timeout = _opt(opts, "connecttimeout")
    applied = _applied_blocks(stderr)
    return SshSettings(
        name=name,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=tuple(dict.fromkeys(ids)),
        certificate_files=tuple(dict.fromkeys(certs)),
        identities_only=_bool(opts.get("identitiesonly")),
        identity_agent=agent,
        proxy_jump=jump,
        proxy_command=_opt(opts, "proxycommand"),
        host_key_alias=alias,
        user_known_hosts=_files(opts, "userknownhostsfile"),
        global_known_hosts=_files(opts, "globalknownhostsfile"),
        check_host_ip=_bool(opts.get("checkhostip")),
        connect_timeout_s=float(timeout) if timeout and timeout.isdigit() else None,
        server_alive_interval_s=float(_opt(opts, "serveraliveinterval") or 0) or DEFAULT_SERVER_ALIVE_INTERVAL_S,
        server_alive_count_max=int(_opt(opts, "serveralivecountmax") or 3),
        hash_known_hosts=_bool(opts.get("hashknownhosts")),
        argv=tuple(argv),
        options=opts,
        given=dict(given or {}),
        applied=tuple(applied),
        missing_identities=tuple(p for p in dict.fromkeys(ids) if not os.path.exists(p) and not _default_id(p)),
    )


def _default_id(path: str) -> bool:
    return path in {str(account_home() / ".ssh" / n) for n in DEFAULT_IDENTITY_NAMES}


def _applied_blocks(stderr: str) -> list[tuple[str, int, str]]:
    """The ``Host``/``Match`` blocks ssh applied, from its ``-vv`` log: ``Applying options for`` names file and
    line; a ``Match`` only says ``checking match for 'CRITERIA'`` then ``match found``, so its line is looked
    up in the files ssh read."""
    applied: list[tuple[str, int, str]] = []
    files: list[str] = []
    pending: str | None = None
    for line in stderr.splitlines():
        if m := _READING.match(line):
            files.append(m.group("file"))
        elif m := _APPLYING.match(line):
            applied.append((m.group("file"), int(m.group("line")), "Host " + m.group("what")))
        elif m := _CHECKING.match(line):
            pending = m.group("what")
        elif pending is not None and line.endswith("match found") and "not found" not in line:
            where = _find_match_line(files, pending)
            if where is not None:
                applied.append((*where, "Match " + pending))
            pending = None
    return applied


def _find_match_line(files: Sequence[str], criteria: str) -> tuple[str, int] | None:
    want = " ".join(criteria.split()).lower()
    for f in files:
        try:
            lines = output_lines(Path(f).read_text(errors="replace"))
        except OSError:
            continue
        for n, text in enumerate(lines, start=1):
            words = text.replace("=", " ", 1).split(None, 1)
            if len(words) == 2 and words[0].lower() == "match" and " ".join(words[1].split()).lower() == want:
                return f, n
    return None


def host_argv(host: Host) -> tuple[list[str], dict[str, str]]:
    """The ``ssh -G`` arguments for an inventory host (after ``ssh -G``) and what each came from."""
    args: list[str] = []
    given: dict[str, str] = {}
    if host.user:
        args += ["-l", host.user]
        given["user"] = "inventory `user:` (ssh -l)"
    if host.port:
        args += ["-p", str(host.port)]
        given["port"] = "inventory `port:` (ssh -p)"
    if host.address:
        # ssh expands %-tokens in HostName (ssh_config(5) TOKENS: %% and %h), so an IPv6 zone id
        # (fe80::1%lo) must reach it as %%; it prints the address back unescaped. -l and -p are taken literally,
        # and -i keeps its tokens on purpose (expand_path applies them, as ssh does).
        args += ["-o", "HostName=" + host.address.replace("%", "%%")]
        given["hostname"] = "inventory `address:` (ssh -o HostName=)"
    if host.identity_file:
        args += ["-i", host.identity_file]
        given["identityfile"] = "inventory `identity_file:` (ssh -i), then ssh_config"
    return args + ["--", host.name], given


class SshResolver:
    """Asks ``ssh -G`` once per distinct question for one run (doctor, deploy, run) and keeps the answers;
    also loads each set of known_hosts files once and collects their warnings.
    """

    def __init__(self) -> None:
        self._ssh: str | None = None
        self._cache: dict[tuple[str, ...], asyncio.Future[SshSettings]] = {}
        self._sem: asyncio.Semaphore | None = None
        self._known: dict[tuple[str, ...], hostkeys.KnownHosts] = {}

    def _semaphore(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(SPAWN_CONCURRENCY)
        return self._sem

    async def resolve(self, host: Host) -> SshSettings:
        """The settings OpenSSH would use for an inventory host. Raises ToolMissingError, ConfigError."""
        args, given = host_argv(host)
        settings = await self._ask(host.name, args, given)
        if host.identity_file:
            tokens = client_tokens(
                host.name, settings.hostname, settings.port, settings.user, settings.proxy_jump,
                settings.host_key_alias,
            )  # fmt: skip
            path = expand_path(host.identity_file, tokens)
            if not os.path.exists(path):  # ssh -i drops a file it cannot stat, with a warning
                from dataclasses import replace

                settings = replace(settings, missing_identities=(path, *settings.missing_identities))
        return settings

    async def resolve_hop(self, hop: JumpHop) -> SshSettings:
        """The settings for a ProxyJump hop: ``ssh -G [-l USER] [-p PORT] HOST`` as ssh's ``-J`` runs it."""
        args: list[str] = []
        if hop.user:
            args += ["-l", hop.user]
        if hop.port:
            args += ["-p", str(hop.port)]
        return await self._ask(hop.host, [*args, "--", hop.host], {})

    async def _ask(self, name: str, args: list[str], given: dict[str, str]) -> SshSettings:
        if self._ssh is None:
            self._ssh = ssh_binary()
        argv = (self._ssh, "-G", "-vv", *config_args(), *args)
        fut = self._cache.get(argv)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._cache[argv] = fut
            try:
                fut.set_result(await self._run(name, argv, given))
            except BaseException as exc:
                fut.set_exception(exc)
                fut.exception()  # retrieved here; waiters get it from await
                raise
        return await asyncio.shield(fut)

    async def _run(self, name: str, argv: tuple[str, ...], given: dict[str, str]) -> SshSettings:
        async with self._semaphore():
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
            except FileNotFoundError:
                raise ToolMissingError(f"the OpenSSH client {argv[0]} cannot be run", SSH_CLIENT_HINT) from None
            try:
                out, err = await asyncio.wait_for(proc.communicate(), RESOLVE_TIMEOUT_S)
            except (asyncio.TimeoutError, TimeoutError):
                children.kill(proc)
                await proc.wait()
                raise ConfigError(
                    f"{name}: `ssh -G` did not answer within {RESOLVE_TIMEOUT_S:g} s",
                    "a `Match exec` command in ssh_config hangs; fix or remove it",
                ) from None
        stderr = err.decode("utf-8", "replace")
        if proc.returncode != 0:
            lines = [ln for ln in stderr.splitlines() if not ln.startswith(("debug", "OpenSSH_", "Pseudo-terminal"))]
            raise ConfigError(
                f"{name}: OpenSSH cannot resolve its configuration: {' | '.join(lines) or f'exit {proc.returncode}'}",
                "fix the ssh_config line named above (ssh -G " + name + " shows the same error)",
            )
        return settings_from_output(name, out.decode("utf-8", "replace"), argv=argv, given=given, stderr=stderr)

    def known_hosts(self, settings: SshSettings) -> hostkeys.KnownHosts:
        """The loaded known_hosts files of ``settings`` (each distinct list read once per run)."""
        files = tuple(str(p) for p in settings.known_hosts_files())
        if files not in self._known:
            self._known[files] = hostkeys.load_known_hosts(files)
        return self._known[files]

    def warnings(self) -> list[hostkeys.KnownHostsWarning]:
        """Every known_hosts warning seen this run, once per file:line, in file and line order."""
        seen: dict[tuple[str, int], hostkeys.KnownHostsWarning] = {}
        for kh in self._known.values():
            for w in kh.warnings:
                seen.setdefault((w.file, w.line), w)
        return list(seen.values())


def origins(settings: SshSettings) -> dict[str, str]:
    """Where each shown setting came from: the inventory (command line), the first applied ``Host``/``Match``
    block (file:line) that sets it, or OpenSSH's default. For ``orch hosts show``; reads the config files."""
    keys = (
        "hostname", "port", "user", "identityfile", "certificatefile", "identitiesonly", "identityagent",
        "proxyjump", "proxycommand", "hostkeyalias", "userknownhostsfile", "globalknownhostsfile", "checkhostip",
        "connecttimeout", "serveraliveinterval", "serveralivecountmax",
    )  # fmt: skip
    out: dict[str, str] = {}
    blocks: list[tuple[str, int, list[tuple[int, str]]]] = []
    for file, line, _what in settings.applied:
        try:
            lines = output_lines(Path(file).read_text(errors="replace"))
        except OSError:
            continue
        body: list[tuple[int, str]] = []
        for n in range(line, len(lines)):  # the lines after the Host/Match line, up to the next block
            text = lines[n].strip()
            word = text.split(None, 1)[0].lower() if text else ""
            if word in ("host", "match"):
                break
            body.append((n + 1, word.split("=")[0]))
        blocks.append((file, line, body))
    for key in keys:
        if key in settings.given:
            out[key] = settings.given[key]
            continue
        for file, _line, body in blocks:
            hit = next((n for n, word in body if word == key), None)
            if hit is not None:
                out[key] = f"{file}:{hit}"
                break
        else:
            out[key] = "OpenSSH default" if key in settings.options else "unset"
    if out["serveraliveinterval"] == "OpenSSH default":  # 0 (off) there: orch's own default is what connects
        out["serveraliveinterval"] = "orch's default (OpenSSH's, 0, is off)"
    return out


_SHOWN = (
    ("hostname", "hostname"), ("port", "port"), ("user", "user"), ("identity_files", "identityfile"),
    ("certificate_files", "certificatefile"), ("identities_only", "identitiesonly"),
    ("identity_agent", "identityagent"), ("proxy_jump", "proxyjump"), ("proxy_command", "proxycommand"),
    ("host_key_alias", "hostkeyalias"), ("user_known_hosts_files", "userknownhostsfile"),
    ("global_known_hosts_files", "globalknownhostsfile"), ("check_host_ip", "checkhostip"),
    ("connect_timeout_s", "connecttimeout"), ("server_alive_interval_s", "serveraliveinterval"),
    ("server_alive_count_max", "serveralivecountmax"),
)  # fmt: skip


async def describe(host: Host) -> dict[str, Any]:
    """``orch hosts show``: ``{"host", "argv", "settings", "origins", "rows": [[setting, value, origin]]}``.

    Raises UsageError for a ``connection: local`` host, ToolMissingError, ConfigError.
    """
    from orchestrator.errors import UsageError

    if host.connection == "local":
        raise UsageError(f"{host.name} has connection: local", "there are no SSH settings for a local host")
    s = await SshResolver().resolve(host)
    settings = s.to_dict()
    where = origins(s)
    rows = []
    for key, option in _SHOWN:
        value = settings[key]
        shown = " ".join(str(v) for v in value) if isinstance(value, list) else ("-" if value is None else str(value))
        rows.append([key, shown or "-", where[option]])
    if s.missing_identities:
        rows.append(["missing identity files", " ".join(s.missing_identities), "skipped, as OpenSSH skips them"])
    return {"host": host.name, "argv": list(s.argv), "settings": settings, "origins": where, "rows": rows}
