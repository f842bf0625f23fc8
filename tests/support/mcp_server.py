"""A real MCP server for tests (the `mcp` package's FastMCP), serving in a background thread.

It offers one tool, `lookup(code)`, answering `vault says <code>`, over Streamable HTTP
(`/mcp`) or the legacy HTTP+SSE transport (`/sse`, `/messages/`), and records every HTTP
request that reaches it, so a test can tell whether it was contacted at all and with
which credentials.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.fastmcp import FastMCP

from harness_bases import events as ev
from harness_bases.base import McpServerSpec
from tests.scripted_provider.fixture import bind_loopback
from tests.support.direct_turn import DirectTurn
from tests.support.live_base import LiveBase

ANSWER_PREFIX = "vault says "


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class _Recorder:
    """ASGI middleware keeping (method, path, headers) of each HTTP request."""

    app: Any
    requests: list[Recorded] = field(default_factory=list)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            self.requests.append(Recorded(scope["method"], scope["path"], headers))
        await self.app(scope, receive, send)


def _mcp_app(transport: str) -> Any:
    server = FastMCP("vault", host="127.0.0.1", log_level="WARNING")

    @server.tool()
    def lookup(code: str) -> str:
        """Look a code up in the vault."""
        return ANSWER_PREFIX + code

    return server.streamable_http_app() if transport == "http" else server.sse_app()


class RunningMcpServer:
    def __init__(self, transport: str = "http") -> None:
        self.transport = transport
        self.recorder = _Recorder(_mcp_app(transport))
        self._sock = bind_loopback()
        self.port = self._sock.getsockname()[1]
        path = "/mcp" if transport == "http" else "/sse"
        self.url = f"http://127.0.0.1:{self.port}{path}"
        config = uvicorn.Config(self.recorder, log_level="warning", timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def requests(self) -> list[Recorded]:
        return list(self.recorder.requests)

    def start(self, timeout: float = 10.0) -> RunningMcpServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("MCP test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


VAULT_TOKEN = "mcp-tok-1"


async def vault_turn(
    env: LiveBase, tool: str, transport: str = "http"
) -> tuple[DirectTurn, RunningMcpServer]:
    """A turn whose model calls the vault's `lookup("abc")`, by the name `tool` the CLI offers
    it under, and says what it answered; the server is stopped afterwards and keeps the
    requests it got."""
    server = RunningMcpServer(transport).start()
    try:
        vault = McpServerSpec("vault", server.url, VAULT_TOKEN, transport)
        prompt = f'TOOL {tool} {{"code": "abc"}}\nSAY {{output}}'
        turn = await env.run(prompt, mcp_servers=(vault,))
    finally:
        server.stop()
    return turn, server


def assert_vault_answered(turn: DirectTurn, server: RunningMcpServer) -> None:
    """The call reached the vault and came back with its answer, and every request the vault
    got carried the vault's bearer token."""
    (finished,) = turn.of(ev.ToolCallFinished)
    assert finished.ok and ANSWER_PREFIX + "abc" in finished.output
    assert {r.headers.get("authorization") for r in server.requests} == {f"Bearer {VAULT_TOKEN}"}
