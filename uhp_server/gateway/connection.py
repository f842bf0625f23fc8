"""Per-turn model connections: a front door runs one turn against a model it hands over.

A `ModelConnection` goes to `TaskService.submit(..., model_connection=...)` and from there
only into the turn's gateway grant (memory): never into the database, a log line or an error
message, and it is gone when the grant is revoked at the turn's outcome. The CLI still sees
only the gateway and its per-turn token; the gateway pins every call to the connection's
model, applies its generation settings to every call and adds its headers. Its URL passes
the URL policy (url_policy.py) when the task is accepted and again, resolved and pinned, on
every call: private and loopback hosts only with UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS,
link-local never.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from uhp_server.errors import ApiError
from uhp_server.gateway.providers import Provider, openai_root
from uhp_server.gateway.url_policy import UrlRefused, check_config_url

CONNECTION_PROVIDER = "connection"
# The gateway owns these: the model is pinned, the conversation and tools are the CLI's.
_RESERVED_SETTINGS = frozenset(
    {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "n"}
)
_HEADER = re.compile(r"[A-Za-z0-9-]{1,64}")
_RESERVED_HEADERS = frozenset({"authorization", "host", "content-length", "content-type"})


class LiveHeaders(Mapping[str, str]):
    """Connection headers a front door may change while its turn runs: a platform's run
    token is only valid while the platform waits for an answer, so it is cleared when the
    door answers and replaced when a later invocation resumes the same turn. The gateway
    reads them on every call."""

    def __init__(self, headers: Mapping[str, str] | None = None) -> None:
        self._headers: dict[str, str] = {}
        self.replace(headers or {})

    def replace(self, headers: Mapping[str, str]) -> None:
        for name, value in headers.items():
            _check_header(name, value)
        self._headers = {k.lower(): v for k, v in headers.items()}

    def clear(self) -> None:
        self._headers = {}

    def __getitem__(self, name: str) -> str:
        return self._headers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._headers))

    def __len__(self) -> int:
        return len(self._headers)


@dataclass(frozen=True)
class ModelConnection:
    """A Chat Completions endpoint, key and model for one turn."""

    base_url: str = field(repr=False)  # the API root, e.g. https://host/v1
    model: str
    api_key: str = field(repr=False)
    api: str = "chat"
    # temperature, top_p, max_tokens, seed, …: set on every model call, over the CLI's own.
    generation: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # e.g. a run token


def connection_provider(connection: ModelConnection, allow_private: bool) -> Provider:
    """The connection as the gateway's provider for one turn, after checking it; ApiError
    (400 invalid_input) names the field at fault without echoing any value."""
    if connection.api != "chat":
        _refuse("api", "Only Chat Completions (api 'chat') connections are supported.")
    if not isinstance(connection.model, str) or not connection.model.strip():
        _refuse("model", "The connection names no model.")
    try:
        check_config_url(connection.base_url, allow_private)
    except UrlRefused as exc:
        _refuse("base_url", str(exc))
    for key in connection.generation:
        if key in _RESERVED_SETTINGS:
            _refuse(f"generation.{key}", "This setting is owned by the gateway.")
    for name, value in connection.headers.items():
        _check_header(name, value)
    headers = connection.headers
    if not isinstance(headers, LiveHeaders):
        headers = {k.lower(): v for k, v in headers.items()}
    return Provider(
        name=CONNECTION_PROVIDER,
        api="chat",
        base_url=openai_root(connection.base_url),
        api_key=connection.api_key,
        models=(connection.model,),
        headers=headers,
        generation=dict(connection.generation),
        allow_private=allow_private,
    )


def _check_header(name: str, value: object) -> None:
    if not isinstance(name, str) or not _HEADER.fullmatch(name):
        _refuse("headers", "A header name is invalid or reserved.")
    if name.lower() in _RESERVED_HEADERS:
        _refuse("headers", "A header name is invalid or reserved.")
    if not isinstance(value, str) or any(ord(c) < 0x20 for c in value):
        _refuse("headers", "A header value must be a one-line string.")


def _refuse(name: str, message: str) -> None:
    raise ApiError(400, "invalid_input", message, param=f"model_connection.{name}")
