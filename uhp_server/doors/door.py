"""What a door is: a contract spoken over HTTP onto the one engine, and the routes that speak it.

Every door, built-in or a third party's, is one package exporting one `Door` and registered
in the `uhp_server.doors` entry-point group (doors/registry.py); the application serves every
registered door's routes (app.py) and wires none of them by hand. A door's routes reach the
engine only through its facade: routers through the request's application
(`request.app.state.engine`, or `EngineDep` from doors/deps.py), a sub-application because
it is built around the engine it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import APIRouter
from starlette.routing import Mount
from starlette.types import ASGIApp

from uhp_server.engine import Engine


@dataclass(frozen=True)
class SubApp:
    """A sub-application mounted at `path`, for a door that answers everything under its
    prefix in its own shapes (even an unknown path or method), as Chat Completions does."""

    path: str
    build: Callable[[Engine], ASGIApp]


@dataclass(frozen=True)
class GatedRouter:
    """A router served only when `on` says so for the engine it would serve (a chapter the
    operator turns on): when off, its paths are not there at all, so each answers the
    ordinary 404 of a route the server does not have, whatever the method or body."""

    router: APIRouter
    on: Callable[[Engine], bool]


@dataclass(frozen=True)
class Door:
    name: str  # the entry point's name
    speaks: str  # the contract, in a few words ("the Oumi harness protocol, version 1")
    routers: tuple[APIRouter, ...] = ()  # included in the application as they are
    sub_apps: tuple[SubApp, ...] = ()
    gated: tuple[GatedRouter, ...] = ()  # included after `routers` when on

    def served(self, engine: Engine) -> list[APIRouter | Mount]:
        """What the application serves for this door: its routers (the gated ones that are
        on included), then its sub-applications built around `engine` and mounted at their
        paths."""
        mounts = [Mount(sub.path, app=sub.build(engine)) for sub in self.sub_apps]
        gated = [gate.router for gate in self.gated if gate.on(engine)]
        return [*self.routers, *gated, *mounts]
