"""The server's own MCP server `uhp-user`: one tool, `ask_user`, for the agent to ask the user.

Offered to a turn (as `/gateway/mcp/uhp-user`, reached with the turn's gateway token like
every MCP server of the turn) only when its door can take a question (engine/turns/questions.py).
Streamable HTTP with JSON answers: a `tools/call` stays open until the user answers, the turn
is parked, or it stops. Stateless: no session id, no server-initiated stream.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

# The server and its one tool, by the names the agent sees (the engine offers them).
QUESTION_SERVER = "uhp-user"
QUESTION_TOOL = "ask_user"

# (grant token, question, options) -> the answer, or None when none came while it waited.
Asker = Callable[[str, str, tuple[str, ...]], Awaitable[str | None]]

PROTOCOL_VERSION = "2025-03-26"
MAX_BODY_BYTES = 1024 * 1024
TOOL = {
    "name": QUESTION_TOOL,
    "description": (
        "Ask the user a question and wait for the answer. Use it when you need a decision "
        "or information only the user has; do not guess instead."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, in full."},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Suggested answers, if the question has a few likely ones.",
            },
        },
        "required": ["question"],
    },
}
_NOT_ANSWERED = (
    "The user has not answered yet. Stop here and end your turn without further work: the "
    "answer will reach you in this conversation when it comes."
)


async def serve_questions(token: str, request: Request, ask: Asker) -> Response:
    if request.method != "POST":
        return Response(status_code=405, headers={"allow": "POST"})
    raw = await request.body()
    try:
        message = json.loads(raw) if len(raw) <= MAX_BODY_BYTES else None
    except (ValueError, RecursionError):  # not JSON, or nested past json's depth
        message = None
    if isinstance(message, list):
        answers = [a for m in message if (a := await _answer(token, m, ask)) is not None]
        return JSONResponse(answers) if answers else Response(status_code=202)
    answer = await _answer(token, message, ask)
    return JSONResponse(answer) if answer is not None else Response(status_code=202)


async def _answer(token: str, message: Any, ask: Asker) -> dict[str, Any] | None:
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return _error(None, -32600, "Invalid request.")
    if "id" not in message:
        return None  # a notification (e.g. notifications/initialized)
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
                "serverInfo": {"name": "uhp-user", "version": "1"},
            },
        )
    if method == "ping":
        return _result(call_id, {})
    if method == "tools/list":
        return _result(call_id, {"tools": [TOOL]})
    if method == "tools/call":
        return await _call(call_id, params, token, ask)
    return _error(call_id, -32601, f"Method not found: {method}")


async def _call(call_id: Any, params: dict[str, Any], token: str, ask: Asker) -> dict[str, Any]:
    if params.get("name") != QUESTION_TOOL:
        return _error(call_id, -32602, "Unknown tool.")
    raw_arguments = params.get("arguments")
    arguments: dict[str, Any] = raw_arguments if isinstance(raw_arguments, dict) else {}
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip():
        return _tool_text(call_id, "ask_user needs a non-empty 'question'.", error=True)
    listed = arguments.get("options") or []
    options = tuple(str(o) for o in listed) if isinstance(listed, list) else ()
    answer = await ask(token, question.strip(), options)
    if answer is None:
        return _tool_text(call_id, _NOT_ANSWERED, error=True)
    return _tool_text(call_id, answer)


def _tool_text(call_id: Any, text: str, *, error: bool = False) -> dict[str, Any]:
    return _result(call_id, {"content": [{"type": "text", "text": text}], "isError": error})


def _result(call_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "result": result}


def _error(call_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "error": {"code": code, "message": message}}
