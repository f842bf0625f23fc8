"""Where each backend's gateway lives on this server (the sandbox builds URLs from this), and
which wire a path on it speaks.

A backend is what a base declares its CLI calls ("openai", "anthropic"): the wires that name
it are served together at /gateway/<backend>/v1/<path>, each claiming its own paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from uhp_server.gateway.wires import ModelCall, Wire
from uhp_server.gateway.wires.registry import on_backend

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:@~-]*")  # no "", ".", "..", "%", "?", "#"


def mount(backend: str) -> str:
    """The path below which the gateway serves `backend` (its API root)."""
    return f"/gateway/{backend}/v1"


def gateway_path(backend: str) -> str:
    """The gateway's base path for `backend`, as a client of its wires expects its base URL."""
    served = on_backend(backend)
    if not served:
        raise ValueError(f"unknown gateway backend: {backend!r}")
    return mount(backend) if served[0].version_in_base_url else f"/gateway/{backend}"


@dataclass(frozen=True)
class Route:
    """What a path on a backend is."""

    wire: Wire  # whose client sends it: the gateway answers in this wire's shapes
    call: ModelCall | None  # the model call it is; None for the models routes (and refusals)
    allowed: bool  # one of the wires' endpoints: anything else is 404


def route(backend: str, path: str) -> Route:
    """The route of `path` (below the backend's API root). A model call belongs to the wire
    that declares it; any other path to the wire whose root it is under (the longest root),
    and wires sharing a root answer alike (Responses and Chat: the OpenAI API's shapes)."""
    served = on_backend(backend)
    allowed = all(_SEGMENT.fullmatch(s) for s in path.split("/")) and any(
        wire.endpoints.fullmatch(path) for wire in served
    )
    for wire in served:
        for call in wire.model_calls:
            if call.path.fullmatch(path):
                return Route(wire, call, allowed)
    speaker = max(served, key=lambda wire: len(wire.root) if path.startswith(wire.root) else -1)
    return Route(speaker, None, allowed)
