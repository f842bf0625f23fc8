"""`POST /mcp`: a Streamable HTTP MCP server where each harness of the caller is one tool.

Hand-written rather than the `mcp` SDK's server: the platform sends a stateless `tools/call`
with no `initialize`, ordinary clients run a whole session, and both must be served by one
stateless endpoint behind this server's own bearer authentication and call budget. What a
tools-only stateless server needs of the protocol is small — `initialize`, `ping`,
`tools/list`, `tools/call`, notifications accepted — whereas the SDK's session manager
brings its own task group and lifespan into the app. No session id is issued, so every
request stands alone; `GET` (a server-initiated stream) is answered 405, as the transport
allows. The official SDK's client is what the tests drive it with.

JSON-RPC errors are kept for protocol faults (bad JSON, an unknown method or tool); whatever
goes wrong with a call itself is a tool result with `isError: true` the model can read.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from uhp_server import __version__
from uhp_server.doors.oumi_tools.calls import (
    Refusal,
    parse_arguments,
    parse_budget,
    run_tool_call,
)
from uhp_server.doors.oumi_tools.reading import read_json
from uhp_server.doors.oumi_tools.tools import harness_tools
from uhp_server.engine import Engine
from uhp_server.http.auth import require_principal

router = APIRouter()

SESSION_META = "ai.oumi/sessionId"
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


class ProtocolFault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@router.get("/mcp")
@router.delete("/mcp")
def no_stream() -> Response:
    return Response(status_code=405, headers={"Allow": "POST"})


@router.post("/mcp")
async def mcp_endpoint(request: Request) -> Response:
    principal = await require_principal(request)  # before a byte of the body is read
    try:
        message = await read_json(request)
    except Refusal as refusal:
        return _reply(request, _error(None, PARSE_ERROR, refusal.reason), 400)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _reply(request, _error(None, INVALID_REQUEST, "Expected one JSON-RPC 2.0 message."))
    if "method" not in message or "id" not in message:
        return Response(status_code=202)  # a notification or a response: accepted
    request_id = message["id"]
    if not valid_request_id(request_id) or not isinstance(message["method"], str):
        # JSON-RPC 2.0: a request id is a string or a number (MCP forbids null), so no
        # request can be answered under this one: Invalid Request, with id null.
        reason = "A request id must be a string or a number, and its method a string."
        return _reply(request, _error(None, INVALID_REQUEST, reason))
    try:
        result = await _dispatch(request, principal.id, message)
    except ProtocolFault as fault:
        return _reply(request, _error(request_id, fault.code, fault.message))
    return _reply(request, {"jsonrpc": "2.0", "id": request_id, "result": result})


async def _dispatch(request: Request, principal_id: str, message: dict[str, Any]) -> Any:
    engine: Engine = request.app.state.engine
    method, params = message["method"], message.get("params") or {}
    if not isinstance(params, dict):
        raise ProtocolFault(INVALID_PARAMS, "params must be an object.")
    if method == "initialize":
        return _initialize(params)
    if method == "ping":
        return {}
    if method == "tools/list":
        harnesses = await engine.harnesses.summaries(principal_id)
        return {"tools": harness_tools(harnesses, engine.bases)}
    if method == "tools/call":
        return await _call(request, engine, principal_id, params)
    raise ProtocolFault(METHOD_NOT_FOUND, f"Method '{str(method)[:60]}' is not supported.")


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "uhp-server", "title": "UHP Server", "version": __version__},
        "instructions": "Each tool runs one of your harnesses (a coding agent in a sandbox) on "
        "a prompt; pass a result's session_id back to continue that session.",
    }


async def _call(
    request: Request, engine: Engine, principal_id: str, params: dict[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str) or not name:
        raise ProtocolFault(INVALID_PARAMS, "tools/call needs a tool name.")
    if await engine.harnesses.summary(principal_id, name) is None:
        raise ProtocolFault(INVALID_PARAMS, f"Unknown tool '{name[:80]}'.")
    meta = params.get("_meta") or {}
    external = meta.get(SESSION_META) if isinstance(meta, dict) else None
    try:
        budget = parse_budget(
            request.query_params.get("timeout_seconds"), engine.settings.tool_timeout_seconds
        )
        arguments = parse_arguments(params.get("arguments") or {})
        if external is not None and not (isinstance(external, str) and 0 < len(external) <= 256):
            raise Refusal(400, f"_meta['{SESSION_META}'] must be a string of 1 to 256 characters.")
        base_url = engine.settings.public_base_url or str(request.base_url)
        result = await run_tool_call(
            engine, principal_id, name, arguments, budget, base_url, external_session=external
        )
    except Refusal as refusal:
        refused: dict[str, Any] = {
            "content": [{"type": "text", "text": refusal.reason}],
            "isError": True,
        }
        if refusal.result is not None:
            refused["structuredContent"] = refusal.result
        return refused
    text = json.dumps(result, ensure_ascii=False)
    return {"content": [{"type": "text", "text": text}], "structuredContent": result}


def valid_request_id(request_id: Any) -> bool:
    return isinstance(request_id, str | int | float) and not isinstance(request_id, bool)


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _reply(request: Request, message: dict[str, Any], status: int = 200) -> Response:
    """JSON when the client accepts it, else the one message as an SSE stream."""
    accept = request.headers.get("accept", "")
    if "application/json" in accept or "*/*" in accept or "text/event-stream" not in accept:
        return JSONResponse(message, status_code=status)
    data = json.dumps(message, ensure_ascii=False)
    return Response(
        f"event: message\ndata: {data}\n\n",
        status_code=status,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store"},
    )
