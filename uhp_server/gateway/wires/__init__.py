"""The wire formats: each a folder here (responses/, chat/, anthropic/, gemini/) exposing one
`Wire` object, registered through the `uhp_server.wires` entry points (registry.py). base.py
says what a wire provides; docs/extending.md how to add one.

`translation(wire, api)` gives a fresh Translation per model call (None when the provider
speaks the CLI's own wire, and the bytes pass through untouched).
"""

from __future__ import annotations

from typing import Any

from uhp_server.gateway.wires.base import (
    CallKind,
    ErrorKinds,
    ModelCall,
    ProviderApi,
    StreamTranslator,
    Translation,
    Wire,
    WireHeaders,
)
from uhp_server.gateway.wires.errors import Untranslatable
from uhp_server.gateway.wires.registry import api_named, api_names, backends, wire_named, wires

__all__ = [
    "PAIRS",
    "CallKind",
    "ErrorKinds",
    "ModelCall",
    "ProviderApi",
    "StreamTranslator",
    "Translation",
    "Untranslatable",
    "Wire",
    "WireHeaders",
    "api_named",
    "api_names",
    "backends",
    "pairs",
    "translation",
    "wire_named",
    "wires",
]


def translation(wire: str, api: str) -> Translation | None:
    """None when wire == api (pass the bytes through untouched); ValueError when there is
    no translation between the two."""
    speaks = wires().get(wire)
    if speaks is None or api not in api_names():
        raise ValueError(f"unknown wire or API: {wire!r}, {api!r}")
    if wire == api:
        return None
    try:
        return speaks.translations[api]()
    except KeyError:
        raise ValueError(f"no translation from {wire!r} to {api!r}") from None


def pairs() -> frozenset[tuple[str, str]]:
    """Every (wire, api) the gateway serves: passed through or translated."""
    passed = {(name, name) for name in api_names()}
    translated = {(name, api) for name, wire in wires().items() for api in wire.translations}
    return frozenset(passed | translated)


def __getattr__(name: str) -> Any:
    # PAIRS reads the registry, so it is computed when asked for, not when this is imported
    # (the wires' own modules import this package).
    if name == "PAIRS":
        return pairs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
