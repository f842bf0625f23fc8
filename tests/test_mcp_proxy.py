"""The gateway's MCP proxy with a real MCP server (the `mcp` package) and the `mcp` client.

No agent CLI: the official MCP client stands where the CLI would, talking to the proxy with
a turn token; the MCP server behind it records what reached it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.scripted_provider.fixture import bind_loopback
from tests.support.mcp_server import ANSWER_PREFIX, RunningMcpServer
from uhp_server.gateway.mcp_proxy import _endpoint_rewriter, _rewrite_block, make_mcp_router
from uhp_server.gateway.mcp_targets import McpTarget, probe
from uhp_server.gateway.tokens import TokenRegistry

REAL_SECRET = "mcp-real-secret-7d1f"

# `.invalid` never resolves (RFC 6761): a name DNS answers "no such host" for.
UNRESOLVABLE = "http://no-such-mcp-server.invalid/mcp"


class Gateway:
    """Just the MCP proxy routes, served on a loopback port."""

    def __init__(self) -> None:
        self.tokens = TokenRegistry()
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=None))
        app = FastAPI()
        app.include_router(make_mcp_router(self.tokens, self.http))
        self._sock = bind_loopback()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)

    def grant(self, *targets: McpTarget) -> str:
        grant = self.tokens.issue("openai", "gpt-test", 60)
        grant.mcp_servers = {t.name: t for t in targets}
        return grant.token

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    running = Gateway()
    yield running
    running.stop()


@pytest.fixture(params=["http", "sse"])
def mcp_server(request: pytest.FixtureRequest) -> Iterator[RunningMcpServer]:
    server = RunningMcpServer(request.param).start()
    yield server
    server.stop()


def target(server: RunningMcpServer, allow_private: bool = True) -> McpTarget:
    headers = {"Authorization": f"Bearer {REAL_SECRET}", "X-Team": "blue"}
    return McpTarget("vault", server.url, server.transport, headers, allow_private)


async def call_lookup(url: str, token: str, transport: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            http = await stack.enter_async_context(httpx.AsyncClient(headers=headers))
            streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
        else:
            streams = await stack.enter_async_context(sse_client(url, headers=headers))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["lookup"]
        result = await session.call_tool("lookup", {"code": "x-42"})
        assert isinstance(result.content[0], TextContent)
        return result.content[0].text


async def test_a_real_mcp_client_calls_a_tool_through_the_proxy(
    gateway: Gateway, mcp_server: RunningMcpServer
) -> None:
    token = gateway.grant(target(mcp_server))
    answer = await call_lookup(f"{gateway.url}/gateway/mcp/vault", token, mcp_server.transport)
    assert answer == ANSWER_PREFIX + "x-42"
    seen = mcp_server.requests
    assert seen, "the MCP server was never reached"
    for request in seen:
        # The real credentials were added; the turn token never left the gateway.
        assert request.headers["authorization"] == f"Bearer {REAL_SECRET}"
        assert request.headers["x-team"] == "blue"
        assert token not in str(request.headers)
    if mcp_server.transport == "sse":  # the messages went through the relay route too
        assert any(r.method == "POST" and r.path.startswith("/messages") for r in seen)


async def test_tokens_names_and_policy_are_enforced(
    gateway: Gateway, mcp_server: RunningMcpServer
) -> None:
    url = f"{gateway.url}/gateway/mcp/vault"
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(url, json=body)).status_code == 401
        bad = {"Authorization": "Bearer uhpgw_not-a-token"}
        assert (await http.post(url, json=body, headers=bad)).status_code == 401
        token = gateway.grant(target(mcp_server))
        auth = {"Authorization": f"Bearer {token}"}
        other = f"{gateway.url}/gateway/mcp/other"
        assert (await http.post(other, json=body, headers=auth)).status_code == 404
        relay = f"{url}/relay/../../etc/passwd"
        assert (await http.post(relay, json=body, headers=auth)).status_code == 404
        gateway.tokens.revoke(token)
        assert (await http.post(url, json=body, headers=auth)).status_code == 401
        # Run-time URL policy: `localhost` resolves to loopback, refused without the flag.
        private = target(mcp_server, allow_private=False)
        private = McpTarget(
            "vault", private.url.replace("127.0.0.1", "localhost"), private.transport
        )
        auth = {"Authorization": f"Bearer {gateway.grant(private)}"}
        refused = await http.post(url, json=body, headers=auth)
        assert refused.status_code == 403
        assert "localhost" not in refused.text and "127.0.0.1" not in refused.text
        # A name that does not resolve is not reachable, not refused (issue 33 §6).
        nowhere = McpTarget("vault", UNRESOLVABLE, private.transport, allow_private=True)
        auth = {"Authorization": f"Bearer {gateway.grant(nowhere)}"}
        unresolved = await http.post(url, json=body, headers=auth)
        assert unresolved.status_code == 502
        assert "could not be reached: its host name does not resolve" in unresolved.text
        assert "policy" not in unresolved.text
    assert mcp_server.requests == []  # nothing above reached the MCP server


async def test_probe_tells_reachable_from_unreachable_and_refused() -> None:
    server = RunningMcpServer("http").start()
    try:
        assert await probe(McpTarget("v", server.url, allow_private=True)) is None
        refused = await probe(McpTarget("v", server.url, allow_private=False))
        assert refused == "is not allowed by this server's address policy"
        metadata = await probe(McpTarget("v", "http://169.254.169.254/", allow_private=True))
        assert metadata == "is not allowed by this server's address policy"
    finally:
        server.stop()
    dead = McpTarget("v", server.url, allow_private=True)  # stopped: nothing listens
    assert await probe(dead) == "could not be reached"
    # Issue 33 §6: a name that does not resolve was reported as refused by the policy.
    for allow_private in (True, False):
        nowhere = McpTarget("v", UNRESOLVABLE, allow_private=allow_private)
        assert await probe(nowhere) == "could not be reached (its host name does not resolve)"
    assert server.requests == []  # a probe opens a connection, it sends no request


def test_endpoint_events_are_rewritten_to_the_relay_and_other_origins_dropped() -> None:
    t = McpTarget("vault", "http://10.1.2.3:9000/base/sse", "sse")
    rewrite = _endpoint_rewriter(t, "vault")
    block = b"event: endpoint\r\ndata: /messages/?session_id=abc\r\n\r\n"
    assert _rewrite_block(block, rewrite, "vault") == (
        b"event: endpoint\ndata: /gateway/mcp/vault/relay/messages/?session_id=abc\n\n"
    )
    relative = b"event: endpoint\ndata: msg?s=1\n\n"
    assert b"/gateway/mcp/vault/relay/base/msg?s=1" in _rewrite_block(relative, rewrite, "vault")
    foreign = b"event: endpoint\ndata: http://evil.example/steal\n\n"
    assert _rewrite_block(foreign, rewrite, "vault") == b""
    message = b'event: message\ndata: {"jsonrpc":"2.0"}\n\n'
    assert _rewrite_block(message, rewrite, "vault") == message
