"""Turning a failed Claude Code `result` into a TurnFailed: whose fault, and a clean message.

A model call the provider refused ends the turn with `is_error: true`, `terminal_reason:
"api_error"` and `api_error_status`; the CLI's text wraps the provider's own message
("API Error: 400 <message>", "API Error: Request rejected (429) · <message>", and for
server errors a hint naming the gateway's host). Clients get the provider's message alone,
never a host name or a path.
"""

from __future__ import annotations

import re
from typing import Any

from harness_bases import events as ev
from harness_bases.messages import PROVIDER_REFUSED, safe_message

HARNESS_FAILURE = "The agent reported a failure."

_PREFIX = re.compile(r"^\s*API Error:\s*(?:\d{3}\b\s*)?(?:Request rejected \(\d{3}\)\s*·\s*)?")
# Advice the CLI appends after the provider's message.
_ADVICE = re.compile(r"\.?\s+(?:This is a server-side issue|If it persists|·\s*(?:Fix|Please|Run))")


def is_provider_failure(result: dict[str, Any]) -> bool:
    return result.get("terminal_reason") == "api_error" or bool(result.get("api_error_status"))


def provider_message(text: str, status: Any) -> str:
    """The provider's own message from the CLI's error text, or a plain one when it is
    empty or could reveal where the gateway or the provider is."""
    message = _PREFIX.sub("", text or "", count=1)
    message = _ADVICE.split(message, maxsplit=1)[0].strip()
    if isinstance(status, int):
        return safe_message(message, f"The model provider refused the request (HTTP {status}).")
    return safe_message(message, PROVIDER_REFUSED)


def classify_failure(result: dict[str, Any], api_error_text: str | None) -> ev.TurnFailed:
    """The TurnFailed for an `is_error` result that is neither a step limit nor a cancel."""
    if is_provider_failure(result):
        text = result.get("result") if isinstance(result.get("result"), str) else None
        message = provider_message(text or api_error_text or "", result.get("api_error_status"))
        return ev.TurnFailed(message, "provider_error")
    return ev.TurnFailed(HARNESS_FAILURE, "harness_error")
