"""Reaching hosts as OpenSSH would (issue 12 items 1-8), against real sshd, ssh-agent and OpenSSH's ``ssh``.

Every ssh_config case also checks that orch's resolved settings are what ``ssh -G`` prints and that the
identity files orch offers are the ones ``ssh -v`` says it loads (OpenSSH expands their tokens itself only
when connecting, so the check asks a connecting ``ssh`` whose ProxyCommand is ``false``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.inventory import parse_inventory
from orchestrator.transport.sshconfig import SshResolver, config_args, origins, parse_jump
from tests.integration import peers
from tests.integration.netns import netns
from tests.integration.peers import doctor, doctor_one, entry, statuses
from tests.plugins.sshd import ClientHome, SshdBed, SshdHost, keygen

pytestmark = pytest.mark.sshd

SSH = shutil.which("ssh") or "/usr/bin/ssh"
CONNECT = ("dns", "tcp", "banner", "hostkey", "auth")
TIMEOUT_S = 10.0  # per step; sshd on a loaded 2-core box, and jump hosts double the handshakes


def ssh_g(name: str, *args: str) -> dict[str, list[str]]:
    """What OpenSSH itself resolves for ``name`` (same -F rule as orch: the test HOME's config)."""
    out = subprocess.run(
        [SSH, "-G", *config_args(), *args, "--", name], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    doc: dict[str, list[str]] = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        doc.setdefault(k, []).append(v)
    return doc


def ssh_identity_files(name: str, *args: str) -> list[str]:
    """The identity files a connecting ``ssh`` loads (``debug1: identity file PATH type N``), certificates
    excluded; ProxyCommand ``false`` so that nothing is contacted."""
    res = subprocess.run(
        [SSH, "-v", *config_args(), "-o", "ProxyCommand=false", "-o", "BatchMode=yes", *args, "--", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    files = re.findall(r"^debug1: identity file (.+) type -?\d+$", res.stderr, re.M)
    return [f for f in files if not f.endswith("-cert")]


def resolve(name: str, **inv: object) -> object:
    host = parse_inventory(peers.inventory_text({name: dict(inv)})).host(name)
    return asyncio.run(SshResolver().resolve(host))


async def aresolve(name: str, **inv: object):  # type: ignore[no-untyped-def]
    host = parse_inventory(peers.inventory_text({name: dict(inv)})).host(name)
    return await SshResolver().resolve(host)


async def assert_same_as_openssh(name: str, *args: str, **inv: object) -> None:
    """orch's settings for ``name`` equal ``ssh -G``'s; its identity files are the ones ``ssh`` loads."""
    s = await aresolve(name, **inv)
    g = ssh_g(name, *args)
    assert s.hostname == g["hostname"][0]
    assert str(s.port) == g["port"][0]
    assert s.user == g["user"][0]
    assert (s.proxy_jump or "none") == g.get("proxyjump", ["none"])[0]
    assert (s.proxy_command or "none") == g.get("proxycommand", ["none"])[0]
    assert (s.host_key_alias or "none") == g.get("hostkeyalias", ["none"])[0]
    assert " ".join(s.user_known_hosts) == g["userknownhostsfile"][0]
    assert s.identities_only == (g["identitiesonly"][0] == "yes")
    assert list(s.identity_files) == ssh_identity_files(name, *args)


# ------------------------------------------------------------------------------------------ ProxyJump


@pytest.fixture
def jump_bed(sshd_bed: SshdBed, client_home: ClientHome) -> Iterator[tuple[SshdHost, SshdHost]]:
    """A bastion and a target in a network namespace; the target listens on the namespace's loopback, which
    only the bastion (inside too, also listening on the veth address) can reach."""
    with netns() as ns:
        bastion = sshd_bed.add("bastion", address=ns.inside, port=2201, wrapper=ns.wrapper, trusted=False)
        target = sshd_bed.add("target", address="127.0.0.1", port=2202, wrapper=ns.wrapper, trusted=False)
        client_home.trust(bastion.known_hosts_line(), target.known_hosts_line())
        yield bastion, target


async def test_proxyjump_to_an_alias_reaches_a_target_only_the_bastion_sees(
    jump_bed: tuple[SshdHost, SshdHost], client_home: ClientHome
) -> None:
    bastion, target = jump_bed
    client_home.add_config(
        f"Host bastion-alias\n  HostName {bastion.address}\n  Port {bastion.port}\n  User root\n"
        f"  IdentityFile {client_home.key}\n"
        f"Host gpu-target\n  HostName 127.0.0.1\n  Port {target.port}\n  ProxyJump bastion-alias\n"
    )
    with pytest.raises(OSError):  # nothing answers there from this namespace: only through the bastion
        socket_connect("127.0.0.1", target.port)
    await assert_same_as_openssh("gpu-target")
    await assert_same_as_openssh("bastion-alias")
    r = await doctor_one("gpu-target", {}, timeout_s=TIMEOUT_S)
    assert r.ok, [(c.name, c.status, c.detail) for c in r.checks]
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"], hk.data["lookup_name"]) == ("ok", "match", f"[127.0.0.1]:{target.port}")
    [hop] = hk.data["hops"]
    assert (hop["hop"], hop["hostname"], hop["port"]) == ("bastion-alias", bastion.address, bastion.port)
    assert hop["hostkey"]["verdict"] == "match"
    assert hop["hostkey"]["offered_fingerprint"] == peers.fingerprint(bastion.host_keys["ed25519"].with_suffix(".pub"))
    assert "via bastion-alias" in hk.detail
    assert r.check("tcp").detail.startswith(f"jump host bastion-alias: connected to {bastion.address}")
    assert (r.address, r.port) == ("127.0.0.1", target.port)
    assert "Accepted publickey" in (target.root / "sshd.log").read_text()


async def test_jump_host_key_is_judged_and_shown(jump_bed: tuple[SshdHost, SshdHost], client_home: ClientHome) -> None:
    bastion, target = jump_bed
    # Only the target's key is on file: the bastion is unknown, so nothing goes past it.
    client_home.known_hosts.write_text(target.known_hosts_line() + "\n")
    client_home.add_config(
        f"Host gpu-target2\n  HostName 127.0.0.1\n  Port {target.port}\n"
        f"  ProxyJump root@{bastion.address}:{bastion.port}\n"
    )
    await assert_same_as_openssh("gpu-target2")
    r = await doctor_one("gpu-target2", {}, timeout_s=TIMEOUT_S)
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("fail", "unknown"), hk.detail
    assert hk.detail.startswith(f"jump host root@{bastion.address}:{bastion.port}: no known_hosts entry")
    assert hk.data["hops"][0]["hostkey"]["verdict"] == "unknown"
    assert r.check("auth").status == "skipped"
    assert "Accepted publickey" not in (bastion.root / "sshd.log").read_text()


async def test_proxycommand_ssh_w_is_run_whole(jump_bed: tuple[SshdHost, SshdHost], client_home: ClientHome) -> None:
    bastion, target = jump_bed
    cfg = client_home.ssh_config
    client_home.add_config(
        f"Host pc-bastion\n  HostName {bastion.address}\n  Port {bastion.port}\n  User root\n  BatchMode yes\n"
        f"Host pc-target\n  HostName 127.0.0.1\n  Port {target.port}\n"
        f"  ProxyCommand {SSH} -F {cfg} -W %h:%p pc-bastion\n"
    )
    await assert_same_as_openssh("pc-target")
    r = await doctor_one("pc-target", {}, timeout_s=TIMEOUT_S)
    assert r.ok, [(c.name, c.status, c.detail) for c in r.checks]
    assert r.check("tcp").status == "skipped" and "ProxyCommand" in r.check("tcp").detail
    assert r.check("hostkey").data["verdict"] == "match"


def socket_connect(addr: str, port: int) -> None:
    import socket

    with socket.create_connection((addr, port), timeout=5):
        pass


async def test_match_forms_and_other_options_resolve_as_openssh(client_home: ClientHome, tmp_path: Path) -> None:
    user = os.environ.get("USER") or "root"
    cert = tmp_path / "c-cert.pub"
    client_home.add_config(
        "Match originalhost m-orig exec true\n  HostName 10.1.1.1\n  ConnectTimeout 7\n"
        f"Match host 10.1.1.1 user {user}\n  ServerAliveInterval 11\n  ServerAliveCountMax 5\n"
        f"Match localuser {user} originalhost m-*\n  IdentitiesOnly yes\n  CertificateFile {cert}\n"
        "  CheckHostIP yes\n  IdentityAgent none\n"
        "Match exec false\n  HostName 10.9.9.9\n"
        "Host m-other\n  ProxyJump alice@j1:2022,ssh://j2\n"
    )
    for name in ("m-orig", "m-other"):
        await assert_same_as_openssh(name)
        s = await aresolve(name)
        g = ssh_g(name)
        assert (s.connect_timeout_s, g["connecttimeout"][0]) in ((7.0, "7"), (None, "none"))
        alive = g["serveraliveinterval"][0]  # 0 (off): orch sends its own keepalives (sshconfig.py)
        assert (str(int(s.server_alive_interval_s)), str(s.server_alive_count_max)) == (
            "15" if alive == "0" else alive,
            g["serveralivecountmax"][0],
        )
        assert s.check_host_ip == (g["checkhostip"][0] == "yes")
        assert s.certificate_files == (str(cert),) and s.identity_agent is None
    s = await aresolve("m-orig")
    assert (s.hostname, s.connect_timeout_s, s.server_alive_interval_s, s.identities_only) == (
        "10.1.1.1",
        7.0,
        11,
        True,
    )
    assert [str(h) for h in parse_jump((await aresolve("m-other")).proxy_jump or "")] == ["alice@j1:2022", "j2"]
    cfg = str(client_home.ssh_config)
    assert [(f, n) for f, n, _ in s.applied] == [(cfg, 1), (cfg, 4), (cfg, 7), (cfg, 17)]  # `Host *` defaults last
    where = origins(s)
    assert (where["hostname"], where["serveraliveinterval"], where["identitiesonly"]) == (
        f"{cfg}:2",
        f"{cfg}:5",
        f"{cfg}:8",
    )


# ------------------------------------------------------------------------------------------ tokens, agent


async def test_percent_r_uses_the_inventory_user(sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path) -> None:
    h = sshd_bed.add("tok", authorized=False)
    keys = tmp_path / "keys"
    keys.mkdir()
    user = os.environ.get("USER") or "root"
    right = keygen(keys / f"{user}-{h.address}.key")
    keygen(keys / f"nobody-{h.address}.key")  # what expanding %r before applying the inventory user would pick
    h.authorized_keys.write_text(Path(f"{right}.pub").read_text())
    client_home.add_config(f"Host tok\n  HostName {h.address}\n  User nobody\n  IdentityFile {keys}/%r-%h.key\n")
    s = await aresolve("tok", user=user, port=h.port)
    assert s.identity_files[0] == str(right)
    await assert_same_as_openssh("tok", "-l", user, "-p", str(h.port), user=user, port=h.port)
    r = await doctor_one("tok", {"user": user, "port": h.port}, timeout_s=TIMEOUT_S)
    assert r.check("auth").status == "ok", r.check("auth").detail
    assert r.check("auth").data["identity"] == str(right)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real ssh-agent on a socket in tmp_path, exported as SSH_AUTH_SOCK."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if sock.exists():
                break
            if proc.poll() is not None:
                pytest.fail("ssh-agent exited")
            import time

            time.sleep(0.05)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


async def test_missing_identity_files_fall_back_to_the_agent(
    sshd_bed: SshdBed, client_home: ClientHome, agent: Path, tmp_path: Path
) -> None:
    h = sshd_bed.add("agent-host", authorized=False)
    loaded = keygen(tmp_path / "agent_only")
    subprocess.run(["ssh-add", str(loaded)], check=True, capture_output=True, env={**os.environ}, timeout=30)
    h.authorized_keys.write_text(loaded.with_suffix(".pub").read_text())
    fp = peers.fingerprint(loaded.with_suffix(".pub"))
    loaded.unlink()
    loaded.with_suffix(".pub").unlink()
    missing = tmp_path / "gone" / "id_missing"
    client_home.add_config(f"Host agent-host\n  HostName {h.address}\n  Port {h.port}\n  IdentityFile {missing}\n")
    await assert_same_as_openssh("agent-host")
    r = await doctor_one("agent-host", {"identity_file": str(tmp_path / "nope.key")}, timeout_s=TIMEOUT_S)
    assert statuses(r)["tcp"] == "ok" and statuses(r)["banner"] == "ok"
    a = r.check("auth")
    assert a.status == "ok", a.detail
    assert a.data["identity"].startswith(f"agent key {fp} (")
    assert f"{missing} (no such file" in a.detail and f"{tmp_path / 'nope.key'} (no such file" in a.detail


async def test_auth_failure_names_user_methods_and_every_identity(
    sshd_bed: SshdBed, client_home: ClientHome, agent: Path, tmp_path: Path
) -> None:
    h = sshd_bed.add("deny-host", authorized=False)
    in_agent = keygen(tmp_path / "in_agent")
    subprocess.run(["ssh-add", str(in_agent)], check=True, capture_output=True, timeout=30)
    r = await doctor_one("deny-host", entry(h), timeout_s=TIMEOUT_S)
    a = r.check("auth")
    assert (a.status, a.data["kind"]) == ("fail", "denied"), a.detail
    user = os.environ.get("USER") or "root"
    assert f"permission denied for {user}@{h.address}:{h.port} (server allows publickey)" in a.detail
    assert a.data["tried"] == [
        f"agent key {peers.fingerprint(in_agent.with_suffix('.pub'))} ({in_agent.name})",
        str(client_home.key),
    ]


async def test_keyboard_interactive_only_server_gets_a_true_message(sshd_bed: SshdBed) -> None:
    h = sshd_bed.add(
        "kbd-only", extra_config=["Match all", "PubkeyAuthentication no", "KbdInteractiveAuthentication yes"]
    )
    r = await doctor_one("kbd-only", entry(h), timeout_s=TIMEOUT_S)
    a = r.check("auth")
    assert (a.status, a.data["kind"]) == ("fail", "no-method"), a.detail
    assert "allows only keyboard-interactive authentication" in a.detail
    assert "no key was offered" in a.detail
    assert a.data["tried"] == []
    assert "PubkeyAuthentication" in a.data["hint"]


# ------------------------------------------------------------------------------------------ certificates


async def test_host_certificate_via_host_key_alias(sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path) -> None:
    h = sshd_bed.add("gpu-1", trusted=False)
    ca = peers.make_ca(tmp_path)
    ca.sign_host(h, principal="gpu-1.gpu.example")
    client_home.trust(f"@cert-authority *.gpu.example {ca.pub_line}")
    client_home.add_config(
        f"Host gpu-1.gpu.example\n  HostName {h.address}\n  Port {h.port}\n  HostKeyAlias gpu-1.gpu.example\n"
    )
    await assert_same_as_openssh("gpu-1.gpu.example")
    r = await doctor_one("gpu-1.gpu.example", {}, timeout_s=TIMEOUT_S)
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "cert-authority"), hk.detail
    assert hk.data["lookup_name"] == "gpu-1.gpu.example"
    assert r.check("auth").status == "ok"


# ------------------------------------------------------------------------------------------ throttling


def _spellings(address: str, n: int) -> list[str]:
    """``n`` different spellings of one IPv4 address (inet_aton: hex / octal last part, leading zeros)."""
    head, last = address.rsplit(".", 1)
    out = [f"{head}.0x{'0' * k}{int(last):x}" for k in range(n // 2)]
    out += [f"{head}.0{'0' * k}{int(last):o}" for k in range(n - len(out))]
    return out


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """A venv without torch: the facts probe after login stays cheap when 40 hosts share this machine's CPUs
    (these tests are about connecting; the probe's outcome is not asserted)."""
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return str(venv / "bin" / "python")


async def test_forty_names_on_one_maxstartups_sshd_all_pass(
    sshd_bed: SshdBed, client_home: ClientHome, bare_python: str
) -> None:
    h = sshd_bed.add("thr", extra_config=["MaxStartups 10:30:100"], trusted=False)
    client_home.trust("throttle-target " + " ".join(h.pubkey_line().split()[:2]))
    names = _spellings(h.address, 40)
    client_home.add_config(
        "".join(f"Host thr{i:02d}\n  HostName {n}\n" for i, n in enumerate(names))
        + f"Host thr*\n  Port {h.port}\n  HostKeyAlias throttle-target\n"
    )
    await assert_same_as_openssh("thr07")
    report = await doctor({f"thr{i:02d}": {} for i in range(40)}, timeout_s=TIMEOUT_S, python=bare_python)
    failed = [
        (x.host, c.name, c.detail) for x in report.hosts for c in x.checks if c.name in CONNECT and c.status != "ok"
    ]
    assert failed == []
    assert sum(x.check("auth").status == "ok" for x in report.hosts) == 40
    # 40 names, one resolved address: at most 8 handshakes at once there, so sshd (dropping past 10) never had to
    assert "past MaxStartups" not in (h.root / "sshd.log").read_text()


async def test_maxstartups_drops_are_retried(sshd_bed: SshdBed, client_home: ClientHome, bare_python: str) -> None:
    # sshd drops 30%+ of new connections past 3 pending: orch's 8 handshakes at once get dropped and retry.
    h = sshd_bed.add("thr-low", extra_config=["MaxStartups 3:30:100"])
    report = await doctor({f"low{i:02d}": entry(h) for i in range(16)}, timeout_s=TIMEOUT_S, python=bare_python)
    failed = [
        (x.host, c.name, c.detail) for x in report.hosts for c in x.checks if c.name in CONNECT and c.status != "ok"
    ]
    assert failed == []
    log = (h.root / "sshd.log").read_text()
    drops = log.count("past MaxStartups")
    retried = sum(x.check("banner").data.get("attempts", 1) - 1 for x in report.hosts)
    assert retried >= drops >= 1  # every drop sshd logged was retried (a retry may also meet other drops)


async def test_throttled_only_when_retries_run_out() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"Exceeded MaxStartups\r\n\0")  # sshd 9.2 writes sizeof(msg), the NUL included
        await writer.drain()
        writer.close()

    async with peers._listener(close_at_once) as (addr, port, writers):
        r = await doctor_one("always-full", {"address": addr, "port": port}, timeout_s=TIMEOUT_S)
    b = r.check("banner")
    assert (b.status, b.data["kind"]) == ("fail", "throttled"), b.detail
    assert b.data["attempts"] == 8 and len(writers) == 8
    assert "Exceeded MaxStartups" in b.detail and "speaks something other" not in b.detail


# ------------------------------------------------------------------------------------------ known_hosts warnings


def test_known_hosts_warnings_once_per_line_in_table_and_json(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    a = sshd_bed.add("kw-a")
    b = sshd_bed.add("kw-b")
    typ, blob = a.pubkey_line().split()[:2]
    client_home.trust(
        f"|2|c2FsdA==|aGFzaA== {typ} {blob}",  # a hash form OpenSSH does not know
        f"kw-truncated {typ} {blob[:-9]}",  # base64 cut short
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({"kw-a": entry(a), "kw-b": entry(b)}))
    res = peers.orch_cli("doctor", "--json", home=client_home.home, inventory=inv, cwd=tmp_path, timeout=120)
    doc = json.loads(res.stdout)
    kh = str(client_home.known_hosts)
    assert [(w["file"], w["line"]) for w in doc["warnings"]] == [(kh, 3), (kh, 4)], doc["warnings"]
    assert "hashed" in doc["warnings"][0]["message"] and "key" in doc["warnings"][1]["message"]
    table = peers.orch_cli("doctor", home=client_home.home, inventory=inv, cwd=tmp_path, timeout=120)
    assert table.stdout.count(f"known_hosts warning: {kh}:3:") == 1
    assert table.stdout.count(f"known_hosts warning: {kh}:4:") == 1
    trust = peers.orch_cli(
        "hosts", "trust", "kw-a", "--fingerprint", "SHA256:x", home=client_home.home, inventory=inv, cwd=tmp_path
    )
    assert f"known_hosts warning: {kh}:3:" in trust.stdout


# ------------------------------------------------------------------------------------------ hosts show, no ssh


def test_hosts_show_prints_resolved_settings_and_origins(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    client_home.add_config("Host show-me\n  HostName 10.9.8.7\n  HostKeyAlias show-key\n")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({"show-me": {"port": 2222, "user": "alice"}}))
    res = peers.orch_cli("hosts", "show", "show-me", "--json", home=client_home.home, inventory=inv, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    g = ssh_g("show-me", "-l", "alice", "-p", "2222")
    assert doc["settings"]["hostname"] == g["hostname"][0] == "10.9.8.7"
    assert doc["settings"]["port"] == int(g["port"][0]) == 2222
    assert doc["settings"]["user"] == g["user"][0] == "alice"
    cfg = str(client_home.ssh_config)
    assert doc["origins"]["hostname"] == f"{cfg}:2"
    assert doc["origins"]["hostkeyalias"] == f"{cfg}:3"
    assert doc["origins"]["port"].startswith("inventory `port:`")
    assert doc["origins"]["checkhostip"] == "OpenSSH default"
    # ssh -G says 0 (off); what orch connects with is its own keepalive default, and hosts show says so
    assert g["serveraliveinterval"][0] == "0" and doc["settings"]["server_alive_interval_s"] == 15.0
    assert doc["origins"]["serveraliveinterval"] == "orch's default (OpenSSH's, 0, is off)"


def test_no_openssh_client_is_one_clear_error(client_home: ClientHome, tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({"a": {"address": "127.0.0.1"}, "b": {"address": "127.0.0.2"}}))
    env = peers.cli_env(client_home.home, inv, tmp_path)
    bare = tmp_path / "bin"
    bare.mkdir()
    env["PATH"] = str(bare)
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "doctor"], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "the OpenSSH client `ssh` is not installed" in res.stderr + res.stdout
    assert "openssh-client" in res.stderr + res.stdout
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "command",
    [
        "false",
        "sh -c 'echo no route to the bastion >&2; exit 255'",
        # Which end closes first decides what asyncssh raises: stdin first is EPIPE on its version write (seen as
        # "[Errno 32] Broken pipe" in CI when `false` exited between the two), stdout first is EOF. Both orders:
        "sh -c 'exec 0<&-; sleep 2'",
        "sh -c 'exec 1>&-; sleep 2'",
    ],
)
async def test_a_failing_proxycommand_is_named_not_blamed_on_the_host_key(
    client_home: ClientHome, command: str
) -> None:
    client_home.add_config(f"Host pc-broken\n  HostName 127.0.0.1\n  Port 22\n  ProxyCommand {command}\n")
    r = await doctor_one("pc-broken", {}, timeout_s=TIMEOUT_S)
    assert not r.ok
    banner = r.check("banner")
    assert banner.status == "fail", [(c.name, c.status, c.detail) for c in r.checks]
    assert banner.detail.startswith(f"the connection through ProxyCommand {command} closed before the SSH handshake")
    assert "ssh -G pc-broken" in str(banner.data.get("hint") or r.check("banner").data)
    assert r.check("hostkey").status != "fail"  # never blamed on the host key
