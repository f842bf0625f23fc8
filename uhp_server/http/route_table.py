"""The application's routes as one flat list, and what each part of it claims.

Recent FastAPI versions keep each included router as a single nested entry of `app.routes`;
the 405 `Allow` header and the OpenAPI document need every route, with its path and methods.
A mounted sub-application (the Chat Completions door at /openai/v1) is left out: it answers
for itself, in its own contract's shapes (its 405s included); `mounted_routes` lists its
routes for the API document.

The server serves a flat list of parts (app.py): routers and mounted sub-applications. When
no two parts could answer the same method and path, the order of the list decides no request,
and a door added to it cannot take over another's routes; `clashes` finds the pairs that could.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount

Part = APIRouter | Mount  # what the application serves, one entry of its flat list

_REST = re.compile(r"^\{\w+:path\}$")  # a `{name:path}` segment: it may span segments


def _flat(routes: Sequence[BaseRoute]) -> list[Any]:
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # FastAPI before nested routers: the routes are already flat
        return list(routes)
    return list(iter_route_contexts(routes))


def served_routes(app: Starlette) -> list[Any]:
    """Every route, each with `path`, `path_regex`, `methods` and `matches(scope)`."""
    return [r for r in _flat(app.routes) if not isinstance(getattr(r, "route", r), Mount)]


@dataclass(frozen=True)
class MountedRoute:
    """A route of a mounted sub-application, as a client reaches it."""

    path: str  # the mount's path and the route's, `{name:path}` written `{name}`
    methods: frozenset[str]


def mounted_routes(app: Starlette) -> list[MountedRoute]:
    """The routes of every mounted sub-application (the Chat Completions door), which
    `served_routes` leaves to the sub-application; what the API document must list too."""
    found = []
    for mount in (r for r in app.routes if isinstance(r, Mount)):
        for route in _flat(getattr(mount.app, "routes", [])):
            path = getattr(route, "path_format", route.path)
            methods = frozenset(getattr(route, "methods", None) or ())
            found.append(MountedRoute(mount.path + path, methods))
    return found


@dataclass(frozen=True)
class Claim:
    """A method and path template a part answers, and who answers it."""

    methods: frozenset[str] | None  # None: every method (a mount answers them all)
    path: str  # a template: `{name}` one segment, `{name:path}` the rest
    by: str  # the endpoint's module and name, or the mounted application

    def __str__(self) -> str:
        methods = "|".join(sorted(self.methods)) if self.methods else "*"
        return f"{methods} {self.path} ({self.by})"


def claims(part: Part) -> tuple[list[Claim], Claim | None]:
    """The routes a part serves, and for a mount the whole prefix it answers."""
    if isinstance(part, Mount):
        mounted = part.app
        by = f"{type(mounted).__name__} mounted at {part.path}"
        inner = _route_claims(_flat(getattr(mounted, "routes", [])), part.path)
        return inner, Claim(None, part.path + "/{path:path}", by)
    return _route_claims(_flat(part.routes), ""), None


def _route_claims(routes: Iterable[Any], prefix: str) -> list[Claim]:
    found = []
    for route in routes:
        endpoint = getattr(route, "endpoint", None)
        by = f"{endpoint.__module__}.{endpoint.__qualname__}" if endpoint else repr(route)
        methods = getattr(route, "methods", None)
        found.append(Claim(frozenset(methods) if methods else None, prefix + route.path, by))
    return found


def clashes(parts: Sequence[Part]) -> list[str]:
    """Each method and path served twice (within a part, or inside a mounted application),
    and each pair of routes from two different parts that could answer the same request."""
    found: list[str] = []
    seen: dict[tuple[str, str], Claim] = {}
    outward: list[list[Claim]] = []  # what each part answers, as the others see it
    for part in parts:
        routes, prefix = claims(part)
        for claim in routes:
            for method in sorted(claim.methods or {"*"}):
                first = seen.setdefault((method, claim.path), claim)
                if first is not claim:
                    found.append(f"{method} {claim.path}: served by {first.by} and {claim.by}")
        outward.append([prefix] if prefix else routes)
    for i, mine in enumerate(outward):
        for theirs in outward[i + 1 :]:
            found.extend(
                f"{a} and {b} could answer the same request"
                for a in mine
                for b in theirs
                if _share_a_method(a, b) and _share_a_path(a.path, b.path) and not _twice(a, b)
            )
    return found


def _twice(a: Claim, b: Claim) -> bool:
    """The same method and path in both: already reported as served twice."""
    return bool(a.methods and b.methods) and a.path == b.path


def _share_a_method(a: Claim, b: Claim) -> bool:
    return a.methods is None or b.methods is None or bool(a.methods & b.methods)


def _share_a_path(a: str, b: str) -> bool:
    """Whether some path matches both templates. Conservative: a segment holding a parameter
    matches any segment, and a `{name:path}` anything from there on."""
    return _segments_meet(a.strip("/").split("/"), b.strip("/").split("/"))


def _segments_meet(a: list[str], b: list[str]) -> bool:
    if not a or not b:
        return not a and not b
    if _REST.match(a[0]) or _REST.match(b[0]):
        return True
    same = a[0] == b[0] or "{" in a[0] or "{" in b[0]
    return same and _segments_meet(a[1:], b[1:])
