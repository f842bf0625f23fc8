"""The application factory: the server's parts (context.py), and what it serves, mounted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from harness_bases.base import HarnessBase
from uhp_server.context import build_context, serving
from uhp_server.doors import oumi_harness
from uhp_server.doors.agentos.routes import router as agentos_router
from uhp_server.api_docs import routes as api_docs
from uhp_server.doors.openai_chat import MOUNT_PATH, make_chat_app
from uhp_server.doors.oumi_tools.http import router as tool_router
from uhp_server.doors.oumi_tools.mcp import router as mcp_tool_router
from uhp_server.doors.uhp import (
    discovery,
    files,
    harness_events,
    harnesses,
    sessions,
    share,
    tasks,
)
from uhp_server.errors import install_error_handlers
from uhp_server.gateway.mcp_proxy import make_mcp_router
from uhp_server.gateway.proxy import make_gateway_router
from uhp_server.http.head_requests import HeadAsGet
from uhp_server.http.unread_bodies import CloseOnUnreadBody
from uhp_server.http.versioning import VersionMiddleware
from uhp_server.ops import routes as ops
from uhp_server.sandbox.base import Sandbox
from uhp_server.settings import Settings


def create_app(
    settings: Settings,
    bases: dict[str, HarnessBase] | None = None,
    sandbox: Sandbox | None = None,
) -> FastAPI:
    ctx = build_context(settings, bases, sandbox)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ctx.db.bind_loop()  # PostgreSQL: the hot statements go from this loop
        try:
            async with serving(ctx, _app):
                yield
        finally:
            # Its threads and connections (a PostgreSQL server counts every one of them).
            await ctx.db.unbind_loop()
            await asyncio.to_thread(ctx.db.close)

    app = FastAPI(
        title="UHP Server",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        redirect_slashes=False,  # a redirect would echo the Host header back as a Location
    )
    app.state.ctx = ctx
    app.state.engine = ctx.engine  # what the doors reach (http/auth.py, each door's routes)
    install_error_handlers(app)
    for router in (discovery.router, harnesses.router, tasks.router, sessions.router):
        app.include_router(router)
    app.include_router(make_gateway_router(ctx.tokens, ctx.upstreams, ctx.metrics))
    app.include_router(make_mcp_router(ctx.tokens, ctx.upstreams.http, ctx.runs.ask_by_token))
    for router in (files.router, share.router, harness_events.router, api_docs.router, ops.router):
        app.include_router(router)
    app.include_router(oumi_harness.router)
    for router in (tool_router, mcp_tool_router, agentos_router):  # more front doors
        app.include_router(router)
    app.mount(
        MOUNT_PATH, make_chat_app(ctx.engine)
    )  # the Chat Completions door, in OpenAI's shapes
    app.add_middleware(VersionMiddleware)
    app.add_middleware(CloseOnUnreadBody)
    app.add_middleware(HeadAsGet)
    return app
