"""A Chat Completions answer, streamed or whole, as Gemini API answers: the
`GenerateContentResponse` chunks Gemini CLI reads from `:streamGenerateContent?alt=sse`, and
the whole response of `:generateContent`.

Text and thoughts go out as they arrive, one chunk per delta. The Gemini API carries a
function call whole (its `args` are an object, never fragments), so a call's streamed
arguments are gathered and the calls go out in the last chunk, with the finish reason and
the usage, as Gemini itself sends them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from uhp_server.gateway.wires.chat.reader import (
    ChatDelta,
    ChatStreamReader,
    completion_delta,
    usage_of,
)
from uhp_server.gateway.wires.chat.translated_stream import (
    EARLY_END,
    TranslatedStream,
    arguments_object,
)
from uhp_server.gateway.wires.gemini.errors import gemini_error
from uhp_server.gateway.wires.sse import encode

FINISH_REASONS = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}


@dataclass
class _Call:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def part(self) -> dict:
        call: dict = {"name": self.name, "args": arguments_object("".join(self.arguments))}
        if self.id:
            call["id"] = self.id
        return {"functionCall": call}


@dataclass
class CandidateBuilder:
    """The answer being built; `chunks` holds each streamed response once it is due."""

    id: str = ""
    model: str = ""
    parts: list[dict] = field(default_factory=list)
    chunks: list[dict] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict | None = None
    error: dict | None = None
    _calls: dict[int, _Call] = field(default_factory=dict)

    def start(self, chat_id: str | None, model: str | None) -> None:
        self.id = chat_id or f"resp_{secrets.token_hex(12)}"
        self.model = model or ""

    def apply(self, delta: ChatDelta) -> None:
        if self.error is not None:
            return
        if delta.error is not None:
            self.error = delta.error
            return
        if delta.reasoning:
            self._say({"text": delta.reasoning, "thought": True})
        if delta.text or delta.refusal:
            self._say({"text": delta.text + delta.refusal})
        for fragment in delta.tool_calls:
            call = self._calls.setdefault(fragment.index, _Call())
            call.id = call.id or fragment.id
            call.name = call.name or fragment.name or ""
            if fragment.arguments:
                call.arguments.append(fragment.arguments)
        if delta.finish_reason:
            self.finish_reason = delta.finish_reason
        if delta.usage is not None:
            self.usage = delta.usage

    def end(self, stream_done: bool) -> None:
        if self.error is None and not (stream_done or self.finish_reason):
            self.error = {"message": EARLY_END}
        if self.error is not None:
            return
        calls = [self._calls[index].part() for index in sorted(self._calls)]
        self.parts.extend(calls)
        last = self._chunk(calls)
        last["candidates"][0]["finishReason"] = self.gemini_finish_reason()
        last["usageMetadata"] = self.usage_metadata()
        self.chunks.append(last)

    def failure(self) -> dict:
        return gemini_error(500, str(self.error.get("message") or EARLY_END) if self.error else "")

    def gemini_finish_reason(self) -> str:
        return FINISH_REASONS.get(self.finish_reason or "stop", "OTHER")

    def usage_metadata(self) -> dict:
        usage = usage_of(self.usage)
        if usage is None:
            return {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0}
        # Gemini counts thoughts apart from the candidates; Chat's completion holds both.
        metadata = {
            "promptTokenCount": usage.prompt,
            "candidatesTokenCount": max(0, usage.completion - usage.reasoning),
            "totalTokenCount": usage.prompt + usage.completion,
        }
        if usage.reasoning:
            metadata["thoughtsTokenCount"] = usage.reasoning
        if usage.cached:
            metadata["cachedContentTokenCount"] = usage.cached
        return metadata

    def response(self) -> dict:
        """The whole answer (for `:generateContent`), parts of a kind merged."""
        merged: list[dict] = []
        for part in self.parts:
            previous = merged[-1] if merged else {}
            same_kind = "text" in previous and "text" in part
            if same_kind and previous.get("thought") == part.get("thought"):
                previous["text"] += part["text"]
            else:
                merged.append(dict(part))
        answer = self._chunk(merged)
        answer["candidates"][0]["finishReason"] = self.gemini_finish_reason()
        answer["usageMetadata"] = self.usage_metadata()
        return answer

    def _say(self, part: dict) -> None:
        self.parts.append(part)
        self.chunks.append(self._chunk([part]))

    def _chunk(self, parts: list[dict]) -> dict:
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
        return {"candidates": [candidate], "modelVersion": self.model, "responseId": self.id}


class GeminiStream(TranslatedStream[CandidateBuilder]):
    """Chat SSE bytes in, Gemini SSE bytes out (`data:` lines only, as `alt=sse` sends)."""

    def __init__(self) -> None:
        super().__init__(CandidateBuilder())

    def _begin(self, reader: ChatStreamReader) -> None:
        self._builder.start(reader.id, reader.model)

    def _take(self) -> bytes:
        chunks, self._builder.chunks = self._builder.chunks, []
        return b"".join(encode(chunk) for chunk in chunks)

    def _closing(self) -> bytes:
        return encode(self._builder.failure()) if self._builder.error is not None else b""


def translate_completion(completion: dict) -> dict:
    """A whole `chat.completion` as a `GenerateContentResponse` (errors: Gemini's error)."""
    builder = CandidateBuilder()
    builder.start(completion.get("id"), completion.get("model"))
    builder.apply(completion_delta(completion))
    builder.end(stream_done=True)
    if builder.error is not None:
        return builder.failure()
    return builder.response()
