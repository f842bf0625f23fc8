"""What OpenHands CLI's ACP server (through our launcher) says differently from the ACP
default: a tool's name in `_meta.toolName`; its result in `rawOutput`, the SDK's observation
event (a command's exit code in `observation.exit_code`); a failed model call as the prompt's
JSON-RPC error with the provider's message in `data.providerError`."""

from __future__ import annotations

from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import PROMPT_ERROR, AcpParser, content_text

TOOL_NAME_META = "toolName"
PROVIDER_ERROR = "providerError"


def observation_text(observation: dict[str, Any]) -> str:
    content = observation.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return content_text(content)


class OpenHandsParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        meta = update.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get(TOOL_NAME_META), str):
            return str(meta[TOOL_NAME_META])
        return super().tool_name(update)

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        raw = update.get("rawOutput")
        observation = raw.get("observation") if isinstance(raw, dict) else None
        if not isinstance(observation, dict):
            return super().tool_result(update)
        exit_code = observation.get("exit_code")
        failed = bool(observation.get("is_error")) or exit_code not in (None, 0)
        return observation_text(observation), update.get("status") == "completed" and not failed

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        message = data.get(PROVIDER_ERROR) if isinstance(data, dict) else None
        if isinstance(message, str):
            return [ev.TurnFailed(message or PROMPT_ERROR, "provider_error")]
        return super().prompt_error(error)
