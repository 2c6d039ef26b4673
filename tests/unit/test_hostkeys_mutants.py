"""hostkeys.py's mutation-testing survivors of issue 19 (session 5), each pinned where OpenSSH decides:
known_hosts line splitting (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT", hostfile.c ``hostkeys_foreach``), the
1023-character sub-pattern limit (match.c ``match_pattern_list``), the key's base64 (sshkey.c ``sshkey_read``),
a certificate's fields (``ssh-keygen -L``), and what ``load_known_hosts`` does with files it cannot read.
Cross-checked with this machine's ``ssh-keygen`` wherever OpenSSH defines the answer."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from orchestrator import hostkeys as hk
from orchestrator.errors import ConfigError

SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
pytestmark = pytest.mark.skipif(not os.path.exists(SSH_KEYGEN), reason="needs OpenSSH's ssh-keygen")


def keygen(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SSH_KEYGEN, *map(str, args)], capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ed25519 keys ``host`` (comment ``host``) and ``ca``, and ``host-cert.pub``: ``host.pub``
    signed by ``ca`` as a host certificate (key id ``myid``, serial 42, principals gpu-a and gpu-b, forever)."""
    d = tmp_path_factory.mktemp("mutkeys")
    for name in ("host", "ca"):
        keygen("-q", "-N", "", "-t", "ed25519", "-C", name, "-f", d / name)
    sign = ("-q", "-s", d / "ca", "-I", "myid", "-h", "-n", "gpu-a,gpu-b", "-z", "42", "-V", "always:forever")
    keygen(*sign, d / "host.pub")
    return d


def _type_b64(keys: Path) -> tuple[str, str]:
    key_type, b64 = (keys / "host.pub").read_text().split()[:2]
    return key_type, b64


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    return path


def _found_by_ssh_keygen(name: str, path: Path) -> bool:
    """``ssh-keygen -F NAME -f FILE``: exit 0 when a line's host field matches NAME (hostfile.c match_maybe_hashed),
    1 when none does."""
    rc = keygen("-F", name, "-f", path, check=False).returncode
    assert rc in (0, 1)
    return rc == 0


# ------------------------------------------------------------------------------------- key blob and text


def test_a_key_type_that_is_not_ascii_is_a_key_format_error_and_its_blob_is_fingerprinted_as_is() -> None:
    """A blob whose type string holds a non-ASCII byte is not a key OpenSSH knows: KeyFormatError naming the type
    (the byte shown as U+FFFD), never a UnicodeDecodeError; ``fingerprint`` then hashes the blob as given."""
    key_type = b"ssh-\xffed25519"
    blob = struct.pack(">I", len(key_type)) + key_type + struct.pack(">I", 32) + b"\x01" * 32
    with pytest.raises(hk.KeyFormatError) as err:
        hk.OfferedKey.from_blob(blob)
    assert str(err.value).startswith("ssh-\ufffded25519: ")
    # SHA256:<unpadded base64 of sha256(blob)>, the formula of ssh-keygen -lf, applied to the raw bytes
    assert hk.fingerprint(blob) == "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def test_a_blob_cut_inside_its_type_string_says_so() -> None:
    # the length prefix claims 16 bytes of type name, 3 follow
    with pytest.raises(hk.KeyFormatError) as err:
        hk.OfferedKey.from_blob(b"\x00\x00\x00\x10ssh")
    assert str(err.value) == "truncated key blob while reading the key type"


def test_a_key_text_without_its_base64_says_what_is_expected(keys: Path) -> None:
    with pytest.raises(hk.KeyFormatError) as err:
        hk.OfferedKey.from_line("ssh-ed25519")
    assert str(err.value) == "expected 'TYPE BASE64 [comment]'"
    key_type, b64 = _type_b64(keys)
    assert hk.OfferedKey.from_line(f"{key_type} {b64}").comment == ""  # no comment: empty, not invented
    assert hk.OfferedKey.from_line(f"{key_type} {b64} root@BOX").comment == "root@BOX"


def test_a_pub_line_starting_with_a_form_feed_is_not_a_key_as_for_ssh_keygen(keys: Path, tmp_path: Path) -> None:
    """sshkey.c sshkey_read takes the type up to the first space or tab: a ``.pub`` line that starts with a form
    feed names the type ``\fssh-ed25519``, which ``ssh-keygen -l`` refuses ("is not a public key file")."""
    key_type, b64 = _type_b64(keys)
    path = _write(tmp_path, "ff.pub", f"\f{key_type} {b64}\n")
    assert keygen("-l", "-f", path, check=False).returncode != 0
    with pytest.raises(hk.KeyFormatError) as err:
        hk.OfferedKey.from_line(path.read_text())
    assert str(err.value) == "unknown key type '\\x0cssh-ed25519'"


def test_a_stray_character_in_the_base64_makes_the_line_invalid_as_for_ssh_keygen(keys: Path, tmp_path: Path) -> None:
    """sshkey.c sshkey_read decodes the key with b64_pton, which refuses a character outside base64's alphabet:
    ``ssh-keygen -l`` reads the clean line and refuses the one with a ``*`` in its key; orch skips that line with a
    warning instead of decoding what is left."""
    key_type, b64 = _type_b64(keys)
    clean = _write(tmp_path, "clean", f"gpu-a {key_type} {b64}\n")
    stray = _write(tmp_path, "stray", f"gpu-a {key_type} {b64[:20]}*{b64[20:]}\n")
    assert keygen("-l", "-f", clean, check=False).returncode == 0
    assert keygen("-l", "-f", stray, check=False).returncode != 0
    kh = hk.load_known_hosts([stray])
    assert kh.entries == ()
    assert [str(w) for w in kh.warnings] == [f"{stray}:1: bad key: key is not valid base64"]
    assert len(hk.load_known_hosts([clean]).entries) == 1


@pytest.mark.parametrize(("where", "text"), [("after", "{b}\f"), ("inside", "{b1}\v{b2}"), ("after, CR", "{b}\r")])
def test_other_whitespace_in_the_base64_is_skipped_as_b64_pton_does(
    keys: Path, tmp_path: Path, where: str, text: str
) -> None:
    """b64_pton skips every isspace() character (space, \\t, \\n, \\v, \\f, \\r) inside the key's base64, and only
    spaces and tabs separate fields: ``ssh-keygen -l`` reads a key followed by a form feed or split by a vertical
    tab, so OpenSSH matches the host with it. (A bug found here: orch refused such a line as "not valid base64",
    judging the host unknown where ssh finds its key.)"""
    key_type, b64 = _type_b64(keys)
    key = text.format(b=b64, b1=b64[:20], b2=b64[20:])
    path = _write(tmp_path, "ws", f"gpu-a {key_type} {key}\n")
    plain_fp = keygen("-l", "-f", keys / "host.pub").stdout.split()[1]
    assert keygen("-l", "-f", path).stdout.split()[:2] == ["256", plain_fp]  # ssh-keygen reads the key
    kh = hk.load_known_hosts([path])
    assert kh.warnings == ()
    offered = hk.OfferedKey.from_line((keys / "host.pub").read_text())
    assert [e.key_blob for e in kh.entries] == [offered.blob]
    assert hk.judge(kh, "gpu-a", 22, offered, now=0).verdict == "match"


def test_a_certificates_fields_are_what_ssh_keygen_l_lists(keys: Path) -> None:
    """``ssh-keygen -L`` of the certificate: its Type, the plain key's fingerprint ("Public key: ED25519-CERT
    SHA256:..." is the plain key's, as for ``ssh-keygen -lf host.pub``), key id, serial and principals."""
    listing = keygen("-L", "-f", keys / "host-cert.pub").stdout
    plain_fp = keygen("-l", "-f", keys / "host.pub").stdout.split()[1]
    offered = hk.OfferedKey.from_line((keys / "host-cert.pub").read_text())
    plain = hk.OfferedKey.from_line((keys / "host.pub").read_text())
    cert = offered.cert
    assert cert is not None
    assert re.search(r"Type: (\S+) host certificate", listing)[1] == cert.cert_key_type  # type: ignore[index]
    assert cert.cert_key_type == "ssh-ed25519-cert-v01@openssh.com"
    assert (cert.plain_type, cert.plain_blob) == ("ssh-ed25519", plain.blob)
    assert f"Public key: ED25519-CERT {plain_fp}" in listing
    assert hk.fingerprint(cert.plain_blob) == plain_fp
    assert (cert.key_id, cert.serial, cert.principals, cert.is_host) == ("myid", 42, ("gpu-a", "gpu-b"), True)
    assert 'Key ID: "myid"' in listing and "Serial: 42" in listing


# ------------------------------------------------------------------------------------------- line splitting


def test_a_marker_alone_on_its_line_is_an_invalid_line_not_a_crash(keys: Path, tmp_path: Path) -> None:
    """sshd(8) SSH_KNOWN_HOSTS FILE FORMAT: a marker is followed by the host patterns and the key. A bare
    ``@revoked`` line is skipped with a warning when loading, and ``remove_host`` refuses the file, as
    ``ssh-keygen -R`` does (hostfile.c check_markers: MRK_ERROR)."""
    key_type, b64 = _type_b64(keys)
    path = _write(tmp_path, "kh", f"@revoked\n@cert-authority\ngpu-a {key_type} {b64}\n")
    kh = hk.load_known_hosts([path])
    assert [str(w) for w in kh.warnings] == [
        f"{path}:1: @revoked marker without host patterns and key",
        f"{path}:2: @cert-authority marker without host patterns and key",
    ]
    assert [e.line for e in kh.entries] == [3]
    assert keygen("-R", "gpu-a", "-f", path, check=False).returncode == 1
    with pytest.raises(ConfigError) as err:
        hk.remove_host(path, "gpu-a")
    assert str(err.value).startswith(f"{path}:1: invalid known_hosts line (and 1 more); not rewriting {path}")


@pytest.mark.parametrize("ending", ["#comment", "\r"])
def test_host_patterns_followed_by_nothing_but_a_comment_or_a_cr_have_no_key(tmp_path: Path, ending: str) -> None:
    """hostkeys_foreach: after the host field, a ``#`` or the end of the line is "truncated before key type";
    a CRLF file's ``\\r`` is not a key either."""
    path = _write(tmp_path, "kh", f"gpu-a {ending}\n")
    kh = hk.load_known_hosts([path])
    assert kh.entries == ()
    assert [str(w) for w in kh.warnings] == [f"{path}:1: no key after the host patterns"]


def test_a_form_feed_after_the_host_patterns_is_read_as_a_bad_key(tmp_path: Path) -> None:
    """Only spaces and tabs separate fields (hostkeys_foreach), and only a CR is taken off a line's end: a form feed
    after the host field starts the key field, which is no key (sshkey_read fails: an invalid line)."""
    path = _write(tmp_path, "kh", "gpu-a \f\n")
    kh = hk.load_known_hosts([path])
    assert kh.entries == ()
    assert [str(w) for w in kh.warnings] == [f"{path}:1: bad key: expected 'TYPE BASE64 [comment]'"]


def test_only_spaces_and_tabs_lead_a_line(keys: Path, tmp_path: Path) -> None:
    """hostkeys_foreach skips leading spaces and tabs only: a line starting with a vertical tab has the host field
    ``\\vgpu-a``, which ``ssh-keygen -F gpu-a`` does not find; a host field starting with an upper-case letter is
    compared case-insensitively (match.c match_hostname), so ``XEON-0`` is found for ``xeon-0``."""
    key_type, b64 = _type_b64(keys)
    vt = _write(tmp_path, "vt", f"\vgpu-a {key_type} {b64}\n")
    assert not _found_by_ssh_keygen("gpu-a", vt)
    assert hk.load_known_hosts([vt]).for_name("gpu-a") == []
    upper = _write(tmp_path, "upper", f" \tXEON-0 {key_type} {b64} root@BOX\n")
    assert _found_by_ssh_keygen("xeon-0", upper)
    found = hk.load_known_hosts([upper]).for_name("xeon-0")
    assert [(e.hosts, e.comment) for e in found] == [("XEON-0", "root@BOX")]


# --------------------------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("patterns", "name", "ssh_finds"),
    [
        ("a" * 1022, "a" * 1022, True),  # sub-pattern of 1022 characters: compared
        ("a" * 1023, "a" * 1023, False),  # 1023 fill match.c's sub[1024] buffer: "too long", no match
        ("*," + "a" * 1022, "other", True),
        ("*," + "a" * 1023, "other", False),  # a too-long sub-pattern fails the whole list, even after a match
        ("a" * 1023 + ",gpu-a", "gpu-a", False),
    ],
    ids=["1022", "1023", "star-then-1022", "star-then-1023", "1023-then-name"],
)
def test_a_sub_pattern_of_1023_characters_fails_the_whole_list_as_in_match_c(
    keys: Path, tmp_path: Path, patterns: str, name: str, ssh_finds: bool
) -> None:
    key_type, b64 = _type_b64(keys)
    path = _write(tmp_path, "kh", f"{patterns} {key_type} {b64}\n")
    assert _found_by_ssh_keygen(name, path) is ssh_finds
    assert bool(hk.load_known_hosts([path]).for_name(name)) is ssh_finds


# ------------------------------------------------------------------------------------------- file reading


def test_an_unreadable_file_is_a_warning_with_the_reason_and_the_next_file_is_read(keys: Path, tmp_path: Path) -> None:
    """A known_hosts path that is a directory cannot be read (EISDIR): one warning with the OS's reason, line 0,
    and the files after it still loaded."""
    key_type, b64 = _type_b64(keys)
    a_dir = tmp_path / "known_hosts.d"
    a_dir.mkdir()
    good = _write(tmp_path, "known_hosts", f"gpu-a {key_type} {b64}\n")
    kh = hk.load_known_hosts([a_dir, good])
    assert [str(w) for w in kh.warnings] == [f"{a_dir}: cannot read: Is a directory"]
    assert [(e.file, e.line) for e in kh.entries] == [(str(good), 1)]


def test_bytes_that_are_not_utf8_do_not_stop_the_file(keys: Path, tmp_path: Path) -> None:
    """OpenSSH reads known_hosts as bytes: a Latin-1 comment line (0xE9) is a comment, and the lines after it count."""
    key_type, b64 = _type_b64(keys)
    path = tmp_path / "known_hosts"
    path.write_bytes(b"# caf\xe9\n" + f"gpu-a {key_type} {b64}\n".encode())
    kh = hk.load_known_hosts([path])
    assert kh.warnings == ()
    assert [e.line for e in kh.entries] == [2]
