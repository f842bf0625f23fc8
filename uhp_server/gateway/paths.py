"""Where each backend's gateway lives on this server (the sandbox builds URLs from this)."""

from __future__ import annotations

# OpenAI clients expect the version in the base URL; Anthropic clients append /v1/... to it.
_PATHS = {"openai": "/gateway/openai/v1", "anthropic": "/gateway/anthropic"}

BACKENDS: tuple[str, ...] = tuple(_PATHS)


def gateway_path(backend: str) -> str:
    """The gateway's base path for `backend`, as a client of that wire expects its base URL."""
    try:
        return _PATHS[backend]
    except KeyError:
        raise ValueError(f"unknown gateway backend: {backend!r}") from None
