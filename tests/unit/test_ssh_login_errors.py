"""How ``transport.ssh._login`` names a connection that ended before the SSH handshake (pure translation).

``asyncssh.connect`` is replaced by a function that raises what asyncssh raises in each case; the real cases run
against sshd in ``tests/integration/test_ssh_config.py``. A ProxyCommand that exits at once (``false``) closes its
stdin and its stdout together, and which of the two asyncio reports first decides between EOF (a
``DisconnectError``) and EPIPE on the client's version write (a ``BrokenPipeError``): CI saw the second as a bare
"[Errno 32] Broken pipe" blamed on the host. Both orders are one failure and must read as one.
"""

from __future__ import annotations

import time
from typing import Any

import asyncssh
import pytest

from orchestrator import hostkeys
from orchestrator.errors import ConnectError
from orchestrator.transport import ssh
from orchestrator.transport.sshconfig import SshSettings


def settings(proxy_command: str | None) -> SshSettings:
    return SshSettings(
        name="pc-broken", hostname="127.0.0.1", port=22, user="bench", identity_files=(), certificate_files=(),
        identities_only=True, identity_agent=None, proxy_jump=None, proxy_command=proxy_command,
        host_key_alias=None, user_known_hosts=(), global_known_hosts=(), check_host_ip=False,
        connect_timeout_s=None, server_alive_interval_s=15.0, server_alive_count_max=3, hash_known_hosts=False,
    )  # fmt: skip


async def login_raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException, via: str | None) -> ConnectError:
    async def connect(*_a: Any, **_k: Any) -> Any:
        raise exc

    monkeypatch.setattr(ssh.asyncssh, "connect", connect)
    s = settings("false" if via else None)
    client = ssh._Client(s, hostkeys.load_known_hosts([]), [])
    trace = ssh.ConnectTrace()
    with pytest.raises(ConnectError) as info:
        await ssh._login(s, client, [], {}, ssh.Deadlines(), trace, time.monotonic(), via)
    return info.value


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (asyncssh.ConnectionLost("Connection lost"), "Connection lost"),
        (BrokenPipeError(32, "Broken pipe"), "Broken pipe"),
        (ConnectionResetError(104, "Connection reset by peer"), "Connection reset by peer"),
    ],
)
async def test_a_proxycommand_that_ends_first_is_named_whichever_end_closed_first(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, reason: str
) -> None:
    err = await login_raising(monkeypatch, exc, "ProxyCommand false")
    assert err.kind == "proxy"
    assert err.reason == f"the connection through ProxyCommand false closed before the SSH handshake ({reason})"
    assert "ssh -G pc-broken" in err.hint


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (BrokenPipeError(32, "Broken pipe"), "connection closed during the SSH handshake"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset during the SSH handshake"),
    ],
)
async def test_without_a_proxy_the_same_errors_stay_handshake_failures(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, message: str
) -> None:
    err = await login_raising(monkeypatch, exc, None)
    assert (err.kind, err.reason) == ("handshake", message)
