"""``orch hosts trust``: fetch a host's offered key without trusting it, and record it only once confirmed.

Never auto-accepts: the caller must confirm the fingerprint (typed by the user, or ``--fingerprint`` that
matches). A host whose key CHANGED is only re-recorded with ``replace=True``, which removes the old entries the
way ``ssh-keygen -R`` does and keeps a backup (``known_hosts.old``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import hostkeys
from orchestrator.errors import HostKeyError, UsageError
from orchestrator.inventory import Host


@dataclass(frozen=True)
class Offer:
    """The key a host offers and what the known_hosts files say about it now."""

    host: str
    hostname: str
    port: int
    key_name: str
    blob: bytes
    fingerprint: str
    key_type: str
    verdict: hostkeys.HostKeyVerdict
    known_hosts_file: Path
    hashed: bool
    host_key_alias: str | None = None  # ssh_config HostKeyAlias: the entry's name, verbatim, never [alias]:port
    warnings: tuple[hostkeys.KnownHostsWarning, ...] = ()  # known_hosts lines OpenSSH skips, once per file:line

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "hostname": self.hostname,
            "port": self.port,
            "fingerprint": self.fingerprint,
            "key_type": self.key_type,
            "verdict": self.verdict.verdict,
            "known_hosts_file": str(self.known_hosts_file),
            "warnings": [{"file": w.file, "line": w.line, "message": w.message} for w in self.warnings],
        }


async def fetch_offer(host: Host, *, timeout_s: float = 10.0) -> Offer:
    """Connect without authenticating, take the offered host key, and judge it against known_hosts."""
    if host.connection == "local":
        raise UsageError(f"{host.name} has connection: local", "there is no host key to trust for a local host")
    from orchestrator.transport.ssh import fetch_offered_key

    blob, target, resolver = await fetch_offered_key(host, timeout_s=timeout_s)
    files = target.known_hosts_files()
    known = resolver.known_hosts(target)
    offered = hostkeys.OfferedKey.from_blob(blob)
    verdict = hostkeys.judge(
        known,
        target.hostname,
        target.port,
        offered,
        now=time.time(),
        host_key_alias=target.host_key_alias,
        inventory_name=host.name,
    )
    user_file = files[0] if files else Path.home() / ".ssh" / "known_hosts"
    return Offer(
        host.name,
        target.hostname,
        target.port,
        target.key_name,
        blob,
        offered.fingerprint,
        offered.key_type,
        verdict,
        user_file,
        target.hash_known_hosts,
        target.host_key_alias,
        tuple(resolver.warnings()),
    )


@dataclass(frozen=True)
class TrustResult:
    recorded: bool
    line_written: str
    removed: int
    backup: Path | None
    file: Path


def refuse_changed(offer: Offer, replace: bool) -> None:
    """Raise HostKeyError for a changed key without ``--replace`` — before any fingerprint is asked for — with
    the changed-key fix text doctor prints (``hostkeys.changed_key_hint``)."""
    if offer.verdict.verdict == "changed" and not replace:
        raise HostKeyError(
            offer.host,
            "changed",
            f"the host key CHANGED (now {offer.fingerprint}); known_hosts holds a different key, and without "
            "--replace orch records nothing (exit 1: the host failed the check, as in orch doctor)",
            offer.verdict.hint,
        )


def record(offer: Offer, *, confirmed_fingerprint: str, replace: bool = False) -> TrustResult:
    """Write the offered key to the user's known_hosts once ``confirmed_fingerprint`` equals it.

    Raises UsageError when the fingerprint does not match, HostKeyError when the key is revoked, or changed
    and ``replace`` is False.
    """
    if confirmed_fingerprint.strip() != offer.fingerprint:
        raise UsageError(
            f"{offer.host}: the fingerprint you gave ({confirmed_fingerprint.strip() or 'nothing'}) is not the one "
            f"the host offers ({offer.fingerprint})",
            "compare with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` run ON the host (console, out of band)",
        )
    v = offer.verdict.verdict
    if v == "revoked":
        raise HostKeyError(offer.host, v, "the offered key is marked @revoked; it will not be trusted")
    if v in ("match", "cert-authority"):
        return TrustResult(False, "", 0, None, offer.known_hosts_file)
    removed, backup = 0, None
    if v == "changed" or (replace and offer.verdict.known):
        refuse_changed(offer, replace)
        res = hostkeys.remove_host(offer.known_hosts_file, offer.key_name, 0 if offer.host_key_alias else offer.port)
        removed, backup = res.removed_count, res.backup_path
    line = hostkeys.format_entry(
        offer.hostname, offer.port, offer.blob, hashed=offer.hashed, host_key_alias=offer.host_key_alias
    )
    hostkeys.append_entry(offer.known_hosts_file, line)
    return TrustResult(True, line, removed, backup, offer.known_hosts_file)
