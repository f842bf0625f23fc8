"""The server's context behind a TestClient, which types its app as any ASGI app."""

from __future__ import annotations

from fastapi.testclient import TestClient
from starlette.applications import Starlette

from uhp_server.context import AppContext


def app_context(http: TestClient) -> AppContext:
    assert isinstance(http.app, Starlette), http.app
    return http.app.state.ctx
