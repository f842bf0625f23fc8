"""The application's routes as one flat list.

Recent FastAPI versions keep each included router as a single nested entry of `app.routes`;
the 405 `Allow` header and the OpenAPI document need every route, with its path and methods.
A mounted sub-application (the Chat Completions door at /openai/v1) is left out: it answers
for itself, in its own contract's shapes, and is not part of the protocol's document.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount


def served_routes(app: Starlette) -> list[Any]:
    """Every route, each with `path`, `path_regex`, `methods` and `matches(scope)`."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # FastAPI before nested routers: app.routes is already flat
        routes = list(app.routes)
    else:
        routes = list(iter_route_contexts(app.routes))
    return [route for route in routes if not isinstance(getattr(route, "route", route), Mount)]
