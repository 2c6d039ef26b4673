"""``trust.fetch_offer`` in-process against real sshd peers: every field of the :class:`Offer` that
``orch hosts trust`` shows and records from (name, address, port, the known_hosts name, the key as OpenSSH's
``ssh-keygen`` reads it, the verdict and its hint, the file written, hashing, HostKeyAlias, the skipped lines).

The CLI tests of ``test_hosts_trust.py`` run ``orch`` as a process; these call ``fetch_offer`` itself, so that
mutation testing (``scripts/mutation.sh orchestrator/trust.py``) sees which tests guard it — one sshd per test,
a second or two each.
"""

from __future__ import annotations

import base64
import subprocess

import pytest

from orchestrator import trust
from orchestrator.errors import ConnectError, UsageError
from orchestrator.hostkeys import KnownHostsWarning
from orchestrator.inventory import Host, parse_inventory
from orchestrator.transport import ssh as ssh_transport
from tests.integration import peers
from tests.plugins.sshd import SSH_KEYGEN, ClientHome, SshdBed, SshdHost

pytestmark = pytest.mark.sshd


def _host(name: str, spec: dict[str, object]) -> Host:
    return parse_inventory(peers.inventory_text({name: spec})).host(name)


def _blob(h: SshdHost) -> bytes:
    return base64.b64decode(h.pubkey_line().split()[1])


async def test_offer_of_an_unknown_host_names_the_inventory_host_and_the_first_user_file(
    sshd_bed: SshdBed, client_home: ClientHome
) -> None:
    h = sshd_bed.add("of-unknown", trusted=False)
    fleet = client_home.home / "fleet_known_hosts"  # first of two user files, not the default path
    fleet.write_text("not-a-key-line\n")  # OpenSSH skips it; the offer reports it once
    client_home.add_config(f"Host *\n  HashKnownHosts yes\n  UserKnownHostsFile {fleet} {client_home.known_hosts}\n")
    offer = await trust.fetch_offer(_host("gpu-a", peers.entry(h)), timeout_s=peers.TIMEOUT_S)

    fp = peers.fingerprint(h.host_keys["ed25519"].with_suffix(".pub"))  # ssh-keygen -lf, independent of orch
    assert (offer.host, offer.hostname, offer.port, offer.key_name) == ("gpu-a", h.address, h.port, h.address)
    assert offer.blob == _blob(h)
    assert (offer.fingerprint, offer.key_type) == (fp, "ssh-ed25519")
    assert offer.known_hosts_file == fleet  # UserKnownHostsFile's first file is the one written
    assert offer.hashed is True
    assert offer.host_key_alias is None
    v = offer.verdict
    assert (v.verdict, v.name, v.offered_fingerprint, v.known) == ("unknown", f"[{h.address}]:{h.port}", fp, [])
    assert v.hint.endswith("then: orch hosts trust gpu-a"), v.hint  # the inventory name, not the address
    assert offer.warnings == (KnownHostsWarning(str(fleet), 1, "no key after the host patterns"),)
    assert offer.to_dict() == {
        "host": "gpu-a",
        "hostname": h.address,
        "port": h.port,
        "fingerprint": fp,
        "key_type": "ssh-ed25519",
        "verdict": "unknown",
        "known_hosts_file": str(fleet),
        "warnings": [{"file": str(fleet), "line": 1, "message": "no key after the host patterns"}],
    }


async def test_offer_under_host_key_alias_matches_the_entry_ssh_keygen_finds(
    sshd_bed: SshdBed, client_home: ClientHome
) -> None:
    h = sshd_bed.add("of-alias", trusted=False)
    client_home.add_config(
        f"Host of-alias\n  HostName {h.address}\n  Port {h.port}\n  HostKeyAlias of-alias-key\n  HashKnownHosts no\n"
    )
    client_home.trust("of-alias-key " + " ".join(h.pubkey_line().split()[:2]))
    found = subprocess.run(  # OpenSSH looks the alias up verbatim: this is the entry ssh would use
        [SSH_KEYGEN, "-F", "of-alias-key", "-f", str(client_home.known_hosts)], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stdout + found.stderr
    offer = await trust.fetch_offer(_host("of-alias", {}), timeout_s=peers.TIMEOUT_S)
    assert (offer.host, offer.hostname, offer.port) == ("of-alias", h.address, h.port)
    assert (offer.key_name, offer.host_key_alias, offer.hashed) == ("of-alias-key", "of-alias-key", False)
    assert offer.blob == _blob(h)
    v = offer.verdict
    assert (v.verdict, v.name, v.ok) == ("match", "of-alias-key", True)
    assert [(k["file"], k["line"]) for k in v.known] == [(str(client_home.known_hosts), 1)]
    assert offer.warnings == ()


async def test_offer_with_no_known_hosts_files_writes_to_the_default_file(
    sshd_bed: SshdBed, client_home: ClientHome
) -> None:
    """``UserKnownHostsFile none`` and ``GlobalKnownHostsFile none``: nothing to judge against (unknown), and
    the file to record in is OpenSSH's default ``~/.ssh/known_hosts`` under this HOME."""
    h = sshd_bed.add("of-none", trusted=False)
    client_home.add_config("Host *\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n")
    offer = await trust.fetch_offer(_host("of-none", peers.entry(h)), timeout_s=peers.TIMEOUT_S)
    assert offer.known_hosts_file == client_home.home / ".ssh" / "known_hosts"
    assert (offer.verdict.verdict, offer.verdict.known, offer.warnings) == ("unknown", [], ())


async def test_offer_waits_the_given_deadline_and_ten_seconds_by_default(
    sshd_bed: SshdBed, client_home: ClientHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = sshd_bed.add("of-deadline", trusted=True)
    real = ssh_transport.fetch_offered_key
    seen: list[float] = []

    async def spy(host: Host, *, timeout_s: float = 10.0, resolver: object = None) -> object:
        seen.append(timeout_s)
        return await real(host, timeout_s=timeout_s)  # the real connection to the real sshd

    monkeypatch.setattr(ssh_transport, "fetch_offered_key", spy)
    offer = await trust.fetch_offer(_host("of-deadline", peers.entry(h)))
    assert offer.verdict.verdict == "match"
    await trust.fetch_offer(_host("of-deadline", peers.entry(h)), timeout_s=peers.TIMEOUT_S)
    assert seen == [10.0, peers.TIMEOUT_S]


async def test_offer_from_a_peer_that_never_speaks_fails_at_the_given_deadline(client_home: ClientHome) -> None:
    async with peers.silent_listener() as (addr, port, _):
        with pytest.raises(ConnectError) as err:
            await trust.fetch_offer(_host("mute", {"address": addr, "port": port}), timeout_s=peers.EXPIRING_TIMEOUT_S)
    assert f"no host key from {addr}:{port} within {peers.EXPIRING_TIMEOUT_S:g} s" in str(err.value)


async def test_a_local_host_has_no_key_to_offer() -> None:
    with pytest.raises(UsageError) as err:
        await trust.fetch_offer(_host("here", {"connection": "local"}))
    assert str(err.value) == "here has connection: local"
    assert err.value.hint == "there is no host key to trust for a local host"
