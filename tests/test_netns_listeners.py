"""The gateway's listeners inside a sandbox's network namespace (sandbox/local/netns.py)."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from uhp_server.sandbox.local import netns

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="entering a namespace needs root")


async def test_a_connection_accepted_inside_sends_without_waiting_for_acks() -> None:
    """asyncio turns Nagle's algorithm off only on sockets whose proto says TCP: a listener
    made with proto 0 gave connections on which a reply's second write waited for the
    agent's delayed ACK (40 ms a model request)."""
    (listener,) = await asyncio.to_thread(netns.listen_inside, os.getpid(), [0])
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=listener)
    try:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
