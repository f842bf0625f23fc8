"""The principal's own keys (create, shown once; list; revoke) and its usage (turns and
tokens per harness per day), through the engine's `principals` and `usage` chapters."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.share_page.render import when
from uhp_server.engine import Engine
from uhp_server.errors import ApiError

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

KEYS = PREFIX + "/keys"


async def _keys_page(engine: Engine, visitor: Visitor, new_key: str | None = None) -> Response:
    found = await engine.principals.keys_of(visitor.principal.id)
    rows = [
        {
            "id": k.id,
            "created": when(k.created_at),
            "revoked": when(k.revoked_at) if k.revoked_at is not None else None,
        }
        for k in found
    ]
    return page("keys.html", visitor=visitor, section="keys", keys=rows, new_key=new_key)


@router.get(KEYS)
async def keys_page(request: Request, engine: EngineDep) -> Response:
    return await _keys_page(engine, await guard.visitor(request))


@router.post(KEYS)
async def create_key(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    """The new key is on this answer and nowhere else: the page is not stored (no-store),
    and the key is never shown again."""
    visitor, _ = await guard.checked_write(request, settings)
    _, key = await engine.principals.create_key(visitor.principal.id)
    return await _keys_page(engine, visitor, new_key=key)


@router.post(KEYS + "/{key_id}/revoke")
async def revoke_key(
    key_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    if not await engine.principals.revoke_key(visitor.principal.id, key_id):
        known = {k.id for k in await engine.principals.keys_of(visitor.principal.id)}
        if key_id not in known:
            raise ApiError(404, "key_not_found", "No key with that id.")
    # Revoking the key this browser signed in with ends this sign-in too: the redirect
    # then lands on the sign-in form.
    return see_other(KEYS)


@router.get(PREFIX + "/usage")
async def usage_page(
    request: Request, engine: EngineDep, days: Annotated[int, Query(ge=1, le=366)] = 30
) -> Response:
    visitor = await guard.visitor(request)
    found = await engine.usage.per_day(visitor.principal.id, days)
    names = {h.id: h.name for h in await engine.harnesses.all(visitor.principal.id)}
    totals = {
        "turns": sum(u.turns for u in found),
        "input_tokens": sum(u.input_tokens for u in found),
        "output_tokens": sum(u.output_tokens for u in found),
    }
    rows = [
        {
            "day": u.day,
            "harness": names.get(u.harness_id, u.harness_id),
            "turns": u.turns,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
        }
        for u in found
    ]
    return page("usage.html", visitor=visitor, section="usage", rows=rows, totals=totals, days=days)
