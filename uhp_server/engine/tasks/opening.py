"""An opening conversation, as the agent of a new session receives it.

A CLI agent takes one prompt per turn, so the earlier messages of a conversation a door
hands over (system, user, assistant, tool) are delivered faithfully in that prompt: system
messages join the system prompt, the rest become a transcript the agent reads before the
final user message, with every tool call and its result kept in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from uhp_server.engine.requests import ChatMessage

_TRANSCRIPT_HEAD = (
    "This conversation began before you joined it. The earlier messages, oldest first:"
)
_TRANSCRIPT_TAIL = "The user's latest message, which you now answer:"


def opening_system_text(opening: Sequence[ChatMessage]) -> str:
    """The opening's system messages, joined, for the system prompt."""
    return "\n\n".join(m.content for m in opening if m.role == "system" and m.content)


def opening_transcript(opening: Sequence[ChatMessage]) -> str:
    """The opening's other messages as a transcript ('' when there are none)."""
    blocks = [_block(m) for m in opening if m.role != "system"]
    blocks = [b for b in blocks if b]
    if not blocks:
        return ""
    return "\n\n".join([_TRANSCRIPT_HEAD, *blocks, _TRANSCRIPT_TAIL])


def with_opening(prompt: str, opening: Sequence[ChatMessage]) -> str:
    transcript = opening_transcript(opening)
    return f"{transcript}\n\n{prompt}" if transcript else prompt


def _block(message: ChatMessage) -> str:
    lines = []
    if message.role == "tool":
        lines.append(f"[tool result for call {message.tool_call_id or '?'}]")
    else:
        lines.append(f"[{message.role}]")
    if message.content:
        lines.append(message.content)
    for call in message.tool_calls:
        lines.append(f"[{message.role} called tool {call.name} (call {call.id}): {call.arguments}]")
    return "\n".join(lines) if len(lines) > 1 else ""
