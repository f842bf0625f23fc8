"""Session sharing (Sessions §5): publish, read back and revoke a read-only page of a session.

The API half needs a credential like any route. The page half (`/s/...`) needs only the
share's token, and can do nothing but read: the page, its state (polled for live updates)
and the session's artifacts. The token is never an API credential, and revoking deletes it,
so every link ever minted for the session stops resolving at once.

Every page response carries a CSP that allows no script but the page's own file, no inline
script or style, no framing, no form posts, nothing loaded from elsewhere.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from storage import artifacts as artifact_store
from storage import sessions as session_store
from storage import shares
from storage.tables import SessionRow, ShareRow
from storage.unit import Tx
from uhp_server.context import AppContext, Ctx
from uhp_server.doors.uhp.files import ARTIFACT_HEADERS, blob_response, session_or_404
from uhp_server.doors.uhp.share_page.render import (
    STATIC_DIR,
    render_gone,
    render_page,
    session_state,
)
from uhp_server.engine.history import session_turns
from uhp_server.errors import VENDOR, ApiError, error_response
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute, json_body

router = APIRouter(route_class=StrictJsonRoute)

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
ASSETS = {"share.css": "text/css; charset=utf-8", "share.js": "text/javascript; charset=utf-8"}


def _share_not_found() -> ApiError:
    return ApiError(404, VENDOR + "share_not_found", "This session is not shared.")


# -- the API ------------------------------------------------------------------------------
async def _wants_enabled(request: Request) -> bool:
    """The optional body `{"enabled": bool}`; no body means publish."""
    if not hasattr(request, "_json") and not (await request.body()).strip():
        return True
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_input", "The request body must be a JSON object.")
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ApiError(400, "invalid_input", "'enabled' must be a boolean.", param="enabled")
    return enabled


def _revoke(tx: Tx, ctx: AppContext, principal_id: str, session: SessionRow) -> dict[str, Any]:
    existing = shares.current(tx, principal_id, session.id)
    if existing is None:
        raise _share_not_found()
    shares.revoke(tx, session.id)
    return shares.to_wire(existing, enabled=False)


@router.post("/v1/sessions/{session_id}/share")
async def share_session(
    session_id: str, request: Request, principal: CurrentPrincipal, ctx: Ctx
) -> dict[str, Any]:
    session = await ctx.db.read(session_or_404, ctx, principal, session_id)
    if not await _wants_enabled(request):
        return await ctx.db.write(_revoke, ctx, principal.id, session)
    return shares.to_wire(await ctx.db.write(shares.publish, principal.id, session.id))


@router.get("/v1/sessions/{session_id}/share")
def get_share(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    existing = ctx.db.run(shares.current, principal.id, session.id)
    if existing is None:
        raise _share_not_found()
    return shares.to_wire(existing)


@router.delete("/v1/sessions/{session_id}/share")
def revoke_share(session_id: str, principal: CurrentPrincipal, ctx: Ctx) -> dict[str, Any]:
    session = ctx.db.run(session_or_404, ctx, principal, session_id)
    return ctx.db.run(_revoke, ctx, principal.id, session)


# -- the page -----------------------------------------------------------------------------
def _shared(tx: Tx, token: str) -> tuple[ShareRow, SessionRow] | None:
    share = shares.by_token(tx, token)
    if share is None:
        return None
    session = session_store.get_session(tx, share.principal_id, share.session_id)
    return (share, session) if session is not None else None


def _page_error(request: Request, err: ApiError) -> Response:
    response = error_response(request, err)
    response.headers.update(PAGE_HEADERS)
    return response


@router.get("/s/_assets/{name}")
def share_asset(name: str) -> Response:
    if name not in ASSETS:
        return Response(status_code=404, headers=PAGE_HEADERS)
    body = (STATIC_DIR / name).read_bytes()
    headers = {**PAGE_HEADERS, "Cache-Control": "public, max-age=300"}
    return Response(body, media_type=ASSETS[name], headers=headers)


@router.get("/s/{token}", response_class=HTMLResponse)
def share_page(token: str, ctx: Ctx) -> Response:
    found = ctx.db.run(_shared, token)
    if found is None:
        return HTMLResponse(render_gone(), status_code=404, headers=PAGE_HEADERS)
    share, session = found
    html = render_page(session, share.token, ctx.db.run(session_turns, ctx.runs, session.id))
    return HTMLResponse(html, headers=PAGE_HEADERS)


@router.get("/s/{token}/state")
def share_state(token: str, request: Request, ctx: Ctx) -> Response:
    found = ctx.db.run(_shared, token)
    if found is None:
        return _page_error(request, _share_not_found())
    share, session = found
    state = session_state(session, share.token, ctx.db.run(session_turns, ctx.runs, session.id))
    return JSONResponse(state, headers=PAGE_HEADERS)


@router.get("/s/{token}/files/{file_id}")
def share_file(token: str, file_id: str, request: Request, ctx: Ctx) -> Response:
    found = ctx.db.run(_shared, token)
    row = None
    if found is not None:
        share, session = found
        row = ctx.db.run(
            artifact_store.get_artifact, share.principal_id, session.container_id, file_id
        )
    if row is None:
        return _page_error(request, ApiError(404, "file_not_found", "No such file here."))
    response = blob_response(ctx.blobs, row)
    response.headers.update({**PAGE_HEADERS, **ARTIFACT_HEADERS})  # the artifact's CSP wins
    return response
