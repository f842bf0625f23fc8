"""Answers to the requests an ACP agent sends its client.

Nobody is at a keyboard and the sandbox is the security boundary: a permission question (an
edit, a command the agent considers risky) is answered with the one-time allow option, so a
turn never waits for an answer that never comes. The client offers no file-system or
terminal capabilities, so nothing else should be asked; anything else is "method not found".
"""

from __future__ import annotations

from typing import Any


def reply_for(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result to answer a request with, or None to answer "method not found"."""
    if method != "session/request_permission":
        return None
    options = [o for o in params.get("options") or [] if isinstance(o, dict)]
    allow = next((o for o in options if o.get("kind") == "allow_once"), None)
    if allow is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": allow.get("optionId")}}
