"""A session page's live stream: the running turn followed event by event, over Server-Sent
Events, as `GET /v1/responses/{id}?stream=true` follows it (the same `engine.events` call,
the same place among the principal's open streams).

The page gets HTML, never the agent's raw events: each message is the running turn rendered
as the page renders it (autoescaped templates, Markdown with raw HTML off), and the questions
it waits on with their answer forms, so nothing the agent says can become markup. Events that
arrive together are folded into one message (a burst of text deltas is one render), so the
page stays as close behind the API's stream as one render. Each message's id is the response
and the last sequence number it covers: a reconnecting browser sends it back (Last-Event-ID)
and is sent only what came after.

The sign-in is looked up again while the stream is open (http/while_allowed.py: about once
a second): once it has ended, by sign-out, expiry or its key's revocation, the stream says
`end` and sends nothing more of the turn; the page then reloads onto the sign-in form.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute
from uhp_server.doors.console.render import PAGE_HEADERS, fragment
from uhp_server.doors.deps import EngineDep, SettingsDep, StreamsDep
from uhp_server.doors.uhp.share_page.render import STATUS_LABELS, render_turn
from uhp_server.engine import TERMINAL_TYPES, Folding, Turn, pending_questions
from uhp_server.http.sse import SEPARATOR, STREAM_HEADERS, KeepAlive
from uhp_server.http.while_allowed import while_allowed

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

_EVENT_ID = re.compile(r"([A-Za-z0-9_-]{1,200})\.([0-9]{1,15})")
_END = None  # what the pump queues once the turn's events have all been read


@dataclass(frozen=True)
class Following:
    """The turn a stream follows: its place in the session, and what the page already has."""

    session_id: str
    number: int  # 1 for the session's first turn, as the page numbers them
    turn: Turn
    after: int  # the last sequence number the page was sent (-1: none)


def resume_after(last_event_id: str | None, response_id: str) -> int:
    """The sequence number a reconnecting page last got of this response, or -1 (a new
    page, a header that is not one of ours, or an id of an earlier turn)."""
    matched = _EVENT_ID.fullmatch((last_event_id or "").strip())
    if matched is None or matched.group(1) != response_id:
        return -1
    return int(matched.group(2))


@router.get(PREFIX + "/sessions/{session_id}/live")
async def session_live(
    session_id: str,
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    streams: StreamsDep,
) -> Response:
    """The session's latest turn, live until it ends or the sign-in does; then an `end`
    message (the page is rendered again, its controls being the server's)."""
    visitor = await guard.visitor(request)
    shown = await engine.sessions.turn_page(visitor.principal.id, session_id, 1)
    if not shown.turns:
        return _stream(_ended(), settings.keepalive_seconds)
    latest = shown.turns[-1]
    following = Following(
        session_id,
        shown.total,
        latest,
        resume_after(request.headers.get("last-event-id"), latest.id),
    )

    async def still_signed_in() -> bool:
        # Looked up with its key, as every page is: sign-out and revocation end it.
        return await engine.sign_ins.live(visitor.cookie) is not None

    async def answer() -> Response:
        events = while_allowed(
            await engine.events(visitor.principal.id, latest.id), still_signed_in
        )
        return _stream(_messages(visitor, following, events), settings.keepalive_seconds)

    return await streams.serve(visitor.principal.id, answer)


def _stream(messages: AsyncIterator[ServerSentEvent], keepalive_seconds: float) -> Response:
    return EventSourceResponse(
        messages,
        headers={**PAGE_HEADERS, **STREAM_HEADERS},
        ping=keepalive_seconds,
        ping_message_factory=KeepAlive,
        sep=SEPARATOR,
    )


async def _ended() -> AsyncIterator[ServerSentEvent]:
    yield ServerSentEvent(data="{}", event="end", sep=SEPARATOR)


async def _messages(
    visitor: Visitor, following: Following, events: AsyncIterator[dict[str, Any]]
) -> AsyncIterator[ServerSentEvent]:
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    pump = asyncio.create_task(_pump(events, queue))
    folding = Folding()
    sent = following.after
    try:
        while True:
            batch = [await queue.get()]
            while not queue.empty():  # whatever came with it: one render for the burst
                batch.append(queue.get_nowait())
            last = sent
            ended = False
            for event in batch:
                if event is _END:
                    ended = True
                    break
                folding.apply(event)
                last = event["sequence_number"]
                ended = ended or event["type"] in TERMINAL_TYPES
            if last > sent and folding.started:
                sent = last
                yield _turn_message(visitor, following, folding.response, last)
            if ended:
                yield ServerSentEvent(data="{}", event="end", sep=SEPARATOR)
                return
    finally:
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump


async def _pump(
    events: AsyncIterator[dict[str, Any]], queue: asyncio.Queue[dict[str, Any] | None]
) -> None:
    """Read the turn's events into the queue as they come; _END after the last one."""
    try:
        async for event in events:
            queue.put_nowait(event)
    finally:
        queue.put_nowait(_END)


def _turn_message(
    visitor: Visitor, following: Following, response: dict[str, Any], sequence: int
) -> ServerSentEvent:
    status = response["status"]
    turn = replace(following.turn, response=response, status=status)
    # Links in the turn are relative to the session's page: <id>/files/<file>.
    rendered = render_turn(following.session_id, following.number, turn)
    running = status == "in_progress"
    asked = pending_questions(response) if running and turn.store else ()
    questions = fragment(
        "questions.html",
        visitor=visitor,
        session_id=following.session_id,
        questions=[{"call_id": q.call_id, "text": q.text, "options": q.options} for q in asked],
    )
    message = {
        "number": following.number,
        "key": rendered.key,
        "html": rendered.html,
        "status": status,
        "status_label": STATUS_LABELS.get(status, status),
        "running": running,
        "questions": questions,
    }
    return ServerSentEvent(
        data=json.dumps(message, separators=(",", ":")),
        event="turn",
        id=f"{turn.id}.{sequence}",
        sep=SEPARATOR,
    )
