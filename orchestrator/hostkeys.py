"""known_hosts parsing and host-key verdicts with OpenSSH semantics — pure (no connection, no asyncssh I/O).

orch reads the same files OpenSSH reads and judges the key a server offers the way ``ssh`` would, but
returns a verdict instead of prompting. Nothing here connects; the only I/O is reading the known_hosts
files handed in and, for ``orch hosts trust``, appending to / rewriting one of them.

Sources (OpenSSH 9.2p1 as shipped by Debian 12; every rule below was also checked against that ``ssh`` and
``sshd`` on loopback, see ``tests/unit/test_hostkeys.py``):

* sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT": ``[marker] patterns keytype base64 [comment]``; markers
  ``@cert-authority`` / ``@revoked`` (one at most); comma-separated patterns with ``*``/``?`` wildcards,
  ``!negation`` and ``[host]:port``; hashed names ``|1|base64(salt)|base64(HMAC-SHA1(salt, name))``.
* hostfile.c ``hostkeys_foreach``, ``check_markers``, ``match_maybe_hashed``, ``host_hash``,
  ``check_hostkeys_by_key_or_type``, ``check_key_not_revoked``, ``write_host_entry``; ssh-keygen.c
  ``do_known_hosts`` / ``known_hosts_find_delete`` (``ssh-keygen -R``); match.c ``match_hostname`` /
  ``match_pattern_list`` / ``match_pattern``.
* sshconnect.c ``get_hostfile_hostname_ipaddr`` (the lookup name), ``check_host_key`` (the decision,
  including the port-less retry and the certificate-to-plain-key downgrade) and ``check_host_cert``;
  sshkey.c ``sshkey_cert_check_authority``.
* Key and certificate blobs (PROTOCOL.certkeys) are decoded by asyncssh's parsers, which also verify a
  certificate's signature; the SHA256 fingerprint is what ``ssh-keygen -lf`` prints.

The lookup name (sshconnect.c ``get_hostfile_hostname_ipaddr`` / misc.c ``put_host_port``): the
``HostKeyAlias`` verbatim when one is set (no port is ever added to it); otherwise the lower-cased
``HostName`` (ssh.c lower-cases it), as ``host`` for port 22 and as ``[host]:port`` for any other port.

The decision (sshconnect.c ``check_host_key``), for the entries whose patterns match the lookup name:

1. A certificate is first looked up among ``@cert-authority`` entries by its signing key. A CA entry found:
   the certificate must be a host certificate, valid now (``valid_after <= now < valid_before``), list the
   host name (HostKeyAlias or HostName, *without* the port) among its principals — an empty principal
   list is accepted for any host, as ``check_host_cert`` calls ``sshkey_cert_check_authority`` with
   ``require_principal = 0``. (A certificate with critical options or a bad signature does not decode:
   asyncssh refuses it.) Otherwise, or when no CA entry covers the name, OpenSSH drops the certificate and
   judges its plain key (step 2).
2. A plain key is compared with the unmarked entries: equal to one of them -> ``match``; none equal but
   some exist -> ``changed`` — **whatever their key type**: OpenSSH 9.2 answers "REMOTE HOST
   IDENTIFICATION HAS CHANGED" with "Offending ECDSA key in FILE:LINE" when the server offers an Ed25519
   key and only an ECDSA key is on file (``check_hostkeys_by_key_or_type`` sets ``HOST_CHANGED`` for any
   non-matching key). Its "but keys of different type are already known for this host" prompt is not
   reached for an ordinary host key. orch therefore says ``changed`` too and names the nuance in
   ``detail``. No entry at all -> ``unknown``.
3. Revocation: an ``@revoked`` entry for the name whose key equals the offered key, its plain key, or (for
   a certificate) its signing CA makes the verdict ``revoked``; a revoked key is never downgraded.
4. Port-less retry: when the ``[host]:port`` name has no entry of the kind wanted (``HOST_NEW``) and no
   HostKeyAlias is set, OpenSSH retries quietly with the port-less name ("checking without port
   identifier") and accepts only an outright match there; a *different* key under the port-less name
   does not make the host "changed" — it stays unknown ("No ED25519 host key is known for
   [127.0.0.1]:2201"). A ``[host]:port`` entry, even of another key type, suppresses the retry.
   Deliberate difference: where OpenSSH, in that quiet retry, prints its revocation warning and carries on
   as for a new host, orch reports ``revoked``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import hashlib
import hmac
import os
import re
import secrets
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypedDict

from asyncssh import KeyImportError
from asyncssh.packet import PacketDecodeError, SSHPacket
from asyncssh.public_key import SSHOpenSSHCertificate, decode_ssh_certificate, decode_ssh_public_key

from orchestrator.errors import ConfigError

__all__ = [
    "CA_MARKER",
    "REVOKE_MARKER",
    "Certificate",
    "HostKeyVerdict",
    "KeyFormatError",
    "KnownEntry",
    "KnownHostEntry",
    "KnownHosts",
    "KnownHostsWarning",
    "OfferedKey",
    "RemoveResult",
    "Verdict",
    "append_entry",
    "default_known_hosts_files",
    "fingerprint",
    "format_entry",
    "hash_host",
    "is_trusted_ca",
    "judge",
    "load_known_hosts",
    "lookup_name",
    "primary_known_hosts_file",
    "remove_host",
]

CA_MARKER: Final = "@cert-authority"
REVOKE_MARKER: Final = "@revoked"
Marker = Literal["@cert-authority", "@revoked"]
Verdict = Literal["match", "unknown", "changed", "revoked", "cert-authority", "cert-invalid"]

DEFAULT_PORT = 22
HASH_MAGIC = "|1|"
SALT_LEN = 20  # hostfile.c extract_salt: the salt must decode to ssh_hmac_bytes(SSH_DIGEST_SHA1) bytes
CERT_TYPE_USER = 1
CERT_TYPE_HOST = 2
FOREVER = 0xFFFF_FFFF_FFFF_FFFF  # PROTOCOL.certkeys: valid_before of a certificate that never expires
_WS = re.compile(r"[ \t]+")
# isspace() in the C locale: b64_pton (called by sshkey.c sshkey_read) skips these inside a key's base64
_B64_SPACE = re.compile(r"[ \t\n\v\f\r]")
_MAX_SUBPATTERN = 1023  # match.c match_pattern_list: a longer sub-pattern makes the whole list not match

# Key and certificate type names OpenSSH 9.2 knows (sshkey.c keyimpls; PROTOCOL.certkeys, PROTOCOL.u2f).
_PLAIN_TYPES = frozenset(
    {
        "ssh-ed25519",
        "sk-ssh-ed25519@openssh.com",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "ssh-rsa",
        "ssh-dss",
    }
)
_CERT_TYPES = frozenset(t.replace("@openssh.com", "") + "-cert-v01@openssh.com" for t in _PLAIN_TYPES)
# sshkey.c keyimpls: signature-only names and case-insensitive short names sshkey_type_from_name accepts.
_SIG_ONLY_NAMES = frozenset(
    {
        "rsa-sha2-256",
        "rsa-sha2-512",
        "rsa-sha2-256-cert-v01@openssh.com",
        "rsa-sha2-512-cert-v01@openssh.com",
    }
)
_SHORT_NAMES = frozenset({"ed25519", "ed25519-sk", "ecdsa", "ecdsa-sk", "rsa", "dsa"})


class KeyFormatError(ValueError):
    """An OpenSSH public key line or blob that cannot be decoded; the message says why."""


# --------------------------------------------------------------------------------------------- wire format
# Key and certificate blobs are read by asyncssh's own parsers (which also verify a certificate's signature);
# this module keeps only OpenSSH's matching and decision rules.


def fingerprint(blob: bytes) -> str:
    """SHA256 fingerprint as ``ssh-keygen -lf`` prints it: ``SHA256:`` + unpadded base64 of sha256(blob).

    For a certificate this is the fingerprint of its plain key, as OpenSSH computes it
    (sshkey.c ``sshkey_fingerprint_raw`` serialises certificates with ``force_plain``).
    """
    try:
        blob = _parse_blob(blob).plain_blob
    except KeyFormatError:
        pass
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class Certificate:
    """What OpenSSH's rules need of a certificate (PROTOCOL.certkeys), as asyncssh decoded it.

    ``valid_after`` / ``valid_before`` are seconds since the epoch (``valid_before == FOREVER`` means no
    expiry); ``cert_type`` is 1 (user) or 2 (host); ``extensions`` the names of the extensions asyncssh
    knows, in the certificate's order; ``signature_key`` the signing CA's public key blob. asyncssh refuses
    a certificate with a bad signature or with critical options it does not know (any on a host
    certificate: OpenSSH defines none for them), so such a certificate never gets here.
    """

    cert_key_type: str
    plain_type: str
    plain_blob: bytes
    serial: int
    cert_type: int
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    extensions: tuple[str, ...]
    signature_key: bytes

    @property
    def is_host(self) -> bool:
        return self.cert_type == CERT_TYPE_HOST

    @property
    def ca_fingerprint(self) -> str:
        return fingerprint(self.signature_key)

    @property
    def ca_type(self) -> str:
        return _parse_blob(self.signature_key).key_type

    def problem(self, name: str, now: float) -> str | None:
        """Why OpenSSH would refuse this certificate for host ``name`` at ``now``, or ``None``.

        sshkey.c ``sshkey_cert_check_authority(key, want_host=1, require_principal=0, wildcard=0, now, name)``.
        The principal comparison is exact (``strcmp``), against the host name without any port.
        """
        t = int(now)
        if not self.is_host:
            return "not a host certificate"
        if t < self.valid_after:
            return "not yet valid"
        if t >= self.valid_before:
            return "expired"
        if self.principals and name not in self.principals:
            return "name is not a listed principal"
        return None

    def validity_text(self) -> str:
        def stamp(t: int) -> str:
            try:
                return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            except (OverflowError, OSError, ValueError):  # a bound is a uint64: ssh-keygen -V takes 0x... seconds
                return f"{t} (unix seconds, past the year 9999)"

        if self.valid_after == 0 and self.valid_before == FOREVER:
            return "forever"
        before = "forever" if self.valid_before == FOREVER else stamp(self.valid_before)
        return f"from {stamp(self.valid_after)} to {before}"


@dataclass(frozen=True)
class _Parsed:
    key_type: str
    blob: bytes
    plain_type: str
    plain_blob: bytes
    cert: Certificate | None


def _blob_type(blob: bytes) -> str:
    try:
        return bytes(SSHPacket(blob).get_string()).decode("ascii", "replace")
    except PacketDecodeError:
        raise KeyFormatError("truncated key blob while reading the key type") from None


def _parse_blob(blob: bytes) -> _Parsed:
    """A public key or certificate blob, decoded by asyncssh. Raises KeyFormatError with asyncssh's reason."""
    key_type = _blob_type(blob)
    try:
        if key_type.endswith("-cert-v01@openssh.com"):
            c = decode_ssh_certificate(blob)
        else:
            k = decode_ssh_public_key(blob)
            return _Parsed(key_type, blob, key_type, bytes(k.public_data), None)
    except (KeyImportError, PacketDecodeError, ValueError) as exc:
        raise KeyFormatError(f"{key_type}: {exc}") from None
    if not isinstance(c, SSHOpenSSHCertificate):
        raise KeyFormatError(f"{key_type}: not an OpenSSH certificate")
    plain_type = c.key.algorithm.decode("ascii", "replace")
    plain_blob = bytes(c.key.public_data)
    # asyncssh keeps these as attributes without public accessors (2.14 ... 2.24); its validate() uses them.
    cert = Certificate(
        cert_key_type=key_type,
        plain_type=plain_type,
        plain_blob=plain_blob,
        serial=int(c._serial),
        cert_type=int(c._cert_type),
        key_id=str(c._key_id),
        principals=tuple(c.principals),
        valid_after=int(c._valid_after),
        valid_before=int(c._valid_before),
        extensions=tuple(c.options),
        signature_key=bytes(c.signing_key.public_data),
    )
    return _Parsed(key_type, blob, plain_type, plain_blob, cert)


def _split_key_text(text: str) -> tuple[str, str, str]:
    """``TYPE BASE64 [comment]`` -> (type, base64, comment); separators are spaces or tabs."""
    parts = re.split(r"[ \t]+", text.strip(" \t\r\n"), maxsplit=2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise KeyFormatError("expected 'TYPE BASE64 [comment]'")
    return parts[0], parts[1], parts[2] if len(parts) > 2 else ""


def _decode_key(key_type: str, b64: str) -> _Parsed:
    if key_type not in _PLAIN_TYPES and key_type not in _CERT_TYPES:
        raise KeyFormatError(f"unknown key type {key_type!r}")
    try:
        blob = base64.b64decode(_B64_SPACE.sub("", b64), validate=True)
    except ValueError:
        raise KeyFormatError("key is not valid base64") from None
    parsed = _parse_blob(blob)
    if parsed.key_type != key_type:
        raise KeyFormatError(f"line says {key_type} but the key blob is {parsed.key_type}")
    return parsed


@dataclass(frozen=True)
class OfferedKey:
    """The host key a server offers (plain key or certificate).

    ``key_type`` is the wire name (``ssh-ed25519``, ``ssh-ed25519-cert-v01@openssh.com`` ...); ``plain_type``
    / ``plain_blob`` are the key without its certificate; ``fingerprint`` is the plain key's SHA256
    fingerprint, as ``ssh`` and ``ssh-keygen -lf`` print it for both.
    """

    key_type: str
    blob: bytes
    plain_type: str
    plain_blob: bytes
    cert: Certificate | None = None
    comment: str = ""

    @classmethod
    def from_blob(cls, blob: bytes) -> OfferedKey:
        """Decode a public key blob (the key type is its first SSH string). Raises KeyFormatError."""
        p = _parse_blob(bytes(blob))
        return cls(p.key_type, p.blob, p.plain_type, p.plain_blob, p.cert)

    @classmethod
    def from_line(cls, line: str) -> OfferedKey:
        """Decode ``TYPE BASE64 [comment]`` (a ``.pub`` file's line). Raises KeyFormatError."""
        key_type, b64, comment = _split_key_text(line)
        p = _decode_key(key_type, b64)
        return cls(p.key_type, p.blob, p.plain_type, p.plain_blob, p.cert, comment)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.plain_blob)

    @property
    def is_cert(self) -> bool:
        return self.cert is not None

    def plain(self) -> OfferedKey:
        """The key without its certificate (sshkey.c ``sshkey_drop_cert``)."""
        return OfferedKey(
            self.plain_type, self.plain_blob, self.plain_type, self.plain_blob, None, self.comment
        )

    def to_line(self) -> str:
        """``TYPE BASE64`` as sshkey.c ``sshkey_write`` prints it (no comment)."""
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"


# ---------------------------------------------------------------------------------------- known_hosts


@dataclass(frozen=True)
class KnownHostsWarning:
    """A known_hosts line OpenSSH would skip as invalid (or a file it cannot read: ``line == 0``)."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}" if self.line else f"{self.file}: {self.message}"


class KnownEntry(TypedDict):
    """One known_hosts entry as reported in a verdict (JSON-ready)."""

    file: str
    line: int
    key_type: str
    fingerprint: str
    marker: str | None


def _match_pattern(s: str, pattern: str) -> bool:
    """match.c ``match_pattern``: ``*`` any run, ``?`` one character, everything else literal."""
    if "*" not in pattern and "?" not in pattern:  # most known_hosts names: no regex at all
        return s == pattern
    return _pattern_regex(pattern).fullmatch(s) is not None


@functools.lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """The wildcard pattern as a compiled regex, once per pattern (a doctor over N hosts checks every host
    against every known_hosts line: N x lines matches, which rebuilt the regex each time)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _match_pattern_list(name: str, patterns: str) -> int:
    """match.c ``match_hostname``: 1 positive, 0 no match, -1 a ``!negated`` pattern matched (line refused).

    The name and the patterns are compared case-insensitively (ASCII lower-casing, as OpenSSH).
    """
    s = name.lower()
    got_positive = 0
    for sub in patterns.split(","):
        negated = sub.startswith("!")
        if negated:
            sub = sub[1:]
        if len(sub) >= _MAX_SUBPATTERN:
            return 0
        if _match_pattern(s, sub.lower()):
            if negated:
                return -1
            got_positive = 1
    return got_positive


def hash_host(name: str, salt: bytes | None = None) -> str:
    """``|1|base64(salt)|base64(HMAC-SHA1(salt, name))`` (hostfile.c ``host_hash``).

    A random 20-byte salt unless ``salt`` is given. Raises ValueError for a salt of another length.
    """
    salt = secrets.token_bytes(SALT_LEN) if salt is None else salt
    if len(salt) != SALT_LEN:
        raise ValueError(f"salt must be {SALT_LEN} bytes (OpenSSH rejects others), got {len(salt)}")
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"{HASH_MAGIC}{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _hashed_salt(field: str) -> bytes | None:
    """hostfile.c ``extract_salt``: the salt of a ``|1|salt|hash`` field, or None when malformed."""
    if not field.startswith(HASH_MAGIC):
        return None
    rest = field[len(HASH_MAGIC) :]
    b64salt, sep, _ = rest.partition("|")
    if not sep or not 0 < len(b64salt) <= 1024:
        return None
    try:
        salt = base64.b64decode(b64salt, validate=True)
    except ValueError:
        return None
    return salt if len(salt) == SALT_LEN else None


@dataclass(frozen=True)
class KnownHostEntry:
    """One parsed known_hosts line.

    ``hosts`` is the raw host field: a comma list of patterns, or one hashed name (``hashed`` True).
    ``plain_blob`` is the key without any certificate (what revocation and CA matching compare).
    """

    file: str
    line: int
    marker: Marker | None
    hosts: str
    hashed: bool
    key_type: str
    key_blob: bytes
    plain_blob: bytes
    comment: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.plain_blob)

    @property
    def patterns(self) -> tuple[str, ...]:
        return () if self.hashed else tuple(self.hosts.split(","))

    def matches(self, name: str) -> bool:
        """hostfile.c ``match_maybe_hashed``: hashed names compare the HMAC exactly, plain ones by pattern."""
        if self.hashed:
            salt = _hashed_salt(self.hosts)
            return salt is not None and hmac.compare_digest(hash_host(name, salt), self.hosts)
        return _match_pattern_list(name, self.hosts) == 1

    def key_line(self) -> str:
        return f"{self.key_type} {base64.b64encode(self.key_blob).decode()}"

    def info(self) -> KnownEntry:
        return {
            "file": self.file,
            "line": self.line,
            "key_type": self.key_type,
            "fingerprint": self.fingerprint,
            "marker": self.marker,
        }


def lookup_name(host: str, port: int = DEFAULT_PORT, *, host_key_alias: str | None = None) -> str:
    """The name OpenSSH searches known_hosts for (sshconnect.c ``get_hostfile_hostname_ipaddr``).

    ``host_key_alias`` is used verbatim, never with a port; otherwise ``host`` lower-cased (ssh.c), as
    ``[host]:port`` when ``port`` is neither 22 nor 0 (misc.c ``put_host_port``).
    """
    if host_key_alias:
        return host_key_alias
    h = host.lower()
    return h if port in (0, DEFAULT_PORT) else f"[{h}]:{port}"


def _portless_name(host: str, port: int, host_key_alias: str | None) -> str | None:
    """The name of OpenSSH's "checking without port identifier" retry, when it makes one."""
    if host_key_alias or port in (0, DEFAULT_PORT):
        return None
    return host.lower()


@dataclass(frozen=True)
class KnownHosts:
    """The entries of the known_hosts files, in OpenSSH's load order (files in the order given)."""

    files: tuple[str, ...] = ()
    entries: tuple[KnownHostEntry, ...] = ()
    warnings: tuple[KnownHostsWarning, ...] = ()

    @property
    def primary_file(self) -> str | None:
        """The first file, where OpenSSH says "Add correct host key in ..." (the user's first file)."""
        return self.files[0] if self.files else None

    def for_name(self, name: str) -> list[KnownHostEntry]:
        """Entries (any marker) whose host field matches ``name`` exactly as looked up (no port logic), in
        file order. Lines of plain names only are looked up by name (:attr:`_by_name`); the others (hashed,
        wildcard, negated) are matched one by one, as :meth:`KnownHostEntry.matches` does."""
        by_name, others = self._by_name
        hits = sorted([*by_name.get(name.lower(), ()), *(i for i in others if self.entries[i].matches(name))])
        return [self.entries[i] for i in hits]

    @functools.cached_property
    def _by_name(self) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
        """``({lower-cased name: indices of the entries naming it}, indices of the other entries)``.

        An entry goes in the first part when its host field is a comma list of plain names (no ``|1|`` hash,
        no ``*``/``?``, no ``!``, no sub-pattern of ``_MAX_SUBPATTERN`` or more): for those,
        ``_match_pattern_list`` is 1 exactly when the lower-cased name equals one of them. Matching every host
        against every line made the lookups of an N-host run N x lines (issue 18)."""
        by_name: dict[str, list[int]] = {}
        others: list[int] = []
        for i, e in enumerate(self.entries):
            subs = [] if e.hashed else e.hosts.split(",")
            if not subs or any(
                sub.startswith("!") or "*" in sub or "?" in sub or len(sub) >= _MAX_SUBPATTERN for sub in subs
            ):
                others.append(i)
                continue
            for sub in dict.fromkeys(sub.lower() for sub in subs):
                by_name.setdefault(sub, []).append(i)
        return {k: tuple(v) for k, v in by_name.items()}, tuple(others)

    def for_host(
        self, host: str, port: int = DEFAULT_PORT, *, host_key_alias: str | None = None
    ) -> list[KnownHostEntry]:
        """Entries for the name OpenSSH looks up for ``host``/``port`` (see :func:`lookup_name`)."""
        return self.for_name(lookup_name(host, port, host_key_alias=host_key_alias))

    def key_types_for(
        self, host: str, port: int = DEFAULT_PORT, *, host_key_alias: str | None = None
    ) -> set[str]:
        """Key types of the unmarked entries for the host (sshconnect2.c ``order_hostkeyalgs``)."""
        return {
            e.key_type for e in self.for_host(host, port, host_key_alias=host_key_alias) if e.marker is None
        }

    def has_cert_authority_for(
        self, host: str, port: int = DEFAULT_PORT, *, host_key_alias: str | None = None
    ) -> bool:
        """Whether a ``@cert-authority`` line covers the host (OpenSSH then asks for certificates first).

        Includes the port-less name OpenSSH retries with when the ``[host]:port`` name has no CA line.
        """
        names = [lookup_name(host, port, host_key_alias=host_key_alias)]
        portless = _portless_name(host, port, host_key_alias)
        if portless is not None:
            names.append(portless)
        return any(e.marker == CA_MARKER for n in names for e in self.for_name(n))

    def revoked_key_lines(self, host: str | None = None, port: int = DEFAULT_PORT) -> list[str]:
        """``TYPE BASE64`` of the ``@revoked`` entries (all of them, or those covering ``host``/``port``)."""
        entries = self.entries if host is None else self.for_host(host, port)
        return [e.key_line() for e in entries if e.marker == REVOKE_MARKER]


def _split_fields(text: str) -> tuple[Marker | None, str, str] | str | None:
    """hostfile.c ``hostkeys_foreach`` up to the key: None for comments/blank lines, a message for an
    invalid line, else (marker, host field, the rest from the key type on)."""
    cp = text.rstrip("\r").lstrip(" \t")
    if not cp or cp.startswith("#"):
        return None
    marker: Marker | None = None
    while cp.startswith("@"):  # hostfile.c check_markers
        word, *tail = _WS.split(cp, maxsplit=1)
        if marker is not None:
            return "more than one marker (only one of @cert-authority / @revoked is allowed)"
        if word == CA_MARKER:
            marker = CA_MARKER
        elif word == REVOKE_MARKER:
            marker = REVOKE_MARKER
        else:
            return f"unknown marker {word!r} (expected @cert-authority or @revoked)"
        if not tail or not tail[0]:
            return f"{word} marker without host patterns and key"
        cp = tail[0]
    hosts, *after = _WS.split(cp, maxsplit=1)
    rest = after[0] if after else ""
    if not rest or rest.startswith("#"):
        return "no key after the host patterns"
    if hosts.startswith("|") and _hashed_salt(hosts) is None:
        return "malformed hashed host name (expected |1|base64(20-byte salt)|base64(hash))"
    return marker, hosts, rest


def _parse_line(text: str) -> tuple[Marker | None, str, _Parsed, str] | str | None:
    """:func:`_split_fields` plus the key (``HKF_WANT_PARSE_KEY``): (marker, hosts, key, comment)."""
    fields = _split_fields(text)
    if fields is None or isinstance(fields, str):
        return fields
    marker, hosts, rest = fields
    try:
        key_type, b64, comment = _split_key_text(rest)
        parsed = _decode_key(key_type, b64)
    except KeyFormatError as exc:
        return f"bad key: {exc}"
    return marker, hosts, parsed, comment


def _keygen_valid(rest: str) -> bool:
    """ssh-keygen -R's (unparsed) key check, hostkeys_foreach without HKF_WANT_PARSE_KEY: a key type
    sshkey.c ``sshkey_type_from_name`` knows, followed by whitespace and something that is not a comment."""
    parts = _WS.split(rest, maxsplit=1)
    if len(parts) < 2:
        return False
    ktype, tail = parts
    known = ktype in _PLAIN_TYPES or ktype in _CERT_TYPES or ktype in _SIG_ONLY_NAMES
    return (known or ktype.lower() in _SHORT_NAMES) and bool(tail.strip()) and not tail.startswith("#")


def load_known_hosts(paths: Iterable[Path | str]) -> KnownHosts:
    """Parse known_hosts files in the order given (user files first, then global, as OpenSSH loads them).

    Missing files are skipped silently (OpenSSH does); an unreadable file or an invalid line becomes a
    :class:`KnownHostsWarning` with file and line (OpenSSH skips such lines with a debug message). Never
    raises for file content.
    """
    files: list[str] = []
    entries: list[KnownHostEntry] = []
    warnings: list[KnownHostsWarning] = []
    for p in paths:
        path = str(p)
        files.append(path)
        try:
            data = Path(path).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            warnings.append(KnownHostsWarning(path, 0, f"cannot read: {exc.strerror or exc}"))
            continue
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            result = _parse_line(raw.decode("utf-8", "replace"))
            if result is None:
                continue
            if isinstance(result, str):
                warnings.append(KnownHostsWarning(path, lineno, result))
                continue
            marker, hosts, parsed, comment = result
            entries.append(
                KnownHostEntry(
                    file=path,
                    line=lineno,
                    marker=marker,
                    hosts=hosts,
                    hashed=hosts.startswith("|"),
                    key_type=parsed.key_type,
                    key_blob=parsed.blob,
                    plain_blob=parsed.plain_blob,
                    comment=comment,
                )
            )
    return KnownHosts(tuple(files), tuple(entries), tuple(warnings))


# ------------------------------------------------------------------------------------------ file list


def _expand_path(raw: str, home: Path, tokens: Mapping[str, str], environ: Mapping[str, str] | None) -> str:
    """ssh.c: ``tilde_expand_filename`` then ``percent_expand`` (+ ``${VAR}`` since OpenSSH 8.4)."""
    s = raw
    if s == "~" or s.startswith("~/"):
        s = str(home) + s[1:]
    if environ is not None:

        def env(m: re.Match[str]) -> str:
            var = m.group(1)
            if var not in environ:
                raise ConfigError(f"known_hosts path {raw!r}: environment variable ${{{var}}} is not set")
            return environ[var]

        s = re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", env, s)
    values = {"d": str(home), "%": "%", **tokens}
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(s):
            raise ConfigError(f"known_hosts path {raw!r} ends with a lone '%'", "write %% for a literal %")
        t = s[i + 1]
        if t not in values:
            raise ConfigError(
                f"known_hosts path {raw!r}: token %{t} is unknown or has no value here",
                "UserKnownHostsFile accepts %%, %C, %d, %h, %i, %k, %L, %l, %n, %p, %r, %u "
                "(ssh_config(5) TOKENS)",
            )
        out.append(values[t])
        i += 2
    return "".join(out)


def default_known_hosts_files(
    home: Path,
    user_files: Sequence[str] | None = None,
    global_files: Sequence[str] | None = None,
    *,
    tokens: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Path]:
    """The known_hosts files OpenSSH reads, user files first (readconf.c defaults, ssh_config(5)).

    ``user_files`` / ``global_files`` are the ``UserKnownHostsFile`` / ``GlobalKnownHostsFile`` values when
    ssh_config sets them (``None`` = unset). Defaults: ``~/.ssh/known_hosts``, ``~/.ssh/known_hosts2``,
    ``/etc/ssh/ssh_known_hosts``, ``/etc/ssh/ssh_known_hosts2``. A value of ``none`` means no files.
    User files get ``~`` (the caller's ``home``; ``~user`` is left alone), ``%d`` (home), ``%%`` and the
    other ``tokens`` the caller supplies (``{"u": local user, "h": remote host, "p": port, ...}``), and
    ``${VAR}`` from ``environ`` when given. Global files are used as written, as ssh does.

    Raises ConfigError for an unknown or unavailable ``%`` token or an unset ``${VAR}``.
    """
    toks = dict(tokens or {})
    if user_files is None:
        users = [home / ".ssh" / "known_hosts", home / ".ssh" / "known_hosts2"]
    else:
        users = [Path(_expand_path(f, home, toks, environ)) for f in user_files if f.lower() != "none"]
    if global_files is None:
        globals_ = [Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2")]
    else:
        globals_ = [Path(f) for f in global_files if f.lower() != "none"]
    return users + globals_


def primary_known_hosts_file(
    home: Path,
    user_files: Sequence[str] | None = None,
    *,
    tokens: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path | None:
    """The file ``ssh`` adds new host keys to: the first user file (None for ``UserKnownHostsFile none``)."""
    files = default_known_hosts_files(home, user_files, [], tokens=tokens, environ=environ)
    return files[0] if files else None


# ---------------------------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class HostKeyVerdict:
    """orch's judgement of an offered host key; ``ok`` only for ``match`` and ``cert-authority``.

    ``name`` is the known_hosts name looked up; ``known`` lists the entries whose patterns matched it (and
    the port-less name's, when OpenSSH's port-less retry was consulted); ``hint`` says what to do next.
    """

    verdict: Verdict
    name: str
    offered_fingerprint: str
    offered_type: str
    detail: str
    known: list[KnownEntry] = field(default_factory=list)
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict in ("match", "cert-authority")

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "ok": self.ok,
            "name": self.name,
            "offered_fingerprint": self.offered_fingerprint,
            "offered_type": self.offered_type,
            "detail": self.detail,
            "known": [dict(k) for k in self.known],
            "hint": self.hint,
        }


def _where(e: KnownHostEntry) -> str:
    return f"{e.file}:{e.line}"


@dataclass(frozen=True)
class _Plain:
    """hostfile.c ``check_hostkeys_by_key_or_type`` for a plain key: OK / CHANGED / NEW (+ revocation)."""

    status: Literal["ok", "changed", "new", "revoked"]
    found: KnownHostEntry | None  # the matching entry, the last non-matching one (OpenSSH's "Offending"), ...
    revoked_by: KnownHostEntry | None = None


def _revoked(entries: Sequence[KnownHostEntry], key: OfferedKey) -> KnownHostEntry | None:
    """hostfile.c ``check_key_not_revoked``: the key (as plain key) or a certificate's CA is @revoked."""
    for e in entries:
        if e.marker != REVOKE_MARKER:
            continue
        if e.plain_blob == key.plain_blob:
            return e
        if key.cert is not None and e.plain_blob == key.cert.signature_key:
            return e
    return None


def _check_plain(entries: Sequence[KnownHostEntry], key: OfferedKey) -> _Plain:
    status: Literal["ok", "changed", "new"] = "new"
    found: KnownHostEntry | None = None
    for e in entries:
        if e.marker is not None:
            continue
        if e.key_blob == key.blob:
            status, found = "ok", e
            break
        status, found = "changed", e
    rev = _revoked(entries, key)
    if rev is not None:
        return _Plain("revoked", None, rev)
    return _Plain(status, found)


def _find_ca(entries: Sequence[KnownHostEntry], cert: Certificate) -> KnownHostEntry | None:
    for e in entries:
        if e.marker == CA_MARKER and e.plain_blob == cert.signature_key:
            return e
    return None


def _dedup(entries: Iterable[KnownHostEntry]) -> list[KnownEntry]:
    seen: set[tuple[str, int]] = set()
    out: list[KnownEntry] = []
    for e in entries:
        if (e.file, e.line) not in seen:
            seen.add((e.file, e.line))
            out.append(e.info())
    return out


def is_trusted_ca(
    known: KnownHosts, host: str, port: int, ca_blob: bytes, *, host_key_alias: str | None = None
) -> bool:
    """Whether ``ca_blob`` is a ``@cert-authority`` key for the host and not ``@revoked`` there.

    Looked up under the ``[host]:port`` name, then under the port-less name (sshconnect.c
    ``check_host_key`` retries without the port when no CA line for ``[host]:port`` matches).
    Principals and validity are judged by :func:`judge`.
    """
    names = [lookup_name(host, port, host_key_alias=host_key_alias)]
    portless = _portless_name(host, port, host_key_alias)
    if portless is not None:
        names.append(portless)
    for name in names:
        entries = known.for_name(name)
        if any(e.marker == REVOKE_MARKER and e.plain_blob == ca_blob for e in entries):
            return False
        if any(e.marker == CA_MARKER and e.plain_blob == ca_blob for e in entries):
            return True
    return False


def judge(
    known: KnownHosts,
    host: str,
    port: int,
    offered: OfferedKey,
    *,
    now: float,
    host_key_alias: str | None = None,
    inventory_name: str | None = None,
) -> HostKeyVerdict:
    """Judge ``offered`` for ``host``:``port`` the way OpenSSH's ``check_host_key`` would (module docstring).

    Args:
        known: the loaded known_hosts files.
        host: the HostName ssh connects to (inventory ``address`` / ssh_config ``HostName`` / the alias).
        port: the TCP port; 22 (or 0) means no ``[host]:port`` form.
        offered: the key the server offered (plain key or certificate).
        now: seconds since the epoch, for certificate validity.
        host_key_alias: ssh_config ``HostKeyAlias``; when set it replaces ``host`` both as the lookup name
            (verbatim, no port, no port-less retry) and as the name certificate principals must list.
        inventory_name: the name ``orch hosts trust`` takes, for the hint (default: ``host``).

    Returns a :class:`HostKeyVerdict`; never raises for known_hosts content.
    """
    name = lookup_name(host, port, host_key_alias=host_key_alias)
    cert_name = host_key_alias or host.lower()
    portless = _portless_name(host, port, host_key_alias)
    trust_cmd = f"orch hosts trust {inventory_name or host}"
    primary = known.for_name(name)
    consulted: list[KnownHostEntry] = list(primary)
    fp, otype = offered.fingerprint, offered.key_type

    def verdict(v: Verdict, detail: str, hint: str = "") -> HostKeyVerdict:
        return HostKeyVerdict(v, name, fp, otype, detail, _dedup(consulted), hint)

    def revoked(e: KnownHostEntry, via: str = "") -> HostKeyVerdict:
        what = (
            f"the certificate's signing CA {e.fingerprint}"
            if offered.cert is not None and e.plain_blob == offered.cert.signature_key
            else f"the {offered.plain_type} key {fp}"
        )
        return verdict(
            "revoked",
            f"{name} offered {what}, which is marked @revoked at {_where(e)}{via}",
            "do not connect: the key is revoked, which usually means its private key was stolen; "
            "ask the host's administrator for new host keys",
        )

    # Step 1: a certificate is judged through @cert-authority (hostfile.c want_cert -> MRK_CA entries).
    cert_note = ""
    cert_problem: tuple[KnownHostEntry, str] | None = None
    cert = offered.cert
    if cert is not None:
        rev = _revoked(primary, offered)
        if rev is not None:
            return revoked(rev)
        ca = _find_ca(primary, cert)
        if ca is None and portless is not None:  # no CHANGED for certificates: HOST_NEW -> port-less retry
            extra = known.for_name(portless)
            consulted += extra
            rev = _revoked(extra, offered)
            if rev is not None:
                return revoked(rev, f" (port-less name {portless})")
            ca = _find_ca(extra, cert)
        if ca is not None:
            problem = cert.problem(cert_name, now)
            if problem is None:
                scope = (
                    f"principals {', '.join(cert.principals)}"
                    if cert.principals
                    else "no principals, which OpenSSH accepts for any host"
                )
                return verdict(
                    "cert-authority",
                    f"{name} offered a {'host' if cert.is_host else 'user'} certificate (key id "
                    f"{cert.key_id!r}, {scope}, valid {cert.validity_text()}) signed by the CA "
                    f"{ca.fingerprint} trusted at {_where(ca)}",
                )
            cert_problem = (ca, problem)
            cert_note = (
                f"its certificate (key id {cert.key_id!r}) is signed by the CA trusted at {_where(ca)} "
                f"but is invalid: {problem}"
            )
        else:
            cert_note = (
                f"its certificate is signed by the CA {cert.ca_fingerprint}, which no @cert-authority line "
                f"for {name} trusts; judged by its plain key, as OpenSSH does"
            )
        offered = offered.plain()  # sshconnect.c: "No matching CA found. Retry with plain key"

    # Step 2: the plain key against unmarked entries for the name.
    res = _check_plain(primary, offered)
    if res.status == "revoked" and res.revoked_by is not None:
        return revoked(res.revoked_by)
    suffix = f"; {cert_note}" if cert_note else ""

    def invalid_cert(plain_outcome: str) -> HostKeyVerdict:
        assert cert_problem is not None and cert is not None
        ca, problem = cert_problem
        principals = ", ".join(cert.principals) or "(none)"
        return verdict(
            "cert-invalid",
            f"{name} offered a certificate signed by the CA trusted at {_where(ca)}, but it is invalid: "
            f"{problem} (key id {cert.key_id!r}, type {'host' if cert.is_host else 'user'}, principals "
            f"{principals}, valid {cert.validity_text()}, host name checked {cert_name!r}); {plain_outcome}",
            "have the CA re-issue the host certificate (ssh-keygen -s CA_KEY -h -n "
            f"{cert_name} -V ...) and install it as HostCertificate in sshd_config",
        )

    if res.status == "ok" and res.found is not None:
        recorded = f"recorded at {_where(res.found)}"
        return verdict("match", f"{name} offered the {offered.key_type} key {fp} {recorded}" + suffix)
    if res.status == "changed" and res.found is not None:
        offending = res.found
        unmarked = [e for e in primary if e.marker is None]
        same = [e for e in unmarked if e.key_type == offered.key_type]
        if same:
            detail = (
                f"{name} offered the {offered.key_type} key {fp}, but {_where(same[-1])} records a different "
                f"{offered.key_type} key ({same[-1].fingerprint})"
            )
        else:
            others = ", ".join(f"{e.key_type} at {_where(e)}" for e in unmarked)
            detail = (
                f"{name} offered a {offered.key_type} key {fp}, but is known only with other key types "
                f"({others}); OpenSSH treats this as a changed host key "
                "(REMOTE HOST IDENTIFICATION HAS CHANGED)"
            )
        if cert_problem is not None:
            return invalid_cert(f"its plain key is not on file either: {detail}")
        return verdict(
            "changed",
            detail + suffix,
            changed_key_hint(fp, trust_cmd, offending.file, name, known.primary_file),
        )

    # Step 4: nothing for [host]:port -> OpenSSH's quiet port-less retry, which only accepts a match.
    detail = f"no known_hosts entry for {name}"
    if portless is not None:
        extra = known.for_name(portless)
        consulted += extra
        rev = _revoked(extra, offered)
        if rev is not None:
            return revoked(rev, f" (port-less name {portless})")
        sub = _check_plain(extra, offered)
        if sub.status == "ok" and sub.found is not None:
            return verdict(
                "match",
                f"{name} offered the {offered.key_type} key {fp} recorded for the port-less name "
                f"{portless} at {_where(sub.found)} (OpenSSH's 'checking without port identifier' retry)"
                + suffix,
            )
        if sub.status == "changed" and sub.found is not None:
            detail += (
                f"; the port-less name {portless} has a different key at {_where(sub.found)}, which OpenSSH "
                f"does not count for port {port}"
            )
    if cert_problem is not None:
        return invalid_cert(f"its plain key is not on file ({detail})")
    return verdict(
        "unknown",
        f"{detail}; {name} offered the {offered.key_type} key {fp}" + suffix,
        f"confirm the fingerprint {fp} with the host's administrator, then: {trust_cmd}",
    )


def changed_key_hint(fp: str, trust_cmd: str, file: str, name: str, user_file: str | None) -> str:
    """The one fix text for a changed host key — doctor's hint, ``orch hosts trust``'s refusal, README's Host
    keys section: confirm out of band first (never auto-accepted), then ``orch hosts trust HOST --replace``,
    which removes the old entries as ``ssh-keygen -R`` does (keeping ``known_hosts.old``) and records the new
    key once its fingerprint is typed. When the old key sits in a file orch does not write (a global
    known_hosts, or a second UserKnownHostsFile), that file's ``ssh-keygen -f FILE -R NAME`` comes first."""
    first = (
        f"do not trust the new key until its fingerprint {fp} is confirmed with the host's administrator out of "
        "band (a changed key can mean a man-in-the-middle attack); if it is the host's new key: "
    )
    if user_file is None or file == user_file:
        return first + f"{trust_cmd} --replace (removes the old entries as ssh-keygen -R does, keeping known_hosts.old)"
    return first + f'ssh-keygen -f "{file}" -R "{name}" (a file orch does not write), then {trust_cmd}'


def check_ip(
    known: KnownHosts, verdict: HostKeyVerdict, address: str, port: int, offered: OfferedKey
) -> HostKeyVerdict:
    """CheckHostIP (sshconnect.c ``check_host_key``): with the name's key accepted (``match``), the unmarked
    entries for the peer's address (``[addr]:port`` off port 22) must not hold another key. OpenSSH then warns
    "the host key for NAME differs from the key for the IP address" and, under strict checking, refuses to
    connect; orch, which never asks, refuses. No entry for the address is fine (OpenSSH would record it).
    """
    if verdict.verdict != "match" or offered.cert is not None:
        return verdict
    name = lookup_name(address, port)
    entries = [e for e in known.for_name(name) if e.marker is None]
    if not entries or any(e.key_blob == offered.blob for e in entries):
        return verdict
    e = entries[-1]
    return HostKeyVerdict(
        "changed",
        verdict.name,
        verdict.offered_fingerprint,
        verdict.offered_type,
        f"{verdict.detail}, but CheckHostIP: the key recorded for the address {name} at {_where(e)} "
        f"({e.key_type} {e.fingerprint}) differs",
        [*verdict.known, e.info()],
        f"confirm which key is right with the host's administrator; if the address moved to this host: "
        f'ssh-keygen -f "{e.file}" -R "{name}"',
    )


# ------------------------------------------------------------------------------------ trust / replace


def format_entry(
    host: str,
    port: int,
    key: str | bytes | OfferedKey,
    *,
    hashed: bool,
    salt: bytes | None = None,
    host_key_alias: str | None = None,
) -> str:
    """The known_hosts line ``ssh`` would append for an accepted key (hostfile.c ``write_host_entry``).

    The name is :func:`lookup_name` lower-cased (``[host]:port`` off port 22); with ``hashed`` it is written
    as ``ssh-keygen -H`` / HashKnownHosts does, ``|1|base64(salt)|base64(HMAC-SHA1(salt, name))`` with a
    random 20-byte salt unless ``salt`` is given. ``key`` is a ``TYPE BASE64 [comment]`` line, a blob or an
    :class:`OfferedKey`; a certificate is recorded as its plain key, as ssh records it. No trailing newline.
    Raises KeyFormatError for a key that cannot be decoded.
    """
    if isinstance(key, OfferedKey):
        k = key
    elif isinstance(key, bytes):
        k = OfferedKey.from_blob(key)
    else:
        k = OfferedKey.from_line(key)
    name = lookup_name(host, port, host_key_alias=host_key_alias).lower()
    field_ = hash_host(name, salt) if hashed else name
    return f"{field_} {k.plain().to_line()}"


def append_entry(path: Path, line: str) -> None:
    """Append ``line`` to the known_hosts file ``path``.

    Creates the parent directory (mode 0700, like hostfile.c ``hostfile_create_user_ssh_dir``) and the
    file (mode 0600) when missing. Unlike ``ssh``, adds a newline first when the file does not end in one,
    so the entry is never glued onto a hand-edited last line.
    """
    path = Path(path)
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+b") as f:
        size = os.fstat(fd).st_size
        prefix = b""
        if size:
            f.seek(size - 1)
            prefix = b"" if f.read(1) == b"\n" else b"\n"
        f.write(prefix + line.rstrip("\n").encode() + b"\n")
        f.flush()
        os.fsync(fd)


@dataclass(frozen=True)
class RemoveResult:
    """``removed_count`` lines dropped; ``backup_path`` holds the old content (None: nothing changed)."""

    removed_count: int
    backup_path: Path | None


def remove_host(path: Path, host: str, port: int = DEFAULT_PORT) -> RemoveResult:
    """Remove the host's keys exactly as ``ssh-keygen -f PATH -R NAME`` (OpenSSH 9.2) does, NAME being
    ``host`` or ``[host]:port`` off port 22 (ssh-keygen.c ``do_known_hosts`` / ``known_hosts_find_delete``
    over hostfile.c ``hostkeys_foreach`` without key parsing).

    ``host`` is used as given (ssh-keygen does not lower-case it; hashed entries hold the lower-cased name
    ssh wrote). Dropped: unmarked lines whose host field matches NAME — plain patterns (including a
    wildcard or comma-list line that merely covers NAME: the whole line goes) and hashed names; the key is
    not decoded, only its type name checked. Kept: ``@cert-authority`` and ``@revoked`` lines, comments,
    other hosts, each rewritten as its bytes plus ``\\n`` (so a missing final newline is added).
    When something was removed the old file is kept as ``PATH.old`` (hard link, as ssh-keygen) and the new
    one (mode 0600) replaces it atomically; otherwise the file is untouched. A missing file gives
    ``RemoveResult(0, None)``.

    Raises ConfigError, touching nothing, when any line is invalid (unknown marker or key type, malformed
    hashed name, no key): ssh-keygen refuses such a file too ("is not a valid known_hosts file").
    """
    path = Path(path)
    name = host if port in (0, DEFAULT_PORT) else f"[{host}]:{port}"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return RemoveResult(0, None)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    kept: list[bytes] = []
    invalid: list[str] = []
    removed = 0
    for lineno, raw in enumerate(lines, start=1):
        fields = _split_fields(raw.decode("latin-1"))
        if isinstance(fields, str) or (fields is not None and not _keygen_valid(fields[2])):
            invalid.append(f"{path}:{lineno}")
        elif fields is not None:
            marker, hosts, _rest = fields
            probe = KnownHostEntry("", 0, marker, hosts, hosts.startswith("|"), "", b"", b"")
            if marker is None and probe.matches(name):
                removed += 1
                continue
        kept.append(raw + b"\n")
    if invalid:
        more = f" (and {len(invalid) - 1} more)" if len(invalid) > 1 else ""
        raise ConfigError(
            f"{invalid[0]}: invalid known_hosts line{more}; not rewriting {path}",
            "fix or delete the line(s) first; ssh-keygen -R refuses this file too",
        )
    if not removed:
        return RemoveResult(0, None)
    backup = path.with_name(path.name + ".old")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(kept))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            backup.unlink()
        try:
            os.link(path, backup)
        except OSError:  # a filesystem without hard links: copy instead
            backup.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return RemoveResult(removed, backup)
