"""The application's routes as one flat list.

Recent FastAPI versions keep each included router as a single nested entry of `app.routes`;
the 405 `Allow` header and the OpenAPI document need every route, with its path and methods.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette


def served_routes(app: Starlette) -> list[Any]:
    """Every route, each with `path`, `path_regex`, `methods` and `matches(scope)`."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # FastAPI before nested routers: app.routes is already flat
        return list(app.routes)
    return list(iter_route_contexts(app.routes))
