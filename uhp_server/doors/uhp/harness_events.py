"""`GET /v1/harnesses/{id}/events` (Streaming §5): a live SSE feed of a harness's sessions.

Each event names its session and response: `session.created` when a task starts a new
session, then `response.created`, `response.in_progress`, `response.output_item.done` for
each finished item, and the terminal `response.completed` / `.incomplete` / `.failed`.
Numbered from 0 per connection; `: keep-alive` comments between events, like a task stream.
Closed within about a second once the caller's key is revoked.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from uhp_server.doors.deps import EngineDep, SettingsDep, StreamsDep
from uhp_server.http.auth import CurrentPrincipal, still_authenticated
from uhp_server.http.sse import sse_response
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)


@router.get("/v1/harnesses/{harness_id}/events")
async def harness_events(
    harness_id: str,
    request: Request,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    streams: StreamsDep,
) -> Any:
    async def answer() -> Any:
        events = await engine.harnesses.events(principal.id, harness_id)
        allowed = still_authenticated(request, principal)  # closed once the key is revoked
        return sse_response(events, settings.keepalive_seconds, allowed)

    return await streams.serve(principal.id, answer)
