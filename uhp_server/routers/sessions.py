"""Sessions chapter: stopping whatever runs in a session."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from storage import sessions as session_store
from uhp_server.auth import CurrentPrincipal
from uhp_server.context import Ctx
from uhp_server.errors import ApiError

router = APIRouter()


@router.post("/v1/sessions/{session_id}/cancel")
async def cancel_session(
    session_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    session = session_store.get_session(ctx.db, principal.id, session_id)
    if session is None:
        raise ApiError(404, "session_not_found", "No session with that id.")
    run = ctx.runs.for_session(session.id)
    cancelled = None
    if run is not None and not run.log.finished:
        await ctx.runs.cancel(run)
        cancelled = run.response_id
    status = run.log.current()["status"] if run is not None else session.status
    result: dict[str, Any] = {"id": session.id, "object": "session", "status": status}
    if cancelled:
        result["cancelled_response_id"] = cancelled
    return result
