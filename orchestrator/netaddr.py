"""``address:port`` as users read and type it — pure."""

from __future__ import annotations


def host_port(address: str | None, port: int | str | None) -> str:
    """``10.0.0.1:22``, ``b300-0:2222``; an IPv6 address in brackets, ``[::1]:39517`` (RFC 3986 section 3.2.2,
    the form ssh -J, URLs and OpenSSH's own messages use), since ``::1:39517`` reads as another address.
    ``-`` for a missing part."""
    a = "-" if not address else (f"[{address}]" if ":" in address and not address.startswith("[") else address)
    return f"{a}:{'-' if port is None or port == '' else port}"
