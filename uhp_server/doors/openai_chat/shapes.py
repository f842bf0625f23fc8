"""OpenAI's Chat Completions objects: chat.completion, chat.completion.chunk and usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uhp_server.doors.openai_chat.render import ChatRenderer, Piece

# How a finished task's status reads as a finish_reason (failed and cancelled are errors).
FINISH_REASONS = {"completed": "stop", "incomplete": "length"}


def chat_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """The task's Responses-style usage in Chat Completions' names."""
    if not usage:
        return None
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    cached = int(usage.get("cache_read_tokens") or 0)
    reasoning = int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


@dataclass(frozen=True)
class CompletionIds:
    """What every object of one answer repeats."""

    id: str  # chatcmpl-<response id>: the task behind it stays findable
    created: int
    model: str  # the model name the client sent

    @classmethod
    def for_response(cls, response_id: str, created: int, model: str) -> CompletionIds:
        return cls(f"chatcmpl-{response_id}", created, model)


def completion(ids: CompletionIds, renderer: ChatRenderer) -> dict[str, Any]:
    """The blocking answer: one chat.completion."""
    final = renderer.final or {}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": renderer.text,
        "refusal": None,
        "annotations": [],
    }
    if renderer.reasoning_text:
        message["reasoning_content"] = renderer.reasoning_text
    return {
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": FINISH_REASONS.get(final.get("status", ""), "stop"),
            }
        ],
        "usage": chat_usage(final.get("usage")),
        "system_fingerprint": None,
    }


class ChunkWriter:
    """chat.completion.chunk objects for one streamed answer."""

    def __init__(self, ids: CompletionIds, include_usage: bool) -> None:
        self.ids = ids
        self.include_usage = include_usage

    def _chunk(self, choices: list[dict[str, Any]], usage: Any = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.ids.id,
            "object": "chat.completion.chunk",
            "created": self.ids.created,
            "model": self.ids.model,
            "system_fingerprint": None,
            "choices": choices,
        }
        if self.include_usage:
            chunk["usage"] = usage  # null on every chunk but the last, as OpenAI sends it
        return chunk

    def _choice(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}

    def opening(self) -> dict[str, Any]:
        return self._chunk([self._choice({"role": "assistant", "content": ""})])

    def piece(self, piece: Piece) -> dict[str, Any]:
        delta = {"content": piece.content} if piece.content else {}
        if piece.reasoning:
            delta["reasoning_content"] = piece.reasoning
        return self._chunk([self._choice(delta)])

    def closing(self, final: dict[str, Any]) -> list[dict[str, Any]]:
        reason = FINISH_REASONS.get(final.get("status", ""), "stop")
        chunks = [self._chunk([self._choice({}, reason)])]
        if self.include_usage:
            usage = chat_usage(final.get("usage")) or chat_usage({"input_tokens": 0})
            chunks.append(self._chunk([], usage))
        return chunks
