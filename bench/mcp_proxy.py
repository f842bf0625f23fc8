"""What does the gateway's MCP proxy add to an MCP tool call?

Calls the `lookup` tool of a real MCP server (the `mcp` package, Streamable HTTP, on
loopback) with the official MCP client, directly and through `/gateway/mcp/<name>`,
interleaved, and prints the medians, the proxied/direct ratio and the milliseconds added
per call (target: ≤ 5 ms). The MCP server and the gateway each run in their own process, as
they do in production (in one process their threads would fight over the GIL). Also times
the pre-turn reachability probe. Usage:

    python bench/mcp_proxy.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from uhp_server.gateway.mcp_proxy import make_mcp_router
from uhp_server.gateway.mcp_targets import McpTarget, probe
from uhp_server.gateway.tokens import TokenRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench import _smoke  # noqa: E402
from tests.support.mcp_server import RunningMcpServer  # noqa: E402
from tests.support.server import free_port  # noqa: E402

TARGET_ADDED_MS = 5.0


def serve_mcp(port: int) -> None:
    server = RunningMcpServer("http")
    server._sock.close()
    uvicorn.run(server.recorder, host="127.0.0.1", port=port, log_level="warning")


def serve_gateway(port: int, mcp_url: str) -> None:
    tokens = TokenRegistry()
    grant = tokens.issue("openai", "bench", 3600)
    grant.mcp_servers = {"vault": McpTarget("vault", mcp_url, "http", {}, allow_private=True)}
    print(grant.token, flush=True)  # the first line the benchmark reads
    app = FastAPI()
    app.include_router(make_mcp_router(tokens, httpx.AsyncClient(timeout=None)))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextlib.contextmanager
def process(*args: str, url: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, __file__, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # FastMCP logs every closed session as an error
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(url, timeout=0.5)
                break
            time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.asynccontextmanager
async def session(url: str, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as client,
    ):
        await client.initialize()
        yield client


async def timed_calls(client: ClientSession, n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        await client.call_tool("lookup", {"code": str(i)})
        out.append((time.perf_counter() - started) * 1000)
    return out


async def measure(calls: int, mcp_url: str, gateway_url: str, token: str) -> None:
    direct: list[float] = []
    proxied: list[float] = []
    async with (
        session(mcp_url, {}) as plain,
        session(gateway_url, {"Authorization": f"Bearer {token}"}) as via,
    ):
        await timed_calls(plain, 5)  # warm-up
        await timed_calls(via, 5)
        for _ in range(max(1, calls // 10)):
            direct += await timed_calls(plain, 10)
            proxied += await timed_calls(via, 10)
    probes = []
    for _ in range(20):
        started = time.perf_counter()
        assert await probe(McpTarget("vault", mcp_url, allow_private=True)) is None
        probes.append((time.perf_counter() - started) * 1000)
    d, p = statistics.median(direct), statistics.median(proxied)
    print(f"tool calls: {len(direct)} direct, {len(proxied)} proxied")
    print(f"median direct {d:.2f} ms, proxied {p:.2f} ms, ratio {p / d:.2f}, added {p - d:.2f} ms")
    verdict = "met" if p - d <= TARGET_ADDED_MS else "NOT met"
    print(f"target: added <= {TARGET_ADDED_MS} ms per call: {verdict}")
    print(f"pre-turn probe (reachable server): median {statistics.median(probes):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--serve-mcp", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", nargs=2, help=argparse.SUPPRESS)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), calls=10)  # one block of ten each way
    if args.serve_mcp:
        return serve_mcp(args.serve_mcp)
    if args.serve_gateway:
        port, mcp_url = args.serve_gateway
        return serve_gateway(int(port), mcp_url)
    mcp_port, gateway_port = free_port(), free_port()
    mcp_url = f"http://127.0.0.1:{mcp_port}/mcp"
    gateway_url = f"http://127.0.0.1:{gateway_port}/gateway/mcp/vault"
    with (
        process("--serve-mcp", str(mcp_port), url=mcp_url),
        process("--serve-gateway", str(gateway_port), mcp_url, url=gateway_url) as gateway,
    ):
        assert gateway.stdout is not None
        token = gateway.stdout.readline().strip()
        asyncio.run(measure(args.calls, mcp_url, gateway_url, token))


if __name__ == "__main__":
    main()
