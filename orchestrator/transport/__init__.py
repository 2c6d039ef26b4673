"""Transports: ``ssh`` (asyncssh, the only module importing it) and ``local``; see ``base.Transport``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.inventory import Host
    from orchestrator.transport.base import Transport


async def open_transport(
    host: Host, *, timeout_s: float = 10.0, trace: Any | None = None, resolver: Any | None = None
) -> Transport:
    """Connect to ``host`` by its ``connection`` kind. ``timeout_s`` bounds each step (DNS, TCP, banner) and
    1.5x that the login. ``resolver`` (a ``sshconfig.SshResolver``) shares ``ssh -G`` answers and known_hosts
    files across one run's hosts. Raises ToolMissingError, ConfigError, ConnectError, HostKeyError, AuthError
    (see transport/ssh.py)."""
    if host.connection == "local":
        from orchestrator.transport.local import LocalTransport

        return LocalTransport(host.name)
    from orchestrator.transport import ssh

    dl = ssh.Deadlines(dns_s=timeout_s, tcp_s=timeout_s, banner_s=timeout_s, login_s=max(timeout_s, 5.0) * 1.5)
    return await ssh.connect(host, deadlines=dl, trace=trace, resolver=resolver)
