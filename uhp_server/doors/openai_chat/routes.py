"""The routes of the Chat Completions door: models, and chat completions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from uhp_server.doors.deps import EngineDep, StreamsDep
from uhp_server.doors.openai_chat import turns
from uhp_server.doors.openai_chat.conversation import ChatRequest, answered, split_request
from uhp_server.doors.openai_chat.errors import openai_error_body, turn_failure
from uhp_server.doors.openai_chat.models import model_object, resolve_model
from uhp_server.doors.openai_chat.render import ChatRenderer
from uhp_server.doors.openai_chat.shapes import ChunkWriter, CompletionIds, completion
from uhp_server.doors.openai_chat.wire import (
    IGNORED_FIELDS_HEADER,
    ChatCompletionBody,
    header_list,
)
from uhp_server.engine import Engine, HarnessSummary
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.sse import SEPARATOR, STREAM_HEADERS, KeepAlive
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)
SESSION_HEADER = "UHP-Session-Id"
RESPONSE_HEADER = "UHP-Response-Id"
_cancels: set[asyncio.Task[None]] = set()  # cancels of abandoned streams, while they run


@router.get("/models")
async def list_models(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    harnesses = await engine.harnesses.summaries(principal.id)  # a new principal's defaults, as /v1
    return {"object": "list", "data": [model_object(row) for row in harnesses]}


@router.get("/models/{model:path}")
async def retrieve_model(
    model: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return model_object(resolve_model(await engine.harnesses.summaries(principal.id), model))


async def _harness_for(engine: Engine, principal_id: str, model: str) -> HarnessSummary:
    """The harness `model` names. Only a name not found (a new principal's first call may
    name a default harness not created yet) takes a job on the writer thread."""
    try:
        return resolve_model(
            await engine.harnesses.summaries(principal_id, create_defaults=False), model
        )
    except ApiError:
        return resolve_model(await engine.harnesses.summaries(principal_id), model)


@router.post("/chat/completions")
async def chat_completions(
    body: ChatCompletionBody,
    request: Request,
    principal: CurrentPrincipal,
    engine: EngineDep,
    streams: StreamsDep,
) -> Any:
    async def answer() -> Any:
        return await _complete(body, str(request.base_url), principal.id, engine)

    if body.stream:  # a place for the stream first: a refused one starts no turn
        return await streams.serve(principal.id, answer)
    return await answer()


async def _complete(
    body: ChatCompletionBody, base_url: str, principal_id: str, engine: Engine
) -> Any:
    chat = split_request(body.messages)
    harness = await _harness_for(engine, principal_id, body.model)
    ignored = body.ignored_fields()
    task = turns.engine_task(principal_id, harness, chat, body.metadata, ignored)
    turn = await turns.start_turn(engine, task, base_url)
    headers = {SESSION_HEADER: turn.session_id, RESPONSE_HEADER: turn.response_id}
    if ignored:
        headers[IGNORED_FIELDS_HEADER] = header_list(ignored)
    ids = CompletionIds.for_response(turn.response_id, turn.created, body.model)
    if body.stream:
        writer = ChunkWriter(ids, body.include_usage)
        return EventSourceResponse(
            _stream(engine, turn, chat, writer),
            headers={**STREAM_HEADERS, **headers},
            ping=engine.settings.keepalive_seconds,
            ping_message_factory=KeepAlive,
            sep=SEPARATOR,
        )
    renderer = ChatRenderer()
    async for event in turns.follow(engine, turn):
        renderer.feed(event)
    await _finish(engine, turn, chat, renderer)
    return JSONResponse(completion(ids, renderer), headers=headers)


async def _finish(
    engine: Engine, turn: turns.StartedTurn, chat: ChatRequest, renderer: ChatRenderer
) -> None:
    """Record the answered conversation's key, or raise the task's failure."""
    final = renderer.final or {"status": "failed"}
    if final["status"] in ("completed", "incomplete"):
        await turns.remember_answer(engine, turn, answered(chat, renderer.text))
        return
    raise turn_failure(final)


def _data(payload: Any) -> ServerSentEvent:
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return ServerSentEvent(data=text, sep=SEPARATOR)


async def _stream(
    engine: Engine, turn: turns.StartedTurn, chat: ChatRequest, writer: ChunkWriter
) -> AsyncIterator[ServerSentEvent]:
    renderer = ChatRenderer()
    finished = False
    try:
        yield _data(writer.opening())
        async for event in turns.follow(engine, turn):
            for piece in renderer.feed(event):
                yield _data(writer.piece(piece))
        finished = True
        final = renderer.final or {"status": "failed"}
        try:
            await _finish(engine, turn, chat, renderer)
        except ApiError as failure:
            yield _data(openai_error_body(failure.status, failure.code, failure.message, None))
            return
        for chunk in writer.closing(final):
            yield _data(chunk)
        yield _data("[DONE]")
    finally:
        if not finished and engine.settings.chat_cancel_on_disconnect:
            # The stream is being torn down (the client left): nothing awaits here, so the
            # cancel runs as a task of its own.
            task = asyncio.get_running_loop().create_task(turns.cancel(engine, turn))
            _cancels.add(task)
            task.add_done_callback(_cancels.discard)
