"""Pure mapping from Hermes' ACP output to base-neutral AgentEvents (no I/O).

One parser per turn. ACP streams `session/update` notifications (message and thought
chunks, tool calls) and ends the turn with the answer to `session/prompt`; ACP has no item
ids, so an assistant message or a reasoning block ends where something else begins. The
outcome comes from the verdict Hermes reports in the answer's `_meta.hermes` (see
acp_launcher.py), never from the process's exit code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.messages import safe_message

Message = dict[str, Any]

PROVIDER_FAILED = "The model provider failed the request."
AGENT_FAILED = "The agent reported a failure without details."


@dataclass
class _OpenItem:
    kind: str  # "text" | "reasoning"
    key: str
    text: str = ""


def _content_text(content: Any) -> str:
    """The text of an ACP content block or a list of tool-call content entries."""
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text") or "")
        return _content_text(content.get("content"))
    if isinstance(content, list):
        return "\n".join(t for t in (_content_text(c) for c in content) if t)
    return ""


def _hermes_meta(obj: Any) -> dict[str, Any]:
    meta = obj.get("_meta") if isinstance(obj, dict) else None
    hermes = meta.get("hermes") if isinstance(meta, dict) else None
    return hermes if isinstance(hermes, dict) else {}


def tool_output(raw: Any, content: Any) -> tuple[str, bool]:
    """A tool result as text, and whether it succeeded by its own account.

    The terminal tool answers JSON (`output`, `exit_code`, `error`): its output is the text,
    like a shell's; any other result is passed on as Hermes gave it to the model."""
    if raw is None:
        return _content_text(content), True
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
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
class HermesParser:
    """Feed it every `session/update` after the prompt was sent, then the prompt's answer."""

    max_step: int | None = None
    finished: bool = False
    _open: _OpenItem | None = None
    _items: int = 0
    _open_calls: set[str] = field(default_factory=set)

    # -- the stream ----------------------------------------------------------------------

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if msg.get("method") != "session/update" or self.finished:
            return []
        params = msg.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return []
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._chunk("text", _content_text(update.get("content")))
        if kind == "agent_thought_chunk":
            return self._chunk("reasoning", _content_text(update.get("content")))
        if kind == "tool_call":
            return self._tool_started(update)
        if kind == "tool_call_update":
            return self._tool_updated(update)
        return []  # plans, usage gauges, command lists, titles

    def _chunk(self, kind: str, delta: str) -> list[ev.AgentEvent]:
        out: list[ev.AgentEvent] = []
        if self._open is not None and self._open.kind != kind:
            out += self._close()
        if self._open is None:
            # Hermes puts a paragraph break before text that follows a tool call; an item
            # begins with its first real character.
            delta = delta.lstrip("\n")
            if not delta:
                return out
            self._items += 1
            self._open = _OpenItem(kind, f"{kind}_{self._items}")
        if not delta:
            return out
        self._open.text += delta
        key = self._open.key
        out.append(ev.TextDelta(key, delta) if kind == "text" else ev.ReasoningDelta(key, delta))
        return out

    def _close(self) -> list[ev.AgentEvent]:
        item, self._open = self._open, None
        if item is None:
            return []
        if item.kind == "text":
            return [ev.TextDone(item.key, item.text)]
        return [ev.ReasoningDone(item.key, item.text)]

    def _tool_started(self, update: dict[str, Any]) -> list[ev.AgentEvent]:
        call = str(update.get("toolCallId") or "")
        if not call or call in self._open_calls:
            return []
        name = _hermes_meta(update).get("toolName")
        if not isinstance(name, str) or not name:
            name = str(update.get("title") or "tool").split(":", 1)[0]
        raw = update.get("rawInput")
        arguments = json.dumps(raw if isinstance(raw, dict) else {}, ensure_ascii=False)
        self._open_calls.add(call)
        return [*self._close(), ev.ToolCallStarted(call, name, arguments)]

    def _tool_updated(self, update: dict[str, Any]) -> list[ev.AgentEvent]:
        call = str(update.get("toolCallId") or "")
        status = update.get("status")
        if call not in self._open_calls or status not in ("completed", "failed"):
            return []
        self._open_calls.discard(call)
        output, ok = tool_output(update.get("rawOutput"), update.get("content"))
        return [ev.ToolCallFinished(call, output, ok and status == "completed")]

    # -- the end -------------------------------------------------------------------------

    def answer(self, result: Any) -> list[ev.AgentEvent]:
        """Events for the `session/prompt` answer: the open item closed, usage, the outcome."""
        if self.finished:
            return []
        self.finished = True
        out = self._close()
        result = result if isinstance(result, dict) else {}
        usage = result.get("usage")
        if isinstance(usage, dict):
            out.append(
                ev.Usage(
                    int(usage.get("inputTokens") or 0),
                    int(usage.get("outputTokens") or 0),
                    int(usage.get("cachedReadTokens") or 0),
                )
            )
        return out + self._outcome(str(result.get("stopReason") or ""), _hermes_meta(result))

    def _outcome(self, stop_reason: str, verdict: dict[str, Any]) -> list[ev.AgentEvent]:
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

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before the prompt was answered."""
        if self.finished:
            return []
        self.finished = True
        # An item still open stays open: the engine ends it as incomplete.
        return [ev.TurnFailed("the agent exited unexpectedly", "harness_error")]


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
