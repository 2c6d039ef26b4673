"""orchestrator.hostkeys at the edges its mutation run found unguarded (docs/testing.md): lookups under a port or a
HostKeyAlias through the KnownHosts helpers, known_hosts path expansion, ``append_entry``'s newline handling and
``remove_host``'s refusals and atomic rewrite — on real keys and files made by OpenSSH's ``ssh-keygen``, and
``ssh-keygen -R`` itself where it decides."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from orchestrator import hostkeys as hk
from orchestrator.errors import ConfigError

SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
pytestmark = pytest.mark.skipif(not os.path.exists(SSH_KEYGEN), reason="needs OpenSSH's ssh-keygen")
HOST = "gpu-a.example"


def keygen(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SSH_KEYGEN, *map(str, args)], capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture(scope="module")
def pubs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``TYPE BASE64`` of three fresh ed25519 keys: ``host``, ``other`` and ``ca``."""
    d = tmp_path_factory.mktemp("edgekeys")
    out = {}
    for name in ("host", "other", "ca"):
        keygen("-q", "-N", "", "-t", "ed25519", "-C", name, "-f", d / name)
        out[name] = " ".join((d / f"{name}.pub").read_text().split()[:2])
    return out


def _kh(tmp_path: Path, *lines: str) -> hk.KnownHosts:
    path = tmp_path / "known_hosts"
    path.write_text("".join(line + "\n" for line in lines))
    return hk.load_known_hosts([path])


def test_warning_text_with_and_without_a_line() -> None:
    assert str(hk.KnownHostsWarning("/h/.ssh/known_hosts", 3, "bad key")) == "/h/.ssh/known_hosts:3: bad key"
    assert str(hk.KnownHostsWarning("/h/.ssh/known_hosts", 0, "cannot read")) == "/h/.ssh/known_hosts: cannot read"


def test_helpers_look_up_the_alias_verbatim(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = _kh(tmp_path, f"gpu-key {pubs['host']}", f"{HOST} {pubs['other']}", f"@cert-authority gpu-key {pubs['ca']}")
    assert [e.line for e in kh.for_host(HOST, 2222, host_key_alias="gpu-key")] == [1, 3]
    assert [e.line for e in kh.for_host(HOST, 22)] == [2]
    assert kh.key_types_for(HOST, 22, host_key_alias="gpu-key") == {"ssh-ed25519"}
    assert kh.key_types_for("nowhere.example", 22) == set()
    assert kh.key_types_for("nowhere.example", 22, host_key_alias="gpu-key") == {"ssh-ed25519"}
    assert kh.has_cert_authority_for(HOST, 22, host_key_alias="gpu-key")
    assert not kh.has_cert_authority_for(HOST, 22)


def test_helpers_under_a_port(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = _kh(tmp_path, f"@cert-authority [{HOST}]:2222 {pubs['ca']}", f"@revoked [{HOST}]:2222 {pubs['other']}")
    assert kh.has_cert_authority_for(HOST, 2222)
    assert not kh.has_cert_authority_for(HOST, 22)
    assert kh.revoked_key_lines(HOST, 2222) == [pubs["other"]]
    assert kh.revoked_key_lines(HOST, 22) == []
    assert kh.revoked_key_lines() == [pubs["other"]]
    ca_blob = hk.OfferedKey.from_line(pubs["ca"]).blob
    assert hk.is_trusted_ca(kh, HOST, 2222, ca_blob)
    assert not hk.is_trusted_ca(kh, HOST, 22, ca_blob)


def test_is_trusted_ca_under_an_alias_has_no_port_less_retry(pubs: dict[str, str], tmp_path: Path) -> None:
    ca_blob = hk.OfferedKey.from_line(pubs["ca"]).blob
    by_name = _kh(tmp_path, f"@cert-authority {HOST} {pubs['ca']}")
    assert hk.is_trusted_ca(by_name, HOST, 2222, ca_blob)  # [host]:2222 has none: the port-less name's counts
    assert not hk.is_trusted_ca(by_name, HOST, 2222, ca_blob, host_key_alias="gpu-key")  # alias: only its name
    by_alias = _kh(tmp_path, f"@cert-authority gpu-key {pubs['ca']}")
    assert hk.is_trusted_ca(by_alias, HOST, 22, ca_blob, host_key_alias="gpu-key")
    assert not hk.is_trusted_ca(by_alias, HOST, 22, ca_blob)


def test_path_expansion_edges(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert hk.default_known_hosts_files(home, ["~", "~alice/kh"], []) == [home, Path("~alice/kh")]
    assert hk.default_known_hosts_files(
        home, ["${lower_case}/kh", "/x/${Mixed_9}"], [], environ={"lower_case": "/lc", "Mixed_9": "m"}
    ) == [Path("/lc/kh"), Path("/x/m")]
    with pytest.raises(ConfigError) as exc:
        hk.default_known_hosts_files(home, ["/kh/100%"], [])
    assert (str(exc.value), exc.value.hint) == (
        "known_hosts path '/kh/100%' ends with a lone '%'",
        "write %% for a literal %",
    )
    with pytest.raises(ConfigError) as exc:
        hk.default_known_hosts_files(home, ["/kh/%h"], [])
    assert (str(exc.value), exc.value.hint) == (
        "known_hosts path '/kh/%h': token %h is unknown or has no value here",
        "UserKnownHostsFile accepts %%, %C, %d, %h, %i, %k, %L, %l, %n, %p, %r, %u (ssh_config(5) TOKENS)",
    )


def test_primary_file_expands_tokens_and_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    got = hk.primary_known_hosts_file(home, ["%d/${SUB}/kh_%u", "/second"], tokens={"u": "alice"}, environ={"SUB": "s"})
    assert got == home / "s" / "kh_alice"
    assert hk.primary_known_hosts_file(home, ["none"]) is None
    assert hk.primary_known_hosts_file(home) == home / ".ssh" / "known_hosts"


def test_format_entry_under_an_alias_is_the_alias_lower_cased(pubs: dict[str, str]) -> None:
    line = hk.format_entry(HOST, 2222, pubs["host"], hashed=False, host_key_alias="GPU-Key")
    assert line == f"gpu-key {pubs['host']}"
    assert hk.format_entry(HOST.upper(), 2222, pubs["host"], hashed=False) == f"[{HOST}]:2222 {pubs['host']}"


def test_append_entry_after_a_final_newline_adds_no_blank_line(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = tmp_path / "ssh" / "known_hosts"
    hk.append_entry(kh, f"a.example {pubs['host']}\n")
    assert kh.read_text() == f"a.example {pubs['host']}\n"
    assert oct(kh.stat().st_mode & 0o777) == "0o600" and oct(kh.parent.stat().st_mode & 0o777) == "0o700"
    hk.append_entry(kh, f"b.example {pubs['host']} tail-XX\t\n")  # only the newline is stripped
    assert kh.read_text() == f"a.example {pubs['host']}\nb.example {pubs['host']} tail-XX\t\n"
    hk.append_entry(kh, f"c.example {pubs['host']} XX\n")
    assert kh.read_text().endswith(f"c.example {pubs['host']} XX\n")
    short = tmp_path / "short"
    short.write_text("#\n")
    hk.append_entry(short, "c")
    assert short.read_text() == "#\nc\n"


@pytest.mark.parametrize("bad", ["other.example ssh-ed25519", "other.example ssh-ed25519 #not-a-key"])
def test_remove_host_refuses_a_line_without_a_key_like_ssh_keygen(
    pubs: dict[str, str], tmp_path: Path, bad: str
) -> None:
    original = f"{HOST} {pubs['host']}\n{bad}\n"
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.write_text(original)
    theirs.write_text(original)
    assert keygen("-R", HOST, "-f", theirs, check=False).returncode == 1  # ssh-keygen refuses it too
    with pytest.raises(ConfigError) as exc:
        hk.remove_host(ours, HOST)
    assert (str(exc.value), exc.value.hint) == (
        f"{ours}:2: invalid known_hosts line; not rewriting {ours}",
        "fix or delete the line(s) first; ssh-keygen -R refuses this file too",
    )
    assert ours.read_text() == theirs.read_text() == original


def test_remove_host_names_how_many_more_lines_are_invalid(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    kh.write_text(f"{HOST} {pubs['host']}\na ssh-foo AAAA\nb ssh-foo AAAA\nc ssh-foo AAAA\n")
    with pytest.raises(ConfigError, match=rf"^{kh}:2: invalid known_hosts line \(and 2 more\); not rewriting {kh}$"):
        hk.remove_host(kh, HOST)


def test_remove_host_port_0_is_the_plain_name_as_for_an_alias(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = tmp_path / "kh"
    kh.write_text(f"gpu-key {pubs['host']}\n[gpu-key]:0 {pubs['other']}\n")
    assert hk.remove_host(kh, "gpu-key", 0).removed_count == 1
    assert kh.read_text() == f"[gpu-key]:0 {pubs['other']}\n"


def test_remove_host_writes_its_temporary_file_next_to_the_target(
    pubs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same directory, so the final rename is atomic on one filesystem; TMPDIR is never used."""
    kh = tmp_path / "kh"
    kh.write_text(f"{HOST} {pubs['host']}\nother.example {pubs['other']}\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmpdir"))
    res = hk.remove_host(kh, HOST)
    assert res == hk.RemoveResult(1, tmp_path / "kh.old")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kh", "kh.old"]


def test_remove_host_copies_the_backup_where_hard_links_fail(
    pubs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kh = tmp_path / "kh"
    original = f"{HOST} {pubs['host']}\nother.example {pubs['other']}\n"
    kh.write_text(original)

    def no_links(src: object, dst: object) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    assert hk.remove_host(kh, HOST).removed_count == 1
    assert (tmp_path / "kh.old").read_text() == original
    assert kh.read_text() == f"other.example {pubs['other']}\n"


def test_remove_host_leaves_no_temporary_file_when_the_rename_fails(
    pubs: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kh = tmp_path / "kh"
    original = f"{HOST} {pubs['host']}\n"
    kh.write_text(original)

    def no_rename(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="No space left on device"):
        hk.remove_host(kh, HOST)
    assert kh.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kh", "kh.old"]


def test_port_0_is_no_port_like_22() -> None:
    """misc.c put_host_port: 0 and 22 give the bare name; no port-less retry from either."""
    assert hk.lookup_name("GPU-A.example", 0) == hk.lookup_name("GPU-A.example", 22) == "gpu-a.example"
    assert hk.lookup_name("GPU-A.example", 1) == "[gpu-a.example]:1"


def test_check_ip_refuses_a_name_match_when_the_address_holds_another_key(pubs: dict[str, str], tmp_path: Path) -> None:
    """CheckHostIP (sshconnect.c check_host_key): the unmarked entries for the address must not hold another key."""
    path = tmp_path / "known_hosts"
    path.write_text(
        f"{HOST} {pubs['host']}\n127.0.0.5 {pubs['other']}\n[127.0.0.6]:2222 {pubs['other']}\n"
        f"127.0.0.7 {pubs['host']}\n@revoked 127.0.0.8 {pubs['other']}\n"
    )
    kh = hk.load_known_hosts([path])
    offered = hk.OfferedKey.from_line(pubs["host"])
    other_fp = hk.OfferedKey.from_line(pubs["other"]).fingerprint
    v = hk.judge(kh, HOST, 22, offered, now=0)
    assert v.verdict == "match"
    got = hk.check_ip(kh, v, "127.0.0.5", 22, offered)
    assert got == hk.HostKeyVerdict(
        "changed",
        v.name,
        v.offered_fingerprint,
        v.offered_type,
        f"{v.detail}, but CheckHostIP: the key recorded for the address 127.0.0.5 at {path}:2 "
        f"(ssh-ed25519 {other_fp}) differs",
        [*v.known, {"file": str(path), "line": 2, "key_type": "ssh-ed25519", "fingerprint": other_fp, "marker": None}],
        f"confirm which key is right with the host's administrator; if the address moved to this host: "
        f'ssh-keygen -f "{path}" -R "127.0.0.5"',
    )
    assert hk.check_ip(kh, v, "127.0.0.6", 2222, offered).verdict == "changed"  # [addr]:port off port 22
    assert hk.check_ip(kh, v, "127.0.0.6", 22, offered) is v  # no entry for the address: fine
    assert hk.check_ip(kh, v, "127.0.0.7", 22, offered) is v  # the same key
    assert hk.check_ip(kh, v, "127.0.0.8", 22, offered) is v  # a marked line is not a recorded key
    unknown = hk.judge(kh, "new.example", 22, offered, now=0)
    assert hk.check_ip(kh, unknown, "127.0.0.5", 22, offered) is unknown  # only a match is re-checked


# -- the second mutation run (docs/testing.md): certificates' validity text, dropping a certificate, revocation of
# -- other keys, entries consulted twice, and HostKeyAlias without the port-less retry in judge itself


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with an ed25519 host key ``host`` (comment ``host``) and a CA ``ca`` that signs copies of it."""
    d = tmp_path_factory.mktemp("signed")
    for name in ("host", "ca"):
        keygen("-q", "-N", "", "-t", "ed25519", "-C", name, "-f", d / name)
    return d


def _sign(signed: Path, name: str, validity: str, principals: str = HOST) -> tuple[hk.OfferedKey, str]:
    """Sign a copy of ``host.pub`` as a host certificate valid ``validity`` (ssh-keygen -V, times in UTC); returns
    the certificate and ``ssh-keygen -L``'s Valid: line (printed in the local zone: TZ=UTC here)."""
    d = signed / name
    d.mkdir()
    shutil.copy(signed / "host.pub", d / "key.pub")
    env = {**os.environ, "TZ": "UTC"}
    subprocess.run(
        [SSH_KEYGEN, "-q", "-s", signed / "ca", "-I", name, "-h", *(["-n", principals] if principals else []),
         "-V", validity, d / "key.pub"],
        check=True, env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    listing = subprocess.run(
        [SSH_KEYGEN, "-L", "-f", d / "key-cert.pub"], check=True, env=env, capture_output=True, text=True, timeout=60
    ).stdout
    valid = next(ln.strip() for ln in listing.splitlines() if ln.strip().startswith("Valid:"))
    return hk.OfferedKey.from_line((d / "key-cert.pub").read_text()), valid


@pytest.mark.parametrize(
    ("validity", "keygen_says", "orch_says"),
    [
        ("always:forever", "Valid: forever", "forever"),
        ("20300101:20300102", "Valid: from 2030-01-01T00:00:00 to 2030-01-02T00:00:00",
         "from 2030-01-01T00:00:00Z to 2030-01-02T00:00:00Z"),
        ("20300101:forever", "Valid: after 2030-01-01T00:00:00", "from 2030-01-01T00:00:00Z to forever"),
        ("always:20300102", "Valid: before 2030-01-02T00:00:00", "from 1970-01-01T00:00:00Z to 2030-01-02T00:00:00Z"),
        # a bound past year 9999 (ssh-keygen takes seconds as 0x...): was ValueError: year 4461763 is out of range
        ("20300101:0x7fffffffffff", "Valid: from 2030-01-01T00:00:00 to 4461763-06-20T05:22:07",
         "from 2030-01-01T00:00:00Z to 140737488355327 (unix seconds, past the year 9999)"),
    ],
)  # fmt: skip
def test_certificate_validity_text_is_utc_whatever_the_local_zone(
    signed: Path, validity: str, keygen_says: str, orch_says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, valid = _sign(signed, "v-" + validity.replace(":", "-"), validity)
    assert valid == keygen_says  # the same bounds as OpenSSH reads them (it prints local time: TZ=UTC)
    assert cert.cert is not None
    monkeypatch.setenv(
        "TZ", "JST-9"
    )  # POSIX TZ, UTC+9 (no tzdata needed): a local-time rendering would shift every stamp
    time.tzset()
    try:
        assert cert.cert.validity_text() == orch_says
    finally:
        monkeypatch.undo()
        time.tzset()


def test_plain_of_a_certificate_is_the_key_of_its_pub_file(signed: Path) -> None:
    """sshkey.c sshkey_drop_cert: the certificate without its certificate part is the plain key, comment kept."""
    cert, _ = _sign(signed, "plain", "always:forever")
    plain = hk.OfferedKey.from_line((signed / "host.pub").read_text())
    assert cert.is_cert and cert.key_type == "ssh-ed25519-cert-v01@openssh.com"
    assert cert.plain() == plain
    assert (plain.key_type, plain.plain_type, plain.cert, plain.comment) == ("ssh-ed25519", "ssh-ed25519", None, "host")
    assert plain.plain() == plain


def test_a_revoked_line_of_another_key_does_not_revoke_this_one(pubs: dict[str, str], tmp_path: Path) -> None:
    """hostfile.c check_key_not_revoked compares the key (and a certificate's CA) only: ``@revoked *`` of a
    stolen key elsewhere leaves this host's recorded key a match (ssh-keygen -F lists both lines)."""
    kh = _kh(tmp_path, f"@revoked * {pubs['other']}", f"{HOST} {pubs['host']}")
    v = hk.judge(kh, HOST, 22, hk.OfferedKey.from_line(pubs["host"]), now=0)
    assert v.verdict == "match", v.detail
    assert [(k["line"], k["marker"]) for k in v.known] == [(1, "@revoked"), (2, None)]


def test_an_entry_for_the_name_and_the_port_less_name_is_listed_once(pubs: dict[str, str], tmp_path: Path) -> None:
    """A ``@cert-authority [host]:2222,host`` line is consulted under both names (OpenSSH's port-less retry);
    the verdict lists it once."""
    kh = _kh(tmp_path, f"@cert-authority [{HOST}]:2222,{HOST} {pubs['ca']}")
    v = hk.judge(kh, HOST, 2222, hk.OfferedKey.from_line(pubs["host"]), now=0)
    assert v.verdict == "unknown"
    assert [(k["line"], k["marker"]) for k in v.known] == [(1, "@cert-authority")]


def test_judge_under_an_alias_makes_no_port_less_retry(pubs: dict[str, str], tmp_path: Path) -> None:
    """sshconnect.c makes the "checking without port identifier" retry only when HostKeyAlias is unset: the
    host's key recorded under its plain name does not count for an alias on port 2222."""
    kh = _kh(tmp_path, f"{HOST} {pubs['host']}")
    key = hk.OfferedKey.from_line(pubs["host"])
    assert hk.judge(kh, HOST, 2222, key, now=0).verdict == "match"  # without the alias: the port-less retry
    v = hk.judge(kh, HOST, 2222, key, now=0, host_key_alias="gpu-key")
    assert (v.verdict, v.name, v.known) == ("unknown", "gpu-key", [])


def _pub(signed: Path, name: str) -> str:
    return " ".join((signed / f"{name}.pub").read_text().split()[:2])


def test_a_revoked_key_says_what_to_do_exactly(pubs: dict[str, str], tmp_path: Path) -> None:
    kh = _kh(tmp_path, f"@revoked {HOST} {pubs['host']}")
    v = hk.judge(kh, HOST, 22, hk.OfferedKey.from_line(pubs["host"]), now=0)
    assert v.verdict == "revoked"
    assert v.hint == (
        "do not connect: the key is revoked, which usually means its private key was stolen; "
        "ask the host's administrator for new host keys"
    )


def test_a_certificate_revoked_under_the_port_less_name(signed: Path, tmp_path: Path) -> None:
    """No @cert-authority for [host]:2222: OpenSSH retries the port-less name, where the CA is @revoked."""
    cert, _ = _sign(signed, "pl-revoked", "always:forever")
    kh = _kh(tmp_path, f"[{HOST}]:2222 {_pub(signed, 'host')}", f"@revoked {HOST} {_pub(signed, 'ca')}")
    v = hk.judge(kh, HOST, 2222, cert, now=0)
    assert v.verdict == "revoked"
    assert v.detail == (
        f"[{HOST}]:2222 offered the certificate's signing CA {hk.OfferedKey.from_line(_pub(signed, 'ca')).fingerprint}"
        f", which is marked @revoked at {tmp_path / 'known_hosts'}:2 (port-less name {HOST})"
    )
    assert [k["line"] for k in v.known] == [1, 2]


def test_a_certificate_judged_by_its_plain_key_lists_both_names_entries(
    signed: Path, pubs: dict[str, str], tmp_path: Path
) -> None:
    """No @cert-authority under either name (the port-less retry consulted); the plain key is recorded under
    [host]:2222: a match, and the entries consulted are those of both lookups."""
    cert, _ = _sign(signed, "pl-plain", "always:forever")
    kh = _kh(tmp_path, f"[{HOST}]:2222 {_pub(signed, 'host')}", f"{HOST} {pubs['other']}")
    v = hk.judge(kh, HOST, 2222, cert, now=0)
    assert v.verdict == "match", v.detail
    assert [k["line"] for k in v.known] == [1, 2]


@pytest.mark.parametrize(
    ("principals", "listed"), [(f"{HOST},10.0.0.5", f"{HOST}, 10.0.0.5"), ("", "(none)")], ids=["two", "none"]
)
def test_an_expired_certificate_names_its_principals(
    signed: Path, tmp_path: Path, principals: str, listed: str
) -> None:
    cert, _ = _sign(signed, f"expired-{len(principals)}", "20200101:20200102", principals)
    kh = _kh(tmp_path, f"@cert-authority * {_pub(signed, 'ca')}")
    v = hk.judge(kh, HOST, 22, cert, now=1_700_000_000)
    assert v.verdict == "cert-invalid"
    assert (
        f"but it is invalid: expired (key id 'expired-{len(principals)}', type host, principals {listed}, valid "
        "from 2020-01-01T00:00:00Z to 2020-01-02T00:00:00Z, host name checked 'gpu-a.example'); its plain key is "
        f"not on file (no known_hosts entry for {HOST})"
    ) in v.detail, v.detail


def test_port_1_is_a_port_with_the_port_less_retry(pubs: dict[str, str], tmp_path: Path) -> None:
    """Only 22 (and 0, no port) mean "no [host]:port form"; port 1 is looked up bracketed, then port-less."""
    assert hk.lookup_name(HOST, 1) == f"[{HOST}]:1"
    kh = _kh(tmp_path, f"{HOST} {pubs['host']}")
    v = hk.judge(kh, HOST, 1, hk.OfferedKey.from_line(pubs["host"]), now=0)
    assert (v.verdict, v.name) == ("match", f"[{HOST}]:1"), v.detail
    assert "(OpenSSH's 'checking without port identifier' retry)" in v.detail


def test_a_plain_key_revoked_under_the_port_less_name(pubs: dict[str, str], tmp_path: Path) -> None:
    """Nothing unmarked for [host]:2222 (only a CA line): the port-less retry finds the key @revoked."""
    kh = _kh(tmp_path, f"@cert-authority [{HOST}]:2222 {pubs['ca']}", f"@revoked {HOST} {pubs['host']}")
    key = hk.OfferedKey.from_line(pubs["host"])
    v = hk.judge(kh, HOST, 2222, key, now=0)
    assert v.verdict == "revoked"
    assert v.detail == (
        f"[{HOST}]:2222 offered the ssh-ed25519 key {key.fingerprint}, which is marked @revoked at "
        f"{tmp_path / 'known_hosts'}:2 (port-less name {HOST})"
    )
    assert [(k["line"], k["marker"]) for k in v.known] == [(1, "@cert-authority"), (2, "@revoked")]


def test_a_key_known_only_with_other_types_lists_them_and_says_what_to_do(pubs: dict[str, str], tmp_path: Path) -> None:
    """OpenSSH treats a host known only with other key types as CHANGED; the detail lists every recorded type
    and the hint says how to replace the entries once the fingerprint is confirmed."""
    for t in ("ecdsa", "rsa"):
        keygen("-q", "-N", "", "-t", t, "-C", t, "-f", tmp_path / t)
    ecdsa, rsa = (" ".join((tmp_path / f"{t}.pub").read_text().split()[:2]) for t in ("ecdsa", "rsa"))
    kh = _kh(tmp_path, f"{HOST} {ecdsa}", f"{HOST} {rsa}")
    key = hk.OfferedKey.from_line(pubs["host"])
    v = hk.judge(kh, HOST, 22, key, now=0, inventory_name="gpu-a")
    f = tmp_path / "known_hosts"
    assert v.verdict == "changed"
    assert v.detail == (
        f"{HOST} offered a ssh-ed25519 key {key.fingerprint}, but is known only with other key types "
        f"(ecdsa-sha2-nistp256 at {f}:1, ssh-rsa at {f}:2); OpenSSH treats this as a changed host key "
        "(REMOTE HOST IDENTIFICATION HAS CHANGED)"
    )
    assert v.hint == (  # the one file is the user's: --replace removes the old entries (hostkeys.changed_key_hint)
        f"do not trust the new key until its fingerprint {key.fingerprint} is confirmed with the host's "
        "administrator out of band (a changed key can mean a man-in-the-middle attack); if it is the host's new "
        "key: orch hosts trust gpu-a --replace (removes the old entries as ssh-keygen -R does, keeping "
        "known_hosts.old)"
    )


def test_hashed_host_fields_are_read_as_hostfile_c_extract_salt_does(pubs: dict[str, str], tmp_path: Path) -> None:
    """extract_salt takes the salt up to the FIRST '|' after ``|1|`` (memchr), requires that '|', and decodes it
    strictly (b64_pton) to 20 bytes; a field it cannot read is a malformed line, one it can is kept."""
    good = hk.hash_host(HOST, b"s" * 20)  # |1|salt|hash
    salt_b64, hash_b64 = good[3:].split("|")
    malformed = "malformed hashed host name (expected |1|base64(20-byte salt)|base64(hash))"
    lines = [
        f"{good} {pubs['host']}",  # 1: fine
        f"{good}|trailer {pubs['other']}",  # 2: salt read up to the first '|': kept (matches no name)
        f"|1|{salt_b64} {pubs['other']}",  # 3: no '|' after the salt
        f"|1|{salt_b64[:5]}*{salt_b64[5:]}|{hash_b64} {pubs['other']}",  # 4: not base64 ('*' is not skipped)
    ]
    kh = _kh(tmp_path, *lines)
    assert [(w.line, w.message) for w in kh.warnings] == [(3, malformed), (4, malformed)]
    assert [e.line for e in kh.entries] == [1, 2]
    assert [e.line for e in kh.for_name(HOST)] == [1]
