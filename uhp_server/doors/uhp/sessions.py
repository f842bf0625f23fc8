"""Sessions chapter: listing and inspecting sessions, stopping what runs in one, deleting one."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query

from storage import session_listing
from storage import sessions as session_store
from storage.tables import SessionRow
from uhp_server.context import Ctx
from uhp_server.doors.uhp.files import session_or_404
from uhp_server.engine.history import session_turns, turn_item
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)


def session_to_wire(row: SessionRow, retention_days: float) -> dict[str, Any]:
    """The protocol's Session, plus where its artifacts live and when it expires."""
    return {
        "id": row.id,
        "object": "session",
        "harness_id": row.harness_id,
        "title": row.title,
        "status": row.status,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "container_id": row.container_id,
        "expires_at": int(row.updated_at + retention_days * 86400),
    }


def _encode_cursor(row: SessionRow) -> str:
    raw = json.dumps([row.created_at, row.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    """An opaque cursor back to its (created_at, id) position; 400 when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, session_id = json.loads(raw)
        # Exactly what we mint: a 64-bit integer time and a plain ASCII id.
        if (
            type(created_at) is int
            and 0 <= created_at < 2**62
            and isinstance(session_id, str)
            and session_id.isascii()
            and session_id.isprintable()
        ):
            return created_at, session_id
    except (binascii.Error, ValueError, TypeError, RecursionError):  # nested past json's depth
        pass
    raise ApiError(400, "invalid_input", "The cursor is not valid.", param="cursor")


@router.get("/v1/sessions")
def list_sessions(
    principal: CurrentPrincipal,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: str | None = None,
    harness: str | None = None,
) -> dict[str, Any]:
    after = _decode_cursor(cursor) if cursor else None
    rows, more = ctx.db.run(session_listing.page, principal.id, limit, after, harness or None)
    retention = ctx.settings.session_retention_days
    return {
        "object": "list",
        "sessions": [session_to_wire(row, retention) for row in rows],
        # null exactly on the last page, even when that page is full (Sessions §2).
        "next_cursor": _encode_cursor(rows[-1]) if more and rows else None,
    }


@router.get("/v1/sessions/{session_id}")
def get_session(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    return session_to_wire(session, ctx.settings.session_retention_days)


@router.get("/v1/sessions/{session_id}/turns")
def get_turns(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    turns = ctx.db.run(session_turns, ctx.runs, session.id)
    return {"object": "list", "session_id": session.id, "turns": [turn_item(t) for t in turns]}


@router.delete("/v1/traces/{session_id}")
async def delete_trace(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = await ctx.db.read(session_or_404, ctx, principal, session_id)
    await ctx.traces.delete(session.id)
    return {"id": session.id, "object": "session.deleted", "deleted": True}


@router.post("/v1/sessions/{session_id}/cancel")
async def cancel_session(
    session_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    session = await ctx.db.read(session_store.get_session, principal.id, session_id)
    if session is None:
        raise ApiError(404, "session_not_found", "No session with that id.")
    run = ctx.runs.for_session(session.id)
    cancelled = None
    if run is not None and not run.log.finished:
        await ctx.runs.cancel(run)
        cancelled = run.response_id
    elif run is None and session.active_response_id:  # it runs on another replica
        await ctx.runs.cancel_elsewhere(session.active_response_id)
        cancelled = session.active_response_id
        session = await ctx.db.read(session_store.get_session, principal.id, session_id)
        if session is None:
            raise ApiError(404, "session_not_found", "No session with that id.")
    status = run.log.current()["status"] if run is not None else session.status
    result: dict[str, Any] = {"id": session.id, "object": "session", "status": status}
    if cancelled:
        result["cancelled_response_id"] = cancelled
    return result
