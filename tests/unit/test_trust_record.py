"""``trust.record`` — what ``orch hosts trust`` writes once a fingerprint is confirmed — on real keys made by
``ssh-keygen`` and real known_hosts files, judged by ``hostkeys.judge`` (no host: the offer is built from the
judged key, as ``fetch_offer`` builds it from a connection; that path is tested over sshd in
tests/integration/test_hosts_trust.py). The guards of trust.py's mutation run (docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator import hostkeys as hk
from orchestrator.errors import HostKeyError, UsageError
from orchestrator.trust import Offer, TrustResult, record

SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
pytestmark = pytest.mark.skipif(not os.path.exists(SSH_KEYGEN), reason="needs OpenSSH's ssh-keygen")
HOST = "gpu-a.example"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, hk.OfferedKey]:
    d = tmp_path_factory.mktemp("trustkeys")
    out = {}
    for name in ("old", "new"):
        subprocess.run(
            [SSH_KEYGEN, "-q", "-N", "", "-t", "ed25519", "-C", name, "-f", str(d / name)], check=True, timeout=60
        )
        out[name] = hk.OfferedKey.from_line((d / f"{name}.pub").read_text())
    return out


def _offer(
    kh: Path, key: hk.OfferedKey, *, port: int = 22, hashed: bool = False, alias: str | None = None
) -> Offer:
    verdict = hk.judge(
        hk.load_known_hosts([kh]), HOST, port, key, now=time.time(), host_key_alias=alias, inventory_name="gpu-a"
    )
    return Offer(
        "gpu-a", HOST, port, alias or HOST, key.blob, key.fingerprint, key.key_type, verdict, kh, hashed, alias
    )


def _verdict_now(kh: Path, key: hk.OfferedKey, port: int = 22, alias: str | None = None) -> str:
    return hk.judge(hk.load_known_hosts([kh]), HOST, port, key, now=time.time(), host_key_alias=alias).verdict


def test_a_fingerprint_that_is_not_the_offered_one_writes_nothing(
    keys: dict[str, hk.OfferedKey], tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    offer = _offer(kh, keys["new"])
    with pytest.raises(UsageError) as exc:
        record(offer, confirmed_fingerprint=keys["old"].fingerprint)
    assert str(exc.value) == (
        f"gpu-a: the fingerprint you gave ({keys['old'].fingerprint}) is not the one the host offers "
        f"({keys['new'].fingerprint})"
    )
    assert exc.value.hint.startswith("compare with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` run ON the host")
    with pytest.raises(UsageError, match=r"the fingerprint you gave \(nothing\)"):
        record(offer, confirmed_fingerprint="  ")
    assert not kh.exists()


def test_unknown_key_is_appended_as_ssh_would_and_then_matches(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "ssh" / "known_hosts"
    offer = _offer(kh, keys["new"])
    assert offer.verdict.verdict == "unknown"
    res = record(offer, confirmed_fingerprint=f"  {keys['new'].fingerprint}\n")  # pasted with blanks
    line = f"{HOST} {keys['new'].to_line()}"
    assert res == TrustResult(True, line, 0, None, kh)
    assert kh.read_text() == line + "\n"
    assert _verdict_now(kh, keys["new"]) == "match"


def test_hashed_and_bracketed_port_entries(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    res = record(_offer(kh, keys["new"], port=2222, hashed=True), confirmed_fingerprint=keys["new"].fingerprint)
    assert res.recorded and res.line_written.startswith("|1|") and HOST not in res.line_written
    assert res.line_written.endswith(keys["new"].to_line())
    assert _verdict_now(kh, keys["new"], 2222) == "match"
    assert _verdict_now(kh, keys["new"], 22) == "unknown"  # recorded for [host]:2222 only


def test_a_known_key_is_not_written_again(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{HOST} {keys['new'].to_line()}\n")
    for replace_ in (False, True):
        res = record(_offer(kh, keys["new"]), confirmed_fingerprint=keys["new"].fingerprint, replace=replace_)
        assert res == TrustResult(False, "", 0, None, kh)
    assert kh.read_text() == f"{HOST} {keys['new'].to_line()}\n"


def test_a_revoked_key_is_refused_even_with_replace(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    text = f"@revoked * {keys['new'].to_line()}\n"
    kh.write_text(text)
    for replace_ in (False, True):
        with pytest.raises(HostKeyError) as exc:
            record(_offer(kh, keys["new"]), confirmed_fingerprint=keys["new"].fingerprint, replace=replace_)
        assert exc.value.verdict == "revoked"
        assert str(exc.value) == "gpu-a: the offered key is marked @revoked; it will not be trusted"
    assert kh.read_text() == text


def test_a_changed_key_needs_replace(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    old = f"{HOST} {keys['old'].to_line()}\n"
    other = f"other.example {keys['old'].to_line()}\n"
    kh.write_text(old + other)
    offer = _offer(kh, keys["new"])
    assert offer.verdict.verdict == "changed"
    with pytest.raises(HostKeyError) as exc:
        record(offer, confirmed_fingerprint=keys["new"].fingerprint)
    assert exc.value.verdict == "changed"
    assert str(exc.value) == (
        f"gpu-a: the host key CHANGED (now {keys['new'].fingerprint}); known_hosts holds a different key, and "
        "without --replace orch records nothing (exit 1: the host failed the check, as in orch doctor)"
    )
    assert exc.value.hint == offer.verdict.hint and exc.value.hint.endswith(
        "orch hosts trust gpu-a --replace (removes the old entries as ssh-keygen -R does, keeping known_hosts.old)"
    )  # the text doctor prints for the same verdict
    assert kh.read_text() == old + other

    res = record(offer, confirmed_fingerprint=keys["new"].fingerprint, replace=True)
    new = f"{HOST} {keys['new'].to_line()}"
    assert res == TrustResult(True, new, 1, kh.with_name("known_hosts.old"), kh)
    assert kh.read_text() == other + new + "\n"
    assert kh.with_name("known_hosts.old").read_text() == old + other
    assert _verdict_now(kh, keys["new"]) == "match"


def test_replace_under_a_port_removes_the_bracketed_entry(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    plain = f"{HOST} {keys['old'].to_line()}\n"
    kh.write_text(f"[{HOST}]:2222 {keys['old'].to_line()}\n" + plain)
    res = record(_offer(kh, keys["new"], port=2222), confirmed_fingerprint=keys["new"].fingerprint, replace=True)
    assert res.removed == 1
    assert kh.read_text() == plain + f"[{HOST}]:2222 {keys['new'].to_line()}\n"  # port 22's entry kept


def test_replace_under_a_host_key_alias_removes_the_alias_verbatim(
    keys: dict[str, hk.OfferedKey], tmp_path: Path
) -> None:
    """HostKeyAlias is the known_hosts name verbatim (no [alias]:port), so its entry is removed without a port."""
    kh = tmp_path / "known_hosts"
    kh.write_text(f"gpu-a-key {keys['old'].to_line()}\n")
    offer = _offer(kh, keys["new"], port=2222, alias="gpu-a-key")
    assert offer.verdict.verdict == "changed"
    res = record(offer, confirmed_fingerprint=keys["new"].fingerprint, replace=True)
    assert res.removed == 1 and res.line_written == f"gpu-a-key {keys['new'].to_line()}"
    assert kh.read_text() == f"gpu-a-key {keys['new'].to_line()}\n"
    assert _verdict_now(kh, keys["new"], 2222, alias="gpu-a-key") == "match"


def test_replace_of_an_unknown_key_with_entries_consulted_removes_them(
    keys: dict[str, hk.OfferedKey], tmp_path: Path
) -> None:
    """Port 2222 unknown, but the port-less name holds another key (consulted, not counted): --replace removes
    the port's entries (none here) and records the new key; without --replace the key is simply recorded."""
    kh = tmp_path / "known_hosts"
    portless = f"{HOST} {keys['old'].to_line()}\n"
    kh.write_text(portless)
    offer = _offer(kh, keys["new"], port=2222)
    assert offer.verdict.verdict == "unknown" and offer.verdict.known
    res = record(offer, confirmed_fingerprint=keys["new"].fingerprint, replace=True)
    assert (res.recorded, res.removed, res.backup) == (True, 0, None)
    assert kh.read_text() == portless + f"[{HOST}]:2222 {keys['new'].to_line()}\n"
    kh.write_text(portless)
    res = record(offer, confirmed_fingerprint=keys["new"].fingerprint)  # no --replace needed: not a changed key
    assert (res.recorded, res.removed, res.backup) == (True, 0, None)
    assert kh.read_text() == portless + f"[{HOST}]:2222 {keys['new'].to_line()}\n"


def test_a_key_trusted_through_a_cert_authority_is_not_written(tmp_path: Path) -> None:
    """A host certificate signed by a CA that known_hosts trusts: nothing to record, the file stays as it is."""
    for name in ("ca", "hostkey"):
        args = ["-q", "-N", "", "-t", "ed25519", "-f", str(tmp_path / name)]
        subprocess.run([SSH_KEYGEN, *args], check=True, timeout=60)
    subprocess.run(
        [SSH_KEYGEN, "-q", "-s", str(tmp_path / "ca"), "-h", "-I", "gpu-a", "-n", HOST, tmp_path / "hostkey.pub"],
        check=True,
        timeout=60,
    )
    cert = hk.OfferedKey.from_line((tmp_path / "hostkey-cert.pub").read_text())
    kh = tmp_path / "known_hosts"
    text = f"@cert-authority *.example {(tmp_path / 'ca.pub').read_text().split()[0]} "
    text += (tmp_path / "ca.pub").read_text().split()[1] + "\n"
    kh.write_text(text)
    offer = _offer(kh, cert)
    assert offer.verdict.verdict == "cert-authority"
    for replace_ in (False, True):
        res = record(offer, confirmed_fingerprint=cert.fingerprint, replace=replace_)
        assert res == TrustResult(False, "", 0, None, kh)
    assert kh.read_text() == text


def test_offer_to_dict(keys: dict[str, hk.OfferedKey], tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("garbage line\n")
    offer = replace(
        _offer(kh, keys["new"], port=2222), warnings=(hk.KnownHostsWarning(str(kh), 1, "not a known_hosts line"),)
    )
    assert offer.to_dict() == {
        "host": "gpu-a",
        "hostname": HOST,
        "port": 2222,
        "fingerprint": keys["new"].fingerprint,
        "key_type": "ssh-ed25519",
        "verdict": "unknown",
        "known_hosts_file": str(kh),
        "warnings": [{"file": str(kh), "line": 1, "message": "not a known_hosts line"}],
    }
