"""`GET /v1/harnesses/{id}/events` (Streaming §5): a live SSE feed of a harness's sessions.

Each event names its session and response: `session.created` when a task starts a new
session, then `response.created`, `response.in_progress`, `response.output_item.done` for
each finished item, and the terminal `response.completed` / `.incomplete` / `.failed`.
Numbered from 0 per connection; `: keep-alive` comments between events, like a task stream.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from uhp_server.doors.deps import EngineDep, SettingsDep, StreamsDep
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.sse import sse_response
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)


@router.get("/v1/harnesses/{harness_id}/events")
async def harness_events(
    harness_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    streams: StreamsDep,
) -> Any:
    async def answer() -> Any:
        events = await engine.harnesses.events(principal.id, harness_id)
        return sse_response(events, settings.keepalive_seconds)

    return await streams.serve(principal.id, answer)
