"""Which session a Chat Completions request continues.

Chat clients resend the whole history on every call and keep no id of ours. After each
answer the door records, as the session's external id (a SessionKey of door `openai_chat`),
a digest of the conversation up to and including that answer. A request whose history, up
to its last assistant message, has that digest continues the session; any other history
(a new chat, an edited or regenerated one, one from elsewhere) starts a new session with
that history as its opening conversation.

The digest covers each message's role and text, normalised so clients that round-trip a
history imperfectly still match: reasoning they folded into the text (`<think>` blocks,
Open WebUI's `<details type="reasoning">`) is dropped, and every run of whitespace counts
as one space. Only a session's latest answer is recorded, so a history that forks from an
earlier point never lands in a session whose agent has already moved on.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from uhp_server.doors.openai_chat.wire import message_text
from uhp_server.errors import ApiError

DOOR = "openai_chat"
_FOLDED_REASONING = re.compile(
    r"<think>.*?</think>|<details[^>]*type=\"reasoning\"[^>]*>.*?</details>", re.DOTALL
)
_ROLE_NAMES = {"developer": "system", "function": "tool"}


@dataclass(frozen=True)
class Turn:
    """One message of the history, as the digest and the opening conversation see it."""

    role: str  # system | user | assistant | tool
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """A request's history split the way the engine takes it."""

    history: tuple[Turn, ...]  # everything before the new user message(s)
    latest: tuple[Turn, ...]  # the trailing user message(s): what the agent answers now
    instructions: str  # the system and developer messages, joined

    @property
    def input(self) -> str:
        return "\n\n".join(turn.content for turn in self.latest)

    @property
    def history_digest(self) -> str | None:
        """The key of the session this continues; None when there is no earlier answer."""
        if not any(turn.role == "assistant" for turn in self.history):
            return None
        return conversation_digest(self.history)


def normalised(role: str, text: str) -> str:
    if role == "assistant":
        text = _FOLDED_REASONING.sub(" ", text)
    return " ".join(text.split())


def conversation_digest(turns: tuple[Turn, ...] | list[Turn]) -> str:
    """The key a conversation is recorded under (hex sha256 of its normalised messages)."""
    canonical = [[turn.role, normalised(turn.role, turn.content)] for turn in turns]
    payload = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def split_request(messages: list[dict[str, Any]]) -> ChatRequest:
    """The history, the new input (the trailing user messages) and the instructions."""
    turns = [
        Turn(_ROLE_NAMES.get(m["role"], m["role"]), message_text(m, i))
        for i, m in enumerate(messages)
    ]
    first_new = len(turns)
    while first_new > 0 and turns[first_new - 1].role == "user":
        first_new -= 1
    if first_new == len(turns):
        raise ApiError(
            400,
            "invalid_request",
            "The last message must be a user message: it is what the agent answers.",
            param="messages",
        )
    latest = tuple(turns[first_new:])
    if not any(turn.content.strip() for turn in latest):
        raise ApiError(400, "invalid_request", "The last user message is empty.", param="messages")
    instructions = [t.content for t in turns if t.role == "system" and t.content.strip()]
    return ChatRequest(tuple(turns[:first_new]), latest, "\n\n".join(instructions))


def answered(request: ChatRequest, answer: str) -> str:
    """The key of the conversation once `answer` is appended: the next request's history."""
    return conversation_digest([*request.history, *request.latest, Turn("assistant", answer)])
