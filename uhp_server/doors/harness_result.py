"""The harness result object: one shape for every tool-like answer of a finished task.

`{"status", "text", "session_id", "files"}`: the UHP status, the final answer's text, the
UHP session id (pass it back to continue) and the artifacts the turn produced. The tool
doors (HTTP and MCP) and the AgentOS door answer with it; its JSON Schema and the tool's
input schema are published at `GET /oumi/tools/schemas` for a platform's tool definition.
"""

from __future__ import annotations

from typing import Any

from uhp_server.engine import TurnFile

STATUSES = ("completed", "incomplete", "failed", "cancelled")

RESULT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Harness result",
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(STATUSES)},
        "text": {"type": "string", "description": "The agent's final answer."},
        "session_id": {
            "type": "string",
            "description": "The UHP session; pass it back as session_id to continue it.",
        },
        "files": {
            "type": "array",
            "description": "The files the turn created or changed.",
            "items": {
                "type": "object",
                "properties": {
                    "filename": {"type": "string"},
                    "size": {"type": "integer", "minimum": 0},
                    "download_url": {"type": "string"},
                },
                "required": ["filename", "size", "download_url"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["status", "text", "session_id", "files"],
    "additionalProperties": False,
}

PROMPT_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200_000}

TOOL_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Harness tool input",
    "type": "object",
    "properties": {
        "prompt": {**PROMPT_SCHEMA, "description": "What the agent should do."},
        "session_id": {
            "type": "string",
            "description": "A session_id from an earlier result, to continue that session.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}


def answer_text(response: dict[str, Any]) -> str:
    """The final answer: the text of the response's last assistant message."""
    for item in reversed(response.get("output") or []):
        if item.get("type") == "message":
            parts = item.get("content") or []
            return "".join(p.get("text", "") for p in parts if p.get("type") == "output_text")
    return ""


def harness_result(response: dict[str, Any], files: list[TurnFile]) -> dict[str, Any]:
    """The result object of a finished response and the files its turn produced."""
    return {
        "status": response["status"],
        "text": answer_text(response),
        "session_id": response["metadata"]["session_id"],
        "files": [
            {"filename": f.filename, "size": f.size, "download_url": f.download_url} for f in files
        ],
    }


def failure_reason(response: dict[str, Any]) -> str:
    """Why a failed or cancelled turn ended, readable by a model."""
    error = response.get("error") or {}
    message = error.get("message") or f"The agent's turn ended {response['status']}."
    return message
