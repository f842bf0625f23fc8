"""How Cline's ACP output differs from plain ACP (the mapping itself is acp/parser.py).

A tool call's title is `<tool>: <what it does>` (`run_commands: echo hi`): the name is the
part before the colon. Its raw output is a list, one `{query, result, success}` per command
(or file) the call handled: the output is their results, and the call succeeded when each did.
A model call that failed answers the prompt with JSON-RPC's internal error carrying the
provider's message in `data.message`: that is the provider's failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import PROMPT_ERROR, AcpParser
from harness_bases.messages import safe_message

PROVIDER_FAILED = "The model provider failed the request."
_INTERNAL = "Internal error: "


@dataclass
class ClineParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        title = str(update.get("title") or update.get("kind") or "tool")
        return title.split(":", 1)[0].strip() or "tool"

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        raw = update.get("rawOutput")
        if not isinstance(raw, list) or not all(isinstance(part, dict) for part in raw):
            return super().tool_result(update)
        text = "\n".join(str(part.get("result") or part.get("error") or "") for part in raw)
        ok = all(part.get("success") is not False for part in raw)
        return text, ok and update.get("status") == "completed"

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        message = data.get("message") if isinstance(data, dict) else None
        if error.get("code") == -32603 and isinstance(message, str) and message:
            message = message.removeprefix(_INTERNAL)
            return [ev.TurnFailed(safe_message(message, PROVIDER_FAILED), "provider_error")]
        return [ev.TurnFailed(PROMPT_ERROR, "harness_error")]
