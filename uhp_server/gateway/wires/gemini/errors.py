"""The Gemini API's error shape."""

from __future__ import annotations

from uhp_server.gateway.wires.base import ErrorKinds

# google.rpc status names, which the Gemini API (and so Gemini CLI) pairs with each code.
GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def gemini_error(status: int, message: str, kind: str | None = None) -> dict:
    """The Gemini API's `{"error": {"code", "message", "status"}}`; `kind` by default the
    status name Google pairs with the code."""
    kind = kind or GEMINI_STATUSES.get(
        status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION"
    )
    return {"error": {"code": status, "message": message, "status": kind}}


# The gateway's own refusals, as the status names their codes get above (424, the refused
# credential, has none of its own).
ERROR_KINDS = ErrorKinds(
    unauthorized="UNAUTHENTICATED",
    not_found="NOT_FOUND",
    credential_refused="FAILED_PRECONDITION",
    bad_gateway="INTERNAL",
    invalid_request="INVALID_ARGUMENT",
)
