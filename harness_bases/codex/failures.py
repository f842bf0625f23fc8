"""Whose fault a failed Codex turn is: the model provider's, or the harness's."""

from __future__ import annotations

import json
import re
from typing import Any

from harness_bases import events as ev
from harness_bases.messages import PROVIDER_REFUSED, safe_message

# codexErrorInfo values that say the model provider (via our gateway) failed the request.
_PROVIDER_ERRORS = {
    "contextWindowExceeded",
    "usageLimitExceeded",
    "rateLimitExceeded",
    "serverOverloaded",
    "modelNotFound",
    "internalServerError",
    "unauthorized",
    "flexUnavailable",
    "policyCapacityUnavailable",
    "cyberPolicy",
    "misalignmentPolicyViolation",
}
# Object-shaped codexErrorInfo variants: HTTP trouble talking to the provider.
_PROVIDER_HTTP_ERRORS = {
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
}


def classify_failure(error: dict[str, Any] | None) -> ev.TurnFailed:
    """A TurnFailed for Codex's TurnError, with code `provider_error` when the model
    provider failed the request and `harness_error` otherwise."""
    if not error:
        return ev.TurnFailed("The agent reported a failure without details.", "harness_error")
    raw = str(error.get("message") or "The agent reported a failure.")
    info = error.get("codexErrorInfo")
    body_message = _http_error_body_message(raw)
    provider = (
        (isinstance(info, str) and info in _PROVIDER_ERRORS)
        or (isinstance(info, dict) and bool(_PROVIDER_HTTP_ERRORS & info.keys()))
        # A 400 from upstream arrives as codexErrorInfo "other" whose message is the
        # provider's raw error body ({"error": {...}}); nothing else in Codex looks so.
        or body_message is not None
    )
    if provider:
        return ev.TurnFailed(safe_message(body_message or raw, PROVIDER_REFUSED), "provider_error")
    return ev.TurnFailed(safe_message(raw, "The agent reported a failure."), "harness_error")


INPUT_TOO_LARGE = "input_too_large"


def setup_failure(method: str, message: str) -> ev.TurnFailed:
    """A TurnFailed for a request app-server refused while the turn was being set up: an
    input it will not take is the caller's (`input_too_large`), anything else the harness's."""
    if method == "turn/start" and "exceeds the maximum length" in message:
        return ev.TurnFailed(
            "The input is longer than the agent takes in one turn.", INPUT_TOO_LARGE
        )
    return ev.TurnFailed("The agent could not start the turn.", "harness_error")


# Codex's wording for an HTTP failure: "unexpected status 502 Bad Gateway: {body}, url: …".
_UNEXPECTED_STATUS = re.compile(r"^unexpected status \d{3}[^:]*: (.*?)(?:, url: \S+)?$", re.S)


def _http_error_body_message(text: str) -> str | None:
    """The message of an OpenAI-style error body, if `text` is one (bare or in Codex's
    "unexpected status" wording)."""
    quoted = _UNEXPECTED_STATUS.match(text.strip())
    if quoted:
        text = quoted.group(1)
    try:
        body = json.loads(text)
    except ValueError:
        # Codex quotes an error body's message itself: the gateway's own sentence.
        return text.strip() if quoted and text.strip() else None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or text)
    if isinstance(error, str):
        return error
    return None
