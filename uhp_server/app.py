"""The application factory: the server's parts (context.py), and what it serves, mounted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Mount

from harness_bases.base import HarnessBase
from uhp_server.api_docs import routes as api_docs
from uhp_server.context import AppContext, build_context, serving
from uhp_server.doors.door import Door
from uhp_server.doors.registry import doors
from uhp_server.environments.builder import Builder
from uhp_server.errors import install_error_handlers
from uhp_server.gateway.mcp_proxy import make_mcp_router
from uhp_server.gateway.proxy import make_gateway_router
from uhp_server.http.head_requests import HeadAsGet
from uhp_server.http.route_table import Part, clashes
from uhp_server.http.streams import ProvideStreamLimits, StreamLimits
from uhp_server.http.unread_bodies import CloseOnUnreadBody
from uhp_server.http.versioning import VersionMiddleware
from uhp_server.ops import routes as ops
from uhp_server.sandbox.base import Sandbox
from uhp_server.settings import Settings

# The protocol's own door: among the doors, its routes are matched first (see `served`).
PROTOCOL_DOOR = "uhp"


def served(ctx: AppContext, doors: Iterable[Door]) -> list[Part]:
    """Everything the server serves, as one flat list: the model and MCP gateway its agents
    call, every door, operations and the API's description. No two parts may answer the same
    method and path (create_app refuses to start otherwise), so the order decides no request,
    only how soon it is found: FastAPI spends a few microseconds on each route it passes. So
    the gateway comes first (every model call an agent makes), then the doors, the protocol's
    own first (every UHP request, `GET /v1/uhp` probes too), then the rarely called rest."""
    in_order = sorted(doors, key=lambda door: door.name != PROTOCOL_DOOR)  # stable: name order
    return [
        make_gateway_router(ctx.tokens, ctx.upstreams, ctx.metrics),
        make_mcp_router(
            ctx.tokens, ctx.upstreams.http, ctx.runs.ask_by_token, ctx.engine.memory_tools
        ),
        *(part for door in in_order for part in door.served(ctx.engine)),
        ops.router,
        api_docs.router,
    ]


def create_app(
    settings: Settings,
    bases: dict[str, HarnessBase] | None = None,
    sandbox: Sandbox | None = None,
    builder: Builder | None = None,
) -> FastAPI:
    registered = doors()  # first: a door that cannot be loaded stops the server, saying why
    ctx = build_context(settings, bases, sandbox, builder)

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
    streams = StreamLimits(settings.max_connections, settings.max_streams_per_principal)
    app.state.streams = streams
    install_error_handlers(app)
    parts = served(ctx, registered.values())
    problems = clashes(parts)
    if problems:
        raise RuntimeError("routes served twice:\n" + "\n".join(problems))
    for part in parts:
        if isinstance(part, Mount):
            app.router.routes.append(part)
        else:
            app.include_router(part)
    app.add_middleware(VersionMiddleware)
    app.add_middleware(CloseOnUnreadBody)
    app.add_middleware(HeadAsGet)
    app.add_middleware(ProvideStreamLimits, limits=streams)
    return app
