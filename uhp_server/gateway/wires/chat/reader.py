"""Reading what a Chat Completions provider answers, whole or streamed, into one neutral
shape both target wires are built from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from uhp_server.gateway.wires.sse import SSEDecoder

# Where OpenAI-compatible servers put a reasoning model's thinking: `reasoning_content`
# (DeepSeek, vLLM before 0.10, llama.cpp) or `reasoning` (vLLM now, Ollama, OpenRouter).
REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass
class ToolCallDelta:
    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass
class ChatDelta:
    """What one streamed chunk (or a whole answer) said."""

    reasoning: str = ""
    text: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    error: dict | None = None
    refusal: str = ""


@dataclass
class Usage:
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    reasoning: int = 0


def reasoning_of(holder: dict) -> str:
    for key in REASONING_FIELDS:
        value = holder.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        prompt=_int(raw.get("prompt_tokens")),
        completion=_int(raw.get("completion_tokens")),
        cached=_int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else 0,
        reasoning=_int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else 0,
    )


def _tool_call_deltas(raw: object) -> list[ToolCallDelta]:
    calls = []
    for position, call in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        index = call.get("index")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send the object itself
            arguments = json.dumps(arguments)
        calls.append(
            ToolCallDelta(
                index=index if isinstance(index, int) else position,
                id=call.get("id") if isinstance(call.get("id"), str) else None,
                name=function.get("name") if isinstance(function.get("name"), str) else None,
                arguments=arguments if isinstance(arguments, str) else "",
            )
        )
    return calls


def _delta_of(chunk: dict, holder_key: str) -> ChatDelta:
    delta = ChatDelta(usage=chunk.get("usage") if isinstance(chunk.get("usage"), dict) else None)
    if isinstance(chunk.get("error"), dict | str):
        error = chunk["error"]
        delta.error = error if isinstance(error, dict) else {"message": error}
        return delta
    choices = chunk.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        return delta
    holder = choice.get(holder_key)
    if isinstance(holder, dict):
        delta.reasoning = reasoning_of(holder)
        content = holder.get("content")
        delta.text = content if isinstance(content, str) else ""
        refusal = holder.get("refusal")
        delta.refusal = refusal if isinstance(refusal, str) else ""
        delta.tool_calls = _tool_call_deltas(holder.get("tool_calls"))
    finish = choice.get("finish_reason")
    delta.finish_reason = finish if isinstance(finish, str) else None
    return delta


def completion_delta(completion: dict) -> ChatDelta:
    """A whole `chat.completion` as one delta (its message holds everything)."""
    return _delta_of(completion, "message")


class ChatStreamReader:
    """Streamed `chat.completion.chunk` bytes → ChatDelta, one per chunk; remembers the
    answer's id, model and whether the stream ended properly (`[DONE]` or a finish)."""

    def __init__(self) -> None:
        self._sse = SSEDecoder()
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self.done = False

    def feed(self, chunk: bytes) -> list[ChatDelta]:
        return self._read(self._sse.feed(chunk))

    def flush(self) -> list[ChatDelta]:
        return self._read(self._sse.flush())

    def _read(self, events: list) -> list[ChatDelta]:
        deltas = []
        for event in events:
            if event.data.strip() == "[DONE]":
                self.done = True
                continue
            try:
                chunk = json.loads(event.data)
            except ValueError:
                continue  # a keep-alive or a comment some servers send as data
            if not isinstance(chunk, dict):
                continue
            if self.id is None and isinstance(chunk.get("id"), str):
                self.id = chunk["id"]
                self.model = chunk.get("model") if isinstance(chunk.get("model"), str) else None
                created = chunk.get("created")
                self.created = created if isinstance(created, int) else None
            if event.event == "error" and "error" not in chunk:
                chunk = {"error": chunk}
            deltas.append(_delta_of(chunk, "delta"))
        return deltas
