"""Anthropic Messages' error shape."""

from __future__ import annotations

from uhp_server.gateway.wires.base import ErrorKinds

ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str, kind: str | None = None) -> dict:
    """Anthropic's `{"type": "error", "error": {"type", "message"}}`; `kind` by default
    the type Anthropic gives the status."""
    kind = kind or ANTHROPIC_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# The gateway's own refusals: each in the type Anthropic itself uses for it.
ERROR_KINDS = ErrorKinds(
    unauthorized="authentication_error",
    not_found="not_found_error",
    credential_refused="api_error",
    bad_gateway="api_error",
    invalid_request="invalid_request_error",
)
