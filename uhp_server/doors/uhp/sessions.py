"""Sessions chapter: listing and inspecting sessions, stopping what runs in one, deleting one."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query

from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.wire import session_to_wire, turn_item
from uhp_server.engine import Session
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute)


def encode_cursor(row: Session) -> str:
    raw = json.dumps([row.created_at, row.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
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
async def list_sessions(
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: str | None = None,
    harness: str | None = None,
) -> dict[str, Any]:
    after = decode_cursor(cursor) if cursor else None
    rows, more = await engine.sessions.page(principal.id, limit, after, harness or None)
    retention = settings.session_retention_days
    return {
        "object": "list",
        "sessions": [session_to_wire(row, retention) for row in rows],
        # null exactly on the last page, even when that page is full (Sessions §2).
        "next_cursor": encode_cursor(rows[-1]) if more and rows else None,
    }


@router.get("/v1/sessions/{session_id}")
async def get_session(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep
) -> dict[str, Any]:
    session = await engine.sessions.get(principal.id, session_id)
    return session_to_wire(session, settings.session_retention_days)


@router.get("/v1/sessions/{session_id}/turns")
async def get_turns(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    turns = await engine.sessions.turns(principal.id, session_id)
    return {"object": "list", "session_id": session_id, "turns": [turn_item(t) for t in turns]}


# Sessions §6 names the first path; the second is the older one, kept for the clients that
# predate it (VERSIONING.md's known compromises). One handler: the same operation.
@router.delete("/v1/sessions/{session_id}")
@router.delete("/v1/traces/{session_id}")
async def delete_session(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    deleted = await engine.sessions.delete(principal.id, session_id)
    return {"id": deleted, "object": "session.deleted", "deleted": True}


@router.post("/v1/sessions/{session_id}/cancel")
async def cancel_session(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    cancelled = await engine.sessions.cancel(principal.id, session_id)
    result: dict[str, Any] = {"id": cancelled.id, "object": "session", "status": cancelled.status}
    if cancelled.cancelled_response_id:
        result["cancelled_response_id"] = cancelled.cancelled_response_id
    return result
