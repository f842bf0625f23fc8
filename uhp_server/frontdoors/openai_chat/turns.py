"""The engine seam: start a chat turn, follow its events, record the answer's key.

INTERIM: built on TaskService.submit until the shared EngineTask lands.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from storage.models import HarnessRow
from uhp_server.context import AppContext
from uhp_server.frontdoors.openai_chat.conversation import ChatRequest


@dataclass(frozen=True)
class StartedTurn:
    response_id: str
    session_id: str
    created: int


async def start_turn(
    ctx: AppContext,
    principal_id: str,
    harness: HarnessRow,
    chat: ChatRequest,
    metadata: dict[str, str] | None,
    base_url: str,
) -> StartedTurn:
    body: dict[str, Any] = {
        "input": chat.input,
        "metadata": {**(metadata or {}), "harness_id": harness.id},
    }
    if chat.instructions:
        body["instructions"] = chat.instructions
    accepted = await ctx.tasks.submit(principal_id, body, None, base_url)
    run = accepted.run
    assert run is not None
    return StartedTurn(accepted.response_id, run.session_id, run.builder.response["created_at"])


async def follow(ctx: AppContext, response_id: str) -> AsyncIterator[dict[str, Any]]:
    run = ctx.runs.get(response_id)
    if run is None:
        return
    async for event in run.log.follow():
        yield event


async def cancel(ctx: AppContext, response_id: str) -> None:
    run = ctx.runs.get(response_id)
    if run is not None and not run.log.finished:
        await ctx.runs.cancel(run)


async def remember_answer(ctx: AppContext, turn: StartedTurn, digest: str) -> None:
    return None
