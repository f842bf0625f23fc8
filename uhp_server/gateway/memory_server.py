"""The server's own MCP server `uhp-memory`: the memory tools an agent holds during a turn
(Memories §9.1; what each does is engine/facade/memory_tools.py's).

Offered to a turn (as `/gateway/mcp/uhp-memory`, reached with the turn's gateway token like
every MCP server of the turn) when its agent holds a memory. The token stands for the turn,
and the turn for its harness's agent: every call acts as that agent, never as anyone the
request could name, and no provider credential enters the sandbox. Streamable HTTP with JSON
answers, stateless, as `uhp-user` (gateway/user_questions.py).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import JSONResponse, Response

MEMORY_SERVER = "uhp-memory"
PROTOCOL_VERSION = "2025-03-26"
MAX_BODY_BYTES = 1024 * 1024


class ToolAnswerLike(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def error(self) -> bool: ...


class MemoryToolbox(Protocol):
    """The tools, as the engine serves them for a turn's agent (`turn`: the grant's)."""

    async def offered(self, turn: Any) -> list[dict[str, Any]]: ...

    async def call(self, turn: Any, name: str, arguments: dict[str, Any]) -> ToolAnswerLike: ...


async def serve_memory(turn: Any, request: Request, tools: MemoryToolbox) -> Response:
    if request.method != "POST":
        return Response(status_code=405, headers={"allow": "POST"})
    raw = await request.body()
    try:
        message = json.loads(raw) if len(raw) <= MAX_BODY_BYTES else None
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, list):
        answers = [a for m in message if (a := await _answer(turn, m, tools)) is not None]
        return JSONResponse(answers) if answers else Response(status_code=202)
    answer = await _answer(turn, message, tools)
    return JSONResponse(answer) if answer is not None else Response(status_code=202)


async def _answer(turn: Any, message: Any, tools: MemoryToolbox) -> dict[str, Any] | None:
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return _error(None, -32600, "Invalid request.")
    if "id" not in message:
        return None  # a notification
    call_id, method = message["id"], message["method"]
    raw_params = message.get("params")
    params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
    if method == "initialize":
        version = params.get("protocolVersion")
        return _result(
            call_id,
            {
                "protocolVersion": version if isinstance(version, str) else PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": MEMORY_SERVER, "version": "1"},
            },
        )
    if method == "ping":
        return _result(call_id, {})
    if method == "tools/list":
        return _result(call_id, {"tools": await tools.offered(turn)})
    if method == "tools/call":
        name = params.get("name")
        raw_arguments = params.get("arguments")
        arguments = raw_arguments if isinstance(raw_arguments, dict) else {}
        if not isinstance(name, str):
            return _error(call_id, -32602, "Unknown tool.")
        answer = await tools.call(turn, name, arguments)
        content = [{"type": "text", "text": answer.text}]
        return _result(call_id, {"content": content, "isError": answer.error})
    return _error(call_id, -32601, f"Method not found: {method}")


def _result(call_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "result": result}


def _error(call_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": {"code": code, "message": message}}
