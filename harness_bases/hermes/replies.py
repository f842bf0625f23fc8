"""Answers to the requests Hermes' ACP server sends its client.

Nobody is at a keyboard and the sandbox is the security boundary (as with Codex's
`danger-full-access`): a permission question (an edit, a command Hermes considers risky) is
answered with the one-time allow option. Approvals are off in config.yaml, so this is the
safety net that keeps a turn from waiting a minute for an answer that never comes. We offer
no file-system or terminal capabilities, so nothing else should be asked.
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
