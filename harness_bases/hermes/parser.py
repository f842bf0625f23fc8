"""How Hermes' ACP output differs from plain ACP (the mapping itself is acp/parser.py).

The outcome comes from the verdict Hermes reports in the answer's `_meta.hermes` (see
acp_launcher.py; the pinned adapter answers `end_turn` even for a failed turn), never from
the process's exit code. Tool names and raw results come from what the launcher adds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import AcpParser, as_text, content_text
from harness_bases.messages import safe_message

PROVIDER_FAILED = "The model provider failed the request."
AGENT_FAILED = "The agent reported a failure without details."


def _hermes_meta(obj: Any) -> dict[str, Any]:
    meta = obj.get("_meta") if isinstance(obj, dict) else None
    hermes = meta.get("hermes") if isinstance(meta, dict) else None
    return hermes if isinstance(hermes, dict) else {}


# Around an external tool's result (an MCP server's, the web's, the browser's) of 32
# characters or more, Hermes puts a fence for the model: this tag, one line telling it the
# content is data, a blank line; the content; the closing tag.
_FENCE_OPEN = re.compile(r'\A<untrusted_tool_result source="[^"\n]*">\n[^\n]*\n\n')
_FENCE_CLOSE = "\n</untrusted_tool_result>"


def unfenced(text: str) -> str:
    """The tool's own output inside Hermes' fence (the model's framing, not the output)."""
    opened = _FENCE_OPEN.match(text)
    if opened is None or not text.endswith(_FENCE_CLOSE):
        return text
    return text[opened.end() : -len(_FENCE_CLOSE)]


def tool_output(raw: Any, content: Any) -> tuple[str, bool]:
    """A tool result as text, and whether it succeeded by its own account.

    The terminal tool answers JSON (`output`, `exit_code`, `error`): its output is the text,
    like a shell's; any other result is passed on as Hermes gave it to the model, without
    the fence it puts around an external tool's."""
    if raw is None:
        return content_text(content), True
    text = unfenced(as_text(raw))
    try:
        value = json.loads(text)
    except ValueError:
        return text, True
    if isinstance(value, dict) and isinstance(value.get("output"), str):
        exit_code = value.get("exit_code")
        ok = exit_code in (0, None) and not value.get("error")
        return value["output"], ok
    return text, True


@dataclass
class HermesParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        name = _hermes_meta(update).get("toolName")
        if isinstance(name, str) and name:
            return name
        return str(update.get("title") or "tool").split(":", 1)[0]

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        output, ok = tool_output(update.get("rawOutput"), update.get("content"))
        return output, ok and update.get("status") == "completed"

    def outcome(self, stop_reason: str, result: dict[str, Any]) -> list[ev.AgentEvent]:
        verdict = _hermes_meta(result)
        if verdict.get("failed"):
            if verdict.get("crashed"):
                return [ev.TurnFailed("The agent crashed during the turn.", "harness_error")]
            message = safe_message(str(verdict.get("error") or ""), PROVIDER_FAILED)
            # Every failure Hermes' loop reports is the model call's: refused, failed, or
            # out of retries (its own crashes are marked `crashed`).
            return [ev.TurnFailed(message, "provider_error")]
        if stop_reason != "end_turn":  # cancelled, refusal, or something newer
            return [ev.TurnFailed(f"The agent stopped the turn ({stop_reason}).", "harness_error")]
        if str(verdict.get("turnExitReason", "")).startswith("max_iterations_reached"):
            if self.max_step is not None:
                return [ev.StepBudgetReached()]
            calls = verdict.get("apiCalls")
            notice = f"The agent stopped at its own limit of {calls} model calls."
            return [ev.Notice(notice), ev.TurnFinished()]
        if verdict.get("interrupted"):
            return [ev.TurnFailed("The agent was interrupted.", "harness_error")]
        return [ev.TurnFinished()]


def mcp_notices(session_result: Any) -> list[ev.Notice]:
    """A notice for each MCP server Hermes reports it could not connect."""
    servers = _hermes_meta(session_result).get("mcpServers")
    notices = []
    for server in servers if isinstance(servers, list) else []:
        if isinstance(server, dict) and server.get("status") == "failed":
            name = server.get("name")
            notices.append(
                ev.Notice(f"The MCP server {name} could not be connected; its tools are missing.")
            )
    return notices
