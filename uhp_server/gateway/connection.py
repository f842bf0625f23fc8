"""Per-turn model connections: a front door runs one turn against a model it hands over.

A `ModelConnection` goes to a door's `EngineTask(model_connection=...)`, given to `Engine.start`,
and from there only into the turn's gateway grant (memory): never into the database, a log line or
an error message, and it is gone when the grant is revoked at the turn's outcome. The CLI still sees
only the gateway and its per-turn token; the gateway pins every call to the connection's
model, applies its generation settings to every call and adds its headers. Its URL passes
the URL policy (url_policy.py) when the task is accepted and again, resolved and pinned, on
every call: private and loopback hosts only with UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS,
link-local never.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uhp_server.errors import ApiError
from uhp_server.gateway.header_values import sendable
from uhp_server.gateway.providers import Provider, api_root
from uhp_server.gateway.url_policy import (
    MODEL_CONNECTION_SETTING,
    CredentialsInUrl,
    UrlRefused,
    check_config_url,
    refusal,
)

CONNECTION_PROVIDER = "connection"
# The one API a connection may name: what every OpenAI-compatible endpoint serves.
CONNECTION_API = "chat"
# The gateway owns these: the model is pinned, the conversation and tools are the CLI's.
_RESERVED_SETTINGS = frozenset(
    {"model", "messages", "stream", "stream_options", "tools", "tool_choice", "n"}
)
_HEADER = re.compile(r"[A-Za-z0-9-]{1,64}")
_RESERVED_HEADERS = frozenset({"authorization", "host", "content-length", "content-type"})


@dataclass(frozen=True)
class ModelConnection:
    """A Chat Completions endpoint, key and model for one turn."""

    base_url: str = field(repr=False)  # the API root, e.g. https://host/v1
    model: str
    api_key: str = field(repr=False)
    api: str = CONNECTION_API
    # temperature, top_p, max_tokens, seed, …: set on every model call, over the CLI's own.
    generation: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # e.g. a run token


def connection_provider(connection: ModelConnection, allow_private: bool) -> Provider:
    """The connection as the gateway's provider for one turn, after checking it; ApiError
    (400 invalid_input) names the field at fault without echoing any value."""
    if connection.api != CONNECTION_API:
        _refuse("api", "Only Chat Completions (api 'chat') connections are supported.")
    if not isinstance(connection.model, str) or not connection.model.strip():
        _refuse("model", "The connection names no model.")
    try:
        check_config_url(connection.base_url, allow_private)
    except CredentialsInUrl as exc:
        _refuse("base_url", exc.where_instead("the connection's API key"))
    except UrlRefused as exc:
        _refuse("base_url", refusal(exc, MODEL_CONNECTION_SETTING))
    for key in connection.generation:
        if key in _RESERVED_SETTINGS:
            _refuse(f"generation.{key}", "This setting is owned by the gateway.")
    if not isinstance(connection.api_key, str) or not sendable(connection.api_key):
        _refuse("api_key", "The key must be a line of printable ASCII.")  # sent as a header
    if len({name.lower() for name in connection.headers}) < len(connection.headers):
        _refuse("headers", "A header is named twice (header names ignore case).")
    for name, value in connection.headers.items():
        if not _HEADER.fullmatch(name) or name.lower() in _RESERVED_HEADERS:
            _refuse("headers", "A header name is invalid or reserved.")
        if not isinstance(value, str) or not sendable(value):
            _refuse("headers", "A header value must be a line of printable ASCII.")
    return Provider(
        name=CONNECTION_PROVIDER,
        api=CONNECTION_API,
        base_url=api_root(CONNECTION_API, connection.base_url),
        api_key=connection.api_key,
        models=(connection.model,),
        headers={k.lower(): v for k, v in connection.headers.items()},
        generation=dict(connection.generation),
        allow_private=allow_private,
    )


def _refuse(name: str, message: str) -> None:
    raise ApiError(400, "invalid_input", message, param=f"model_connection.{name}")
