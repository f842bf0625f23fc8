"""`GET /openapi.json` and `GET /docs`: what this server serves, without a credential.

Both describe the same document, built once per application (its routes do not change
after start-up). The page is server-rendered and script-free, under a CSP as strict as the
share page's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from uhp_server.api_docs.document import build_document
from uhp_server.api_docs.page import STYLESHEET, render_docs

router = APIRouter(include_in_schema=False)

DOCS_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _document(request: Request) -> dict[str, Any]:
    state = request.app.state
    if getattr(state, "openapi_document", None) is None:
        state.openapi_document = build_document(request.app)
    return state.openapi_document


@router.get("/openapi.json")
def openapi_json(request: Request) -> Response:
    return JSONResponse(_document(request), headers={"Cache-Control": "no-cache"})


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> Response:
    state = request.app.state
    if getattr(state, "docs_html", None) is None:
        state.docs_html = render_docs(_document(request))
    return HTMLResponse(state.docs_html, headers=DOCS_HEADERS)


@router.get("/docs/docs.css")
def api_docs_stylesheet() -> Response:
    headers = {**DOCS_HEADERS, "Cache-Control": "public, max-age=300"}
    return Response(STYLESHEET.read_bytes(), media_type="text/css; charset=utf-8", headers=headers)
