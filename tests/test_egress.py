"""The egress proxy (issue 8, item 6): from inside a live local sandbox, hosts on the
allow-list are reached through the proxy, others are refused, and each connection is logged."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

from harness_bases.base import Invocation
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.egress import EgressPolicy
from uhp_server.sandbox.local import LocalSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}
# --noproxy '': the sandbox's NO_PROXY keeps 127.0.0.1 (its own gateway) off the proxy.
CURL = "curl -s --noproxy '' -x \"$HTTP_PROXY\" -o /dev/null -w '%{http_code}\\n'"


@pytest.fixture
def mounts(tmp_path: Path) -> SessionMounts:
    (tmp_path / "tools").mkdir()
    return SessionMounts(tmp_path / "ws", tmp_path / "home", tmp_path / "tools")


async def web_server() -> tuple[asyncio.Server, int, list[bytes]]:
    """A host-loopback HTTP server answering 204, recording request lines."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readline())
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


async def run(sandbox: LocalSandbox, mounts: SessionMounts, script: str) -> list[str]:
    proc = await sandbox.start(Invocation(["/bin/sh", "-c", script], ENV, "/workspace"), mounts)
    await proc.close_stdin()
    out = [line.decode() async for line in proc.lines()]
    assert await proc.wait() == 0, proc.stderr_tail()
    return out


# None: the proxy listens where the server chooses (a root server: in the sandbox's own
# network namespace); True: behind the relays an unprivileged server uses.
@pytest.mark.parametrize("relays", [None, True], ids=["chosen", "relays"])
async def test_allowed_hosts_are_reached_through_the_proxy_and_others_refused(
    mounts: SessionMounts, caplog: pytest.LogCaptureFixture, relays: bool | None
) -> None:
    caplog.set_level(logging.INFO, logger="uhp_server.sandbox.egress")
    policy = EgressPolicy.from_settings("127.0.0.1", allow_private=True)
    sandbox = LocalSandbox(egress=policy, relays=relays)
    server, port, seen = await web_server()
    async with server:
        out = await run(
            sandbox,
            mounts,
            f"{CURL} http://127.0.0.1:{port}/plain; "  # forward proxy
            f"{CURL} -p http://127.0.0.1:{port}/tunnel; "  # CONNECT
            f"{CURL} http://localhost:{port}/not-listed; "
            f"bash -c 'echo > /dev/tcp/127.0.0.1/{port}' 2>/dev/null || echo direct-refused",
        )
    assert out == ["204", "204", "403", "direct-refused"]
    assert seen == [b"GET /plain HTTP/1.1\r\n", b"GET /tunnel HTTP/1.1\r\n"]
    logged = [vars(r) for r in caplog.records if r.getMessage() == "egress"]  # extras included
    assert [(r["host"], r["port"], r["allowed"]) for r in logged] == [
        ("127.0.0.1", port, True),
        ("127.0.0.1", port, True),
        ("localhost", port, False),
    ]
    assert all(r["bytes_sent"] > 0 and r["bytes_received"] > 0 for r in logged[:2])


async def test_private_addresses_need_their_own_permission(mounts: SessionMounts) -> None:
    sandbox = LocalSandbox(egress=EgressPolicy.from_settings("127.0.0.1, 169.254.169.254", False))
    server, port, seen = await web_server()
    async with server:
        out = await run(
            sandbox,
            mounts,
            f"{CURL} http://127.0.0.1:{port}/; {CURL} http://169.254.169.254/latest/meta-data",
        )
    assert out == ["403", "403"]
    assert seen == []


async def test_no_allow_list_means_no_proxy_at_all(mounts: SessionMounts) -> None:
    out = await run(
        LocalSandbox(),
        mounts,
        "echo ${HTTP_PROXY:-no-proxy}; "
        "bash -c 'echo > /dev/tcp/127.0.0.1/3128' 2>/dev/null || echo nothing-listens",
    )
    assert out == ["no-proxy", "nothing-listens"]
