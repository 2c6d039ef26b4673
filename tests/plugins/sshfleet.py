"""Many simulated hosts from few sshd processes: each ``sshd`` listens on up to 16 loopback addresses (one
``ListenAddress`` line each; 16 is sshd's compiled-in maximum), all on one port with one host key and one shared
remote HOME (as over NFS).

A fleet of hundreds or a thousand hosts as one sshd process per host would be a thousand processes on a 2-core CI
machine; 16 addresses per sshd is 63 processes for 1,000 hosts, and behaves, for the client, as N hosts with
distinct addresses (distinct known_hosts entries, distinct TCP endpoints).
Addresses beyond 127.0.0.255 (127.0.x.y) are loopback on Linux too (all of 127.0.0.0/8).
"""

from __future__ import annotations

import socket

from tests.plugins.sshd import SshdBed, SshdHost, free_port


def loopback_addresses(n: int, *, second_octet: int, start: int = 1) -> list[str]:
    """``n`` addresses ``127.B.x.y`` (B = ``second_octet``), y in 1..254, skipping .0 and .255."""
    out: list[str] = []
    i = start
    while len(out) < n:
        x, y = divmod(i, 256)
        if 1 <= y <= 254:
            out.append(f"127.{second_octet}.{x}.{y}")
        i += 1
    return out


def _port_free_everywhere(addresses: list[str]) -> int:
    for _ in range(20):
        port = free_port(addresses[0])
        try:
            for a in addresses[1:]:
                with socket.socket() as s:
                    s.bind((a, port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on all of {len(addresses)} addresses")


MAX_LISTEN_SOCKS = 16
"""OpenSSH's sshd listens on at most 16 sockets (``MAX_LISTEN_SOCKS`` in sshd.c): one sshd per 16 addresses."""


def start_fleet_sshd(
    bed: SshdBed, name: str, addresses: list[str], *, trusted: list[str] | None = None
) -> list[SshdHost]:
    """sshd processes listening on every address in ``addresses`` (16 per process, one port for all, one host key
    for all, so every host offers the same fingerprint); the client trusts that key under each address in
    ``trusted`` (default: all). Returns the sshd processes; each one's ``port`` is the port of every address."""
    import shutil

    port = _port_free_everywhere(addresses)
    procs: list[SshdHost] = []
    for i in range(0, len(addresses), MAX_LISTEN_SOCKS):
        chunk = addresses[i : i + MAX_LISTEN_SOCKS]
        sshd = bed.add(
            f"{name}-{i // MAX_LISTEN_SOCKS}",
            address=chunk[0],
            port=port,
            trusted=False,
            start=False,
            home=procs[0].home if procs else None,
            extra_config=[f"ListenAddress {a}:{port}" for a in chunk[1:]],
        )
        if procs:  # the first process's host key, so that all addresses offer one fingerprint
            for suffix in ("", ".pub"):
                shutil.copyfile(str(procs[0].host_keys["ed25519"]) + suffix, str(sshd.host_keys["ed25519"]) + suffix)
        sshd.start()
        procs.append(sshd)
    typ, blob = procs[0].pubkey_line().split()[:2]
    bed.client.trust(*(f"[{a}]:{port} {typ} {blob}" for a in (addresses if trusted is None else trusted)))
    return procs
