"""`GET /v1/harnesses/{id}/events` (Streaming §5): a live SSE feed of a harness's sessions.

Each event names its session and response: `session.created` when a task starts a new
session, then `response.created`, `response.in_progress`, `response.output_item.done` for
each finished item, and the terminal `response.completed` / `.incomplete` / `.failed`.
Numbered from 0 per connection; `: keep-alive` comments between events, like a task stream.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from storage import harnesses as harness_store
from uhp_server.context import Ctx
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.sse import sse_response
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)


@router.get("/v1/harnesses/{harness_id}/events")
async def harness_events(harness_id: str, principal: CurrentPrincipal, ctx: Ctx) -> Any:
    harness = await ctx.db.read(harness_store.get_harness, principal.id, harness_id)
    if harness is None:
        raise ApiError(404, "harness_not_found", "No harness with that id.", param="harness_id")
    cluster = ctx.runs.cluster
    if cluster is None:
        events = ctx.runs.feed.subscribe(principal.id, harness.id)
    else:  # the stream opens once the turns of other replicas reach it too
        async with cluster.events_heard():
            events = ctx.runs.feed.subscribe(principal.id, harness.id)
    return sse_response(events, ctx.settings.keepalive_seconds)
