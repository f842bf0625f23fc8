"""The gateway's wire translators: a CLI's native API served by a provider of another.

`translation(wire, api)` gives a fresh Translation per model call (None when the provider
speaks the CLI's own wire, and the bytes pass through untouched). The gateway calls
`request()` on the CLI's body (then applies generation settings and the pinned model),
sends it to `upstream_path`, and turns the answer back with `response()`, `stream()` or
`error()`; `refusal()` shapes the gateway's own errors, `Untranslatable` included.
"""

from __future__ import annotations

from typing import Protocol

from uhp_server.gateway.wire.errors import Untranslatable
from uhp_server.gateway.wire.translations import (
    AnthropicOverChat,
    GeminiOverChat,
    ResponsesOverChat,
)

WIRES = ("responses", "anthropic", "chat", "gemini")  # what a CLI speaks
APIS = ("responses", "anthropic", "chat")  # what a provider serves

__all__ = [
    "APIS",
    "PAIRS",
    "WIRES",
    "StreamTranslator",
    "Translation",
    "Untranslatable",
    "translation",
]


class StreamTranslator(Protocol):
    content_type: str

    def feed(self, chunk: bytes) -> bytes:
        """Upstream SSE bytes in (split anywhere), the CLI's SSE bytes out (maybe none)."""
        ...

    def finish(self) -> bytes:
        """At upstream EOF: the closing events (a failure event if the stream was cut)."""
        ...


class Translation(Protocol):
    wire: str
    api: str
    upstream_path: str

    def request(self, body: dict, *, model: str) -> dict:
        """The provider's request body; raises Untranslatable."""
        ...

    def response(self, upstream: dict) -> dict:
        """A non-streamed answer, in the wire's shape."""
        ...

    def stream(self) -> StreamTranslator:
        """A fresh translator for one streamed answer."""
        ...

    def error(self, status: int, upstream_body: bytes) -> bytes:
        """The provider's error body rewritten in the wire's error shape."""
        ...

    def refusal(self, status: int, message: str) -> bytes:
        """The gateway's own error in the wire's error shape."""
        ...


_TRANSLATIONS: dict[tuple[str, str], type] = {
    ("responses", "chat"): ResponsesOverChat,
    ("anthropic", "chat"): AnthropicOverChat,
    ("gemini", "chat"): GeminiOverChat,
}
PAIRS = frozenset({*_TRANSLATIONS, *((w, w) for w in WIRES if w in APIS)})  # (wire, api) served


def translation(wire: str, api: str) -> Translation | None:
    """None when wire == api (pass the bytes through untouched); ValueError when there is
    no translation between the two."""
    if wire not in WIRES or api not in APIS:
        raise ValueError(f"unknown wire or API: {wire!r}, {api!r}")
    if wire == api:
        return None
    try:
        return _TRANSLATIONS[(wire, api)]()
    except KeyError:
        raise ValueError(f"no translation from {wire!r} to {api!r}") from None
