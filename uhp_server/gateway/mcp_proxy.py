"""The gateway's MCP proxy: the CLI reaches a harness's MCP servers only through here.

`/gateway/mcp/<name>` stands for one enabled MCP server of the turn. The CLI authenticates
with the turn's gateway token; the proxy looks the server up in the turn's grant, applies
the URL policy to the address it is about to connect to, adds the real headers and
credentials (which never enter the sandbox), and streams the answer back unbuffered.

Both MCP transports pass through:
- Streamable HTTP: POST (JSON or SSE answers), GET (the server's SSE stream) and DELETE on
  the one endpoint, with `Mcp-Session-Id` / `Mcp-Protocol-Version` in both directions.
- Legacy HTTP+SSE: GET opens the event stream, whose `endpoint` event names where to POST
  messages. That URL is rewritten to `/gateway/mcp/<name>/relay/<path>` (same origin as the
  configured URL only), so the messages take the same checked, credentialed route.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import httpx
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from uhp_server.gateway.mcp_targets import MCP_PATH, McpTarget
from uhp_server.gateway.memory_server import MEMORY_SERVER, MemoryToolbox, serve_memory
from uhp_server.gateway.scrubbing import StreamScrubber, scrubber
from uhp_server.gateway.tokens import DOOR_SCOPE_KEY, TokenRegistry
from uhp_server.gateway.url_policy import HostNotResolved, PinnedUrl, UrlRefused, pin_url
from uhp_server.gateway.user_questions import QUESTION_SERVER, Asker, serve_questions
from uhp_server.http.bodies import read_capped

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 16 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FORWARD_REQUEST_HEADERS = (
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "user-agent",
)
# Not www-authenticate: it would send the CLI off on an OAuth flow for the proxy.
_FORWARD_RESPONSE_HEADERS = re.compile(
    r"content-type|mcp-session-id|mcp-protocol-version|retry-after"
)
_STREAM_HEADERS = {"x-accel-buffering": "no", "cache-control": "no-cache"}
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def _error(status: int, message: str) -> JSONResponse:
    body = {"error": {"type": "gateway_error", "message": message}}
    return JSONResponse(body, status_code=status, headers=_STREAM_HEADERS)


def _token(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _relay_url(target: McpTarget, path: str, query: str) -> str | None:
    """The upstream URL of a legacy-SSE message endpoint: same origin as the target only."""
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        return None
    base = urlsplit(target.url)
    quoted = quote("/" + path, safe="/:@!$&'()*+,;=-._~")
    return urlunsplit((base.scheme, base.netloc, quoted, query, ""))


def _endpoint_rewriter(target: McpTarget, name: str) -> Callable[[str], str | None]:
    """Maps the upstream's `endpoint` event data to this proxy's relay route."""
    origin = urlsplit(target.url)

    def rewrite(data: str) -> str | None:
        absolute = urlsplit(urljoin(target.url, data.strip()))
        if (absolute.scheme, absolute.netloc) != (origin.scheme, origin.netloc):
            return None  # another origin would escape the checked, credentialed route
        path = absolute.path if absolute.path.startswith("/") else "/" + absolute.path
        relay = f"{MCP_PATH}/{name}/relay{path}"
        return f"{relay}?{absolute.query}" if absolute.query else relay

    return rewrite


def _rewrite_block(block: bytes, rewrite: Callable[[str], str | None], name: str) -> bytes:
    lines = re.split(rb"\r\n|\n|\r", block.rstrip(b"\r\n"))
    fields = [line.partition(b":") for line in lines]
    event = next((v.strip() for k, _, v in fields if k == b"event"), b"")
    if event != b"endpoint":
        return block
    data = "\n".join(
        v.removeprefix(b" ").decode("utf-8", "replace") for k, _, v in fields if k == b"data"
    )
    rewritten = rewrite(data)
    if rewritten is None:
        log.warning("mcp proxy %s: endpoint on another origin dropped", name)
        return b""
    return f"event: endpoint\ndata: {rewritten}\n\n".encode()


async def _rewrite_endpoints(
    chunks: AsyncIterator[bytes], rewrite: Callable[[str], str | None], name: str
) -> AsyncIterator[bytes]:
    """Pass an SSE stream through event by event, rewriting `endpoint` events."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        while match := _EVENT_END.search(buffer):
            block, buffer = buffer[: match.end()], buffer[match.end() :]
            yield _rewrite_block(block, rewrite, name)
    if buffer:
        yield buffer


def _upstream_headers(request: Request, target: McpTarget, pinned: PinnedUrl) -> dict[str, str]:
    headers = {k: v for k in _FORWARD_REQUEST_HEADERS if (v := request.headers.get(k))}
    headers["host"] = pinned.host_header
    headers["accept-encoding"] = "identity"
    headers.update(target.headers)  # last: the configured credentials win
    return headers


async def _relay(resp: httpx.Response, target: McpTarget) -> AsyncIterator[bytes]:
    scrubbing = StreamScrubber(scrubber(target.secrets))
    name = target.name
    try:
        async for chunk in resp.aiter_bytes():
            if out := scrubbing.feed(chunk):
                yield out
        if out := scrubbing.finish():
            yield out
    except httpx.HTTPError as exc:
        log.info("mcp proxy %s: upstream stream ended: %s", name, type(exc).__name__)
    finally:
        await resp.aclose()


async def forward_mcp(
    name: str,
    relay_path: str | None,
    request: Request,
    tokens: TokenRegistry,
    http: httpx.AsyncClient,
    ask: Asker | None = None,
    memory_tools: MemoryToolbox | None = None,
) -> Response:
    token = _token(request)
    grant = tokens.get(token, request.scope.get(DOOR_SCOPE_KEY)) if token else None
    if grant is None:
        return _error(401, "Invalid or expired gateway token.")
    if name == QUESTION_SERVER and relay_path is None and ask is not None and grant.asks_user:
        return await serve_questions(grant.token, request, ask)
    held = grant.memory  # what the turn's agent holds of memories; None: no memory tools
    if name == MEMORY_SERVER and relay_path is None and memory_tools and held is not None:
        return await serve_memory(held, request, memory_tools)
    target: McpTarget | None = grant.mcp_servers.get(name) if _NAME.fullmatch(name) else None
    if target is None or (relay_path is not None and target.transport != "sse"):
        return _error(404, "No such MCP server for this turn.")
    url = target.url if relay_path is None else _relay_url(target, relay_path, request.url.query)
    if url is None:
        return _error(404, "No such MCP endpoint.")
    try:
        pinned = await pin_url(url, target.allow_private)
    except HostNotResolved:
        log.warning("mcp proxy %s: its host name does not resolve", name)
        return _error(502, "The MCP server could not be reached: its host name does not resolve.")
    except UrlRefused as exc:
        log.warning("mcp proxy %s: refused by the URL policy: %s", name, exc)
        return _error(403, "The MCP server's address is not allowed by this server's policy.")

    body: bytes | None = None
    if request.method == "POST":
        body = await read_capped(request, MAX_REQUEST_BYTES)
        if body is None:
            return _error(413, "Request body too large.")
    req = http.build_request(
        request.method,
        pinned.connect_url,
        headers=_upstream_headers(request, target, pinned),
        content=body,
        extensions={"sni_hostname": pinned.host},
    )
    try:
        resp = await http.send(req, stream=True)
    except httpx.HTTPError as exc:
        log.warning("mcp proxy %s: upstream unreachable: %s", name, type(exc).__name__)
        return _error(502, "The MCP server could not be reached.")
    if resp.status_code in (401, 403):
        await resp.aclose()
        log.warning("mcp proxy %s: upstream refused the credentials (%d)", name, resp.status_code)
        return _error(502, "The MCP server refused the configured credentials.")

    content: AsyncIterator[bytes] = _relay(resp, target)
    content_type = resp.headers.get("content-type", "")
    if target.transport == "sse" and relay_path is None and "text/event-stream" in content_type:
        content = _rewrite_endpoints(content, _endpoint_rewriter(target, name), name)
    headers = {k: v for k, v in resp.headers.items() if _FORWARD_RESPONSE_HEADERS.fullmatch(k)}
    return StreamingResponse(
        content,
        status_code=resp.status_code,
        headers={**headers, **_STREAM_HEADERS},
        background=BackgroundTask(resp.aclose),
    )


def make_mcp_router(
    tokens: TokenRegistry,
    http: httpx.AsyncClient,
    ask: Asker | None = None,
    memory_tools: MemoryToolbox | None = None,
) -> APIRouter:
    """Routes for MCP_PATH/<name> and, for legacy SSE servers, MCP_PATH/<name>/relay/...;
    `ask` serves the server's own question tool (gateway/user_questions.py), `memory_tools`
    its memory tools (gateway/memory_server.py)."""
    router = APIRouter(include_in_schema=False)
    methods = ["GET", "POST", "DELETE"]

    @router.api_route(MCP_PATH + "/{name}", methods=methods)
    async def mcp_endpoint(name: str, request: Request) -> Response:
        return await forward_mcp(name, None, request, tokens, http, ask, memory_tools)

    @router.api_route(MCP_PATH + "/{name}/relay/{path:path}", methods=methods)
    async def mcp_relay(name: str, path: str, request: Request) -> Response:
        return await forward_mcp(name, path, request, tokens, http)

    return router
