"""Session sharing (Sessions §5): publish, read back and revoke a read-only view of a session.

The API half needs a credential like any route. The view half (`/s/...`) needs only the
share's token, and can do nothing but read: the view (a page for a browser, JSON for a
program that asks for it), the page's state (polled for live updates) and the session's
artifacts. The token is never an API credential, and revoking deletes it, so every link
ever minted for the session stops resolving at once.

Every page response carries a CSP that allows no script but the page's own file, no inline
script or style, no framing, no form posts, nothing loaded from elsewhere.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from uhp_server.doors.deps import EngineDep
from uhp_server.doors.uhp.files import ARTIFACT_HEADERS, download_response
from uhp_server.doors.uhp.share_page.render import (
    STATIC_DIR,
    render_gone,
    render_page,
    session_state,
)
from uhp_server.doors.uhp.wire import share_to_wire, shared_view
from uhp_server.errors import VENDOR, ApiError, error_response
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.negotiation import preferred
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
# What the view's address answers with: the page, unless the client prefers JSON. A cache
# in between must keep the two apart.
VIEW_TYPES = ("text/html", "application/json")
VIEW_HEADERS = {**PAGE_HEADERS, "Vary": "Accept"}


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


@router.post("/v1/sessions/{session_id}/share")
async def share_session(
    session_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    await engine.sessions.get(principal.id, session_id)  # 404 before the body is looked at
    if not await _wants_enabled(request):
        return share_to_wire(await engine.shares.revoke(principal.id, session_id), enabled=False)
    return share_to_wire(await engine.shares.publish(principal.id, session_id))


@router.get("/v1/sessions/{session_id}/share")
async def get_share(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return share_to_wire(await engine.shares.current(principal.id, session_id))


@router.delete("/v1/sessions/{session_id}/share")
async def revoke_share(
    session_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return share_to_wire(await engine.shares.revoke(principal.id, session_id), enabled=False)


# -- the page -----------------------------------------------------------------------------
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
async def shared_session(token: str, request: Request, engine: EngineDep) -> Response:
    as_json = preferred(request.headers.get("accept"), VIEW_TYPES) == "application/json"
    shared = await engine.shares.shared(token)
    if shared is None:
        if as_json:
            response = _page_error(request, _share_not_found())
            response.headers["Vary"] = "Accept"
            return response
        return HTMLResponse(render_gone(), status_code=404, headers=VIEW_HEADERS)
    if as_json:
        view = shared_view(shared.session, shared.share.token, shared.turns)
        return JSONResponse(view, headers=VIEW_HEADERS)
    html = render_page(shared.session, shared.share.token, shared.turns)
    return HTMLResponse(html, headers=VIEW_HEADERS)


@router.get("/s/{token}/state")
async def share_state(token: str, request: Request, engine: EngineDep) -> Response:
    shared = await engine.shares.shared(token)
    if shared is None:
        return _page_error(request, _share_not_found())
    state = session_state(shared.session, shared.share.token, shared.turns)
    return JSONResponse(state, headers=PAGE_HEADERS)


@router.get("/s/{token}/files/{file_id}")
async def share_file(token: str, file_id: str, request: Request, engine: EngineDep) -> Response:
    download = await engine.shares.shared_file(token, file_id)
    if download is None:
        return _page_error(request, ApiError(404, "file_not_found", "No such file here."))
    response = download_response(download)
    response.headers.update({**PAGE_HEADERS, **ARTIFACT_HEADERS})  # the artifact's CSP wins
    return response
