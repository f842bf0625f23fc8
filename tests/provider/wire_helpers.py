"""What the scripted provider's own tests share: its key and models, tool shapes of each wire,
an image, and readers of its answers."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction
from openai.types.responses import EasyInputMessageParam, FunctionToolParam

KEY = "sk-scripted-test"
MODELS = ["gpt-test", "gpt-test-mini", "claude-test"]
# The tools as the SDKs type them (Codex's own carry `strict` too; the provider reads neither).
EXEC_COMMAND: FunctionToolParam = {
    "type": "function",
    "name": "exec_command",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
    },
}
CHAT_SHELL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "shell",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            "required": ["command"],
        },
    },
}
BASH = {
    "name": "Bash",
    "description": "run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
        "required": ["command"],
    },
}
CODEX_OUTPUT = "Chunk ID: 1\nWall time: 0.01 seconds\nProcess exited with code 0\nOutput:\nhi\n"

PARALLEL_SCRIPT = "PARALLEL RUN echo alpha\nPARALLEL RUN echo beta\nSAY got {outputs}"
PNG = bytes.fromhex("89504e470d0a1a0a") + b"scripted image bytes"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PNG_SEEN = f"image/png {len(PNG)}B sha256:{hashlib.sha256(PNG).hexdigest()[:12]}"


def anthropic_headers(key: str = KEY) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


def sse_events(text: str) -> list[tuple[str | None, Any]]:
    """Parse an SSE body into (event name, parsed data) pairs."""
    events = []
    for block in text.strip().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                raw = line[len("data: ") :]
                data = raw if raw == "[DONE]" else json.loads(raw)
        events.append((name, data))
    return events


def function_of(call: ChoiceDeltaToolCall) -> ChoiceDeltaToolCallFunction:
    """A streamed tool call's function part (the provider sends one in every piece)."""
    assert call.function is not None, call
    return call.function


def user(text: str) -> EasyInputMessageParam:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
