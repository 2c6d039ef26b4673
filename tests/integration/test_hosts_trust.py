"""``orch hosts trust HOST`` against real sshd peers: record only a confirmed fingerprint, replace a changed key
the way ``ssh-keygen -R`` does (backup kept), write hashed entries under HashKnownHosts — and OpenSSH's own
``ssh`` / ``ssh-keygen -F`` accept what orch wrote."""

from __future__ import annotations

import getpass
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import peers
from tests.integration.peers import doctor_one, entry
from tests.plugins.sshd import SSH_KEYGEN, ClientHome, SshdBed, SshdHost, keygen
from tests.plugins.timing import scaled

pytestmark = pytest.mark.sshd

SSH = shutil.which("ssh") or "/usr/bin/ssh"


def _inventory(tmp_path: Path, hosts: dict[str, SshdHost]) -> Path:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({n: entry(h) for n, h in hosts.items()}))
    return inv


def _trust(
    client_home: ClientHome, inv: Path, tmp_path: Path, name: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return peers.orch_cli(
        "hosts", "trust", name, "--timeout", str(peers.TIMEOUT_S), *args,
        home=client_home.home, inventory=inv, cwd=tmp_path,
    )  # fmt: skip


def _fp(h: SshdHost) -> str:
    return peers.fingerprint(h.host_keys["ed25519"].with_suffix(".pub"))


def _openssh_login(client_home: ClientHome, h: SshdHost) -> subprocess.CompletedProcess[str]:
    """Real OpenSSH ``ssh`` with strict host key checking against the client's known_hosts (ssh takes ~ from
    the password database, not $HOME, so every file is named)."""
    return subprocess.run(
        [
            SSH,
            "-F",
            str(client_home.ssh_config),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={client_home.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "IdentitiesOnly=yes",
            "-i",
            str(client_home.key),
            "-p",
            str(h.port),
            f"{getpass.getuser()}@{h.address}",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )


async def test_unknown_host_recorded_with_matching_fingerprint(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    h = sshd_bed.add("tr-new", trusted=False)
    # Said explicitly: Debian's /etc/ssh/ssh_config sets HashKnownHosts yes, and the user's file wins over it.
    client_home.add_config("Host *\n  HashKnownHosts no\n")
    inv = _inventory(tmp_path, {"tr-new": h})
    assert (await doctor_one("tr-new", entry(h))).check("hostkey").data["verdict"] == "unknown"
    assert _openssh_login(client_home, h).returncode == 255  # OpenSSH refuses it too

    res = _trust(client_home, inv, tmp_path, "tr-new", "--fingerprint", _fp(h))
    assert res.returncode == 0, res.stdout + res.stderr
    assert _fp(h) in res.stdout
    lines = client_home.known_hosts.read_text().splitlines()
    assert lines == [h.known_hosts_line()]  # `[addr]:port ssh-ed25519 BASE64`, as ssh writes it unhashed

    hk = (await doctor_one("tr-new", entry(h))).check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    login = _openssh_login(client_home, h)
    assert login.returncode == 0, login.stderr

    again = _trust(client_home, inv, tmp_path, "tr-new", "--fingerprint", _fp(h))
    assert again.returncode == 0
    assert "already trusted (match)" in again.stdout
    assert client_home.known_hosts.read_text().splitlines() == lines


@pytest.mark.parametrize("also_trusted", [False, True], ids=["revoked-only", "trusted-and-revoked"])
async def test_revoked_key_is_never_recorded(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path, also_trusted: bool
) -> None:
    """Issue 19: with trust's @revoked check removed, `orch hosts trust` wrote a revoked key to known_hosts."""
    h = sshd_bed.add("tr-revoked", trusted=also_trusted)
    client_home.trust("@revoked " + h.known_hosts_line())
    inv = _inventory(tmp_path, {"tr-revoked": h})
    before = client_home.known_hosts.read_bytes()
    for extra in ((), ("--replace",)):
        res = _trust(client_home, inv, tmp_path, "tr-revoked", "--fingerprint", _fp(h), *extra)
        assert res.returncode == 1, res.stdout + res.stderr
        out = " ".join((res.stdout + res.stderr).split())
        assert "the offered key is marked @revoked; it will not be trusted" in out, out
        assert "Traceback" not in out
        assert client_home.known_hosts.read_bytes() == before
        assert not (client_home.ssh_dir / "known_hosts.old").exists()
    assert (await doctor_one("tr-revoked", entry(h))).check("hostkey").data["verdict"] == "revoked"
    assert _openssh_login(client_home, h).returncode == 255  # OpenSSH refuses it as well


async def test_wrong_fingerprint_is_refused_and_nothing_written(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    h = sshd_bed.add("tr-wrong", trusted=False)
    other = sshd_bed.add("tr-other", trusted=False, start=False)  # a real key, but not this host's
    inv = _inventory(tmp_path, {"tr-wrong": h})
    before = client_home.known_hosts.read_bytes()
    res = _trust(client_home, inv, tmp_path, "tr-wrong", "--fingerprint", _fp(other))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"is not the one the host offers ({_fp(h)})" in " ".join((res.stdout + res.stderr).split())
    assert client_home.known_hosts.read_bytes() == before
    assert not (client_home.ssh_dir / "known_hosts.old").exists()
    assert (await doctor_one("tr-wrong", entry(h))).check("hostkey").data["verdict"] == "unknown"


async def test_no_terminal_to_ask_on_is_a_usage_error_naming_fingerprint(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    # the new-user trial: `orch hosts trust box </dev/null` printed the prompt, then "Aborted." with exit 130
    h = sshd_bed.add("tr-notty", trusted=False)
    inv = _inventory(tmp_path, {"tr-notty": h})
    before = client_home.known_hosts.read_bytes()
    res = subprocess.run(
        [sys.executable, "-m", "orchestrator", "hosts", "trust", "tr-notty", "--timeout", str(peers.TIMEOUT_S)],
        cwd=tmp_path, env=peers.cli_env(client_home.home, inv, tmp_path), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=scaled(120),
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "stdin is not a terminal" in err and "orch hosts trust tr-notty --fingerprint SHA256:" in err, err
    assert _fp(h) in res.stdout  # the offered key's fingerprint is shown, to compare with the console
    assert "Aborted" not in res.stdout + res.stderr and "Traceback" not in res.stderr
    assert client_home.known_hosts.read_bytes() == before


async def test_changed_key_needs_replace_which_keeps_a_backup(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    bystander = sshd_bed.add("tr-bystander", start=False)  # line 1: another host's entry must survive
    h = sshd_bed.add("tr-changed", key_types=("ed25519", "ecdsa"))  # lines 2-3: both of its keys
    client_home.trust(f"@cert-authority [{h.address}]:{h.port} {bystander.pubkey_line()}")  # line 4: kept
    old_text = client_home.known_hosts.read_text()
    h.reinstall("ed25519")
    h.reinstall("ecdsa")
    inv = _inventory(tmp_path, {"tr-changed": h})
    assert (await doctor_one("tr-changed", entry(h))).check("hostkey").data["verdict"] == "changed"

    refused = _trust(client_home, inv, tmp_path, "tr-changed", "--fingerprint", _fp(h))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    flat = " ".join((refused.stdout + refused.stderr).split())
    # exit 1, not 2 (issue 21): the command line is right, the host failed the key check (doctor's exit 1 too);
    # the refusal itself says what --replace is for and that the fingerprint is to be confirmed out of band
    assert "without --replace orch records nothing (exit 1: the host failed the check, as in orch doctor)" in flat
    assert f"until its fingerprint {_fp(h)} is confirmed with the host's administrator out of band" in flat
    # the fix doctor prints, word for word (one text: doctor's hint, this refusal, README's Host keys)
    hint = (await doctor_one("tr-changed", entry(h))).check("hostkey").data["hint"]
    assert hint in flat and hint.endswith("orch hosts trust tr-changed --replace (removes the old entries as "
                                          "ssh-keygen -R does, keeping known_hosts.old)")
    # refused BEFORE asking for a fingerprint (it used to ask, then refuse): no prompt, stdin never read
    asked = _trust(client_home, inv, tmp_path, "tr-changed")
    assert asked.returncode == 1 and "Type the fingerprint" not in asked.stdout + asked.stderr
    assert "CHANGED" in asked.stdout + asked.stderr and hint in " ".join((asked.stdout + asked.stderr).split())
    assert client_home.known_hosts.read_text() == old_text
    assert not (client_home.ssh_dir / "known_hosts.old").exists()

    res = _trust(client_home, inv, tmp_path, "tr-changed", "--fingerprint", _fp(h), "--replace")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "removed 2 old entries" in res.stdout
    assert (client_home.ssh_dir / "known_hosts.old").read_text() == old_text
    assert client_home.known_hosts.read_text().splitlines() == [
        bystander.known_hosts_line(),
        f"@cert-authority [{h.address}]:{h.port} {bystander.pubkey_line()}",
        h.known_hosts_line("ed25519"),
    ]
    hk = (await doctor_one("tr-changed", entry(h))).check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    assert _openssh_login(client_home, h).returncode == 0


async def test_hash_known_hosts_yes_writes_a_hashed_entry(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    h = sshd_bed.add("tr-hashed", trusted=False)
    client_home.add_config("Host *\n  HashKnownHosts yes\n")
    inv = _inventory(tmp_path, {"tr-hashed": h})
    res = _trust(client_home, inv, tmp_path, "tr-hashed", "--fingerprint", _fp(h))
    assert res.returncode == 0, res.stdout + res.stderr
    text = client_home.known_hosts.read_text()
    assert text.startswith("|1|") and h.address not in text
    assert len(text.splitlines()) == 1
    # OpenSSH finds it under the bracketed name, and logs in with strict checking.
    found = subprocess.run(
        [SSH_KEYGEN, "-F", f"[{h.address}]:{h.port}", "-f", str(client_home.known_hosts)],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0 and "|1|" in found.stdout
    assert _openssh_login(client_home, h).returncode == 0
    hk = (await doctor_one("tr-hashed", entry(h))).check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail


async def test_host_key_alias_trust_records_under_the_alias(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    h = sshd_bed.add("tr-alias", trusted=False)
    client_home.add_config(f"Host tr-alias\n  HostName {h.address}\n  Port {h.port}\n  HostKeyAlias tr-alias-key\n")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({"tr-alias": {}}))
    res = _trust(client_home, inv, tmp_path, "tr-alias", "--fingerprint", _fp(h))
    assert res.returncode == 0, res.stdout + res.stderr
    assert client_home.known_hosts.read_text().splitlines() == ["tr-alias-key " + " ".join(h.pubkey_line().split()[:2])]
    hk = (await doctor_one("tr-alias", {})).check("hostkey")
    assert (hk.status, hk.data["verdict"], hk.data["lookup_name"]) == ("ok", "match", "tr-alias-key"), hk.detail

    # Reinstalled: the hint and --replace use the alias as ssh-keygen -R would (no port on an alias).
    h.reinstall()
    changed = (await doctor_one("tr-alias", {})).check("hostkey")
    assert changed.data["verdict"] == "changed"
    assert changed.data["hint"].endswith("orch hosts trust tr-alias --replace (removes the old entries as "
                                         "ssh-keygen -R does, keeping known_hosts.old)")
    res = _trust(client_home, inv, tmp_path, "tr-alias", "--fingerprint", _fp(h), "--replace")
    assert res.returncode == 0, res.stdout + res.stderr
    assert client_home.known_hosts.read_text().splitlines() == ["tr-alias-key " + " ".join(h.pubkey_line().split()[:2])]
    assert (await doctor_one("tr-alias", {})).check("hostkey").data["verdict"] == "match"


async def test_a_revoked_wildcard_line_is_shown_as_revoked_not_as_a_known_key(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    """A tester saw `orch hosts trust` list an `@revoked *` line (another machine's stolen key) as a `known:` key of
    an unrelated host. It is consulted for every name, so it is shown — as what it is."""
    other = keygen(tmp_path / "stolen_ed25519")
    stolen = other.with_suffix(".pub").read_text().split()
    client_home.trust(f"@revoked * {stolen[0]} {stolen[1]}")
    h = sshd_bed.add("tr-unrelated", trusted=False)
    client_home.add_config("Host *\n  HashKnownHosts no\n")
    inv = _inventory(tmp_path, {"tr-unrelated": h})
    res = _trust(client_home, inv, tmp_path, "tr-unrelated", "--fingerprint", _fp(h))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "    revoked: " in out and " @revoked ssh-ed25519 " in out, out
    assert "    known: " not in out, out
