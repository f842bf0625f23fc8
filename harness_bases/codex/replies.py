"""Answers to the requests `codex app-server` sends its client.

Nobody is at a keyboard: every approval is declined, every question goes unanswered, so
the CLI never blocks waiting for us. With approval policy `never` these should not come at
all; this is the safety net.
"""

from __future__ import annotations

from typing import Any

_NO_ONE = "No user is available to answer; continue without it."

_REPLIES: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": {"decision": "decline"},
    "item/fileChange/requestApproval": {"decision": "decline"},
    "item/permissions/requestApproval": {"permissions": {}, "scope": "turn"},
    "item/tool/requestUserInput": {"answers": {}},
    "mcpServer/elicitation/request": {"action": "decline"},
    "item/tool/call": {
        "contentItems": [{"type": "inputText", "text": "This tool is not available here."}],
        "success": False,
    },
    # Legacy (v1) approval requests.
    "execCommandApproval": {"decision": {"denied": {"rejection": _NO_ONE}}},
    "applyPatchApproval": {"decision": {"denied": {"rejection": _NO_ONE}}},
}


def reply_for(method: str) -> dict[str, Any] | None:
    """The result to answer a server request with, or None to answer with an error
    (for requests we cannot serve at all, such as ChatGPT token refresh)."""
    return _REPLIES.get(method)
