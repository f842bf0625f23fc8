"""How OpenCode's ACP output differs from plain ACP (the mapping itself is acp/parser.py).

A shell command's raw output carries its exit code in `metadata.exit`: a command that
exited non-zero is a failed call, as it is for the other bases. A model call that failed
answers the prompt with a JSON-RPC error whose `data.errorName` is `APIError`: that is the
provider's failure, with the provider's message.
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
class OpenCodeParser(AcpParser):
    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        text, ok = super().tool_result(update)
        raw = update.get("rawOutput")
        metadata = raw.get("metadata") if isinstance(raw, dict) else None
        exit_code = metadata.get("exit") if isinstance(metadata, dict) else None
        return text, ok and exit_code in (0, None)

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        if isinstance(data, dict) and data.get("errorName") == "APIError":
            message = str(error.get("message") or "").removeprefix(_INTERNAL)
            return [ev.TurnFailed(safe_message(message, PROVIDER_FAILED), "provider_error")]
        return [ev.TurnFailed(PROMPT_ERROR, "harness_error")]
