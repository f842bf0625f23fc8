"""The door's use of the engine: start a chat turn, follow it, record the answer's key.

A request whose history has a recorded key continues that session (SessionKey of door
`openai_chat`); one without an earlier answer starts a new session with no key. Either way,
once answered, the conversation's new digest becomes the session's one key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from uhp_server.doors.openai_chat.conversation import DOOR, ChatRequest
from uhp_server.engine import (
    ChatMessage,
    Engine,
    EngineTask,
    HarnessSummary,
    QuestionPolicy,
    SessionKey,
)


@dataclass(frozen=True)
class StartedTurn:
    principal_id: str
    harness_id: str
    response_id: str
    session_id: str
    created: int


def engine_task(
    principal_id: str,
    harness: HarnessSummary,
    chat: ChatRequest,
    metadata: dict[str, str] | None,
    ignored_fields: list[str],
) -> EngineTask:
    digest = chat.history_digest
    return EngineTask(
        principal_id=principal_id,
        harness_id=harness.id,
        input=chat.input,
        # System messages travel as instructions on every turn, so not in the opening too.
        opening=tuple(ChatMessage(t.role, t.content) for t in chat.history if t.role != "system"),
        session=SessionKey(DOOR, digest) if digest else None,
        questions=QuestionPolicy.none(),  # a chat completion cannot pause for an answer
        instructions=chat.instructions or None,
        metadata=metadata or {},
        # Environments §5: the task's own environment travels in its metadata here too.
        environment=(metadata or {}).get("environment") or None,
        memory=(metadata or {}).get("memory") or None,  # Memories §9, as on /v1/responses
        ignored_fields=tuple(ignored_fields),
    )


async def start_turn(engine: Engine, task: EngineTask, base_url: str) -> StartedTurn:
    accepted = await engine.start(task, base_url=base_url)
    if accepted.fresh:  # always, without an idempotency key; saves a read
        response = await accepted.response(wait=False)
    else:
        response = (await engine.state(task.principal_id, accepted.response_id)).response
    metadata = response["metadata"]
    return StartedTurn(
        task.principal_id,
        metadata["harness_id"],
        accepted.response_id,
        metadata["session_id"],
        response["created_at"],
    )


async def follow(engine: Engine, turn: StartedTurn) -> AsyncIterator[dict[str, Any]]:
    async for event in engine.follow(turn.principal_id, turn.response_id):
        yield event


async def cancel(engine: Engine, turn: StartedTurn) -> None:
    await engine.cancel(turn.principal_id, turn.response_id)


async def remember_answer(engine: Engine, turn: StartedTurn, digest: str) -> None:
    """The session's one key becomes `digest`: only its latest answer continues it."""
    key = SessionKey(DOOR, digest)
    await engine.rekey_door_session(turn.principal_id, turn.harness_id, key, turn.session_id)
