"""Pure mapping from an ACP agent's output to base-neutral AgentEvents (no I/O).

One parser per turn. ACP streams `session/update` notifications (message and thought
chunks, tool calls and their updates, plans) and ends the turn with the answer to
`session/prompt`, whose `stopReason` says why. ACP has no item ids, so an assistant message
or a reasoning block ends where something else begins. A base adapts what its agent does
differently by overriding `tool_name`, `tool_result` or `outcome`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev

Message = dict[str, Any]

PROMPT_ERROR = "The agent could not run the turn."
EXITED = "the agent exited unexpectedly"


@dataclass
class _Call:
    name: str
    arguments: Any
    started: bool = False


@dataclass
class _OpenItem:
    kind: str  # "text" | "reasoning"
    key: str
    text: str = ""


def content_text(content: Any) -> str:
    """The text of an ACP content block or a list of tool-call content entries."""
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text") or "")
        return content_text(content.get("content"))
    if isinstance(content, list):
        return "\n".join(t for t in (content_text(c) for c in content) if t)
    return ""


def as_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


@dataclass
class AcpParser:
    """Feed it every message after `session/prompt` was sent (its id in `prompt_id`)."""

    max_step: int | None = None
    prompt_id: int | None = None
    finished: bool = False
    _open: _OpenItem | None = None
    _items: int = 0
    _calls: dict[str, _Call] = field(default_factory=dict)

    # -- what a base may override ---------------------------------------------------------
    def tool_name(self, update: dict[str, Any]) -> str:
        """The tool's name: ACP only has a human title and a coarse `kind`."""
        return str(update.get("title") or update.get("kind") or "tool")

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        """A finished tool call's output as text, and whether it succeeded: the raw output's
        `output` text when it has one, else the content shown to the user, else the raw
        output as JSON."""
        raw = update.get("rawOutput")
        if isinstance(raw, dict) and isinstance(raw.get("output"), str):
            text = raw["output"]
        else:
            text = content_text(update.get("content"))
            if not text and raw is not None:
                text = as_text(raw)
        return text, update.get("status") == "completed"

    def tool_input(self, raw: Any) -> dict[str, Any]:
        """A tool call's arguments, from its raw input (the last one before it ran)."""
        return raw if isinstance(raw, dict) else {}

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        """The events for `session/prompt` answered with a JSON-RPC error."""
        return [ev.TurnFailed(PROMPT_ERROR, "harness_error")]

    def outcome(self, stop_reason: str, result: dict[str, Any]) -> list[ev.AgentEvent]:
        """The events that end the turn, from the prompt's answer."""
        if stop_reason == "end_turn":
            return [ev.TurnFinished()]
        if stop_reason == "max_turn_requests":
            if self.max_step is not None:
                return [ev.StepBudgetReached()]
            notice = "The agent stopped at its own limit of model requests."
            return [ev.Notice(notice), ev.TurnFinished()]
        # cancelled, max_tokens, refusal, or something newer
        return [ev.TurnFailed(f"The agent stopped the turn ({stop_reason}).", "harness_error")]

    # -- the stream ----------------------------------------------------------------------
    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        if self.finished:
            return []
        if "method" not in msg and msg.get("id") is not None and msg.get("id") == self.prompt_id:
            if "error" in msg:
                self.finished = True
                error = msg.get("error")
                return [
                    *self._close(),
                    *self.prompt_error(error if isinstance(error, dict) else {}),
                ]
            return self.answer(msg.get("result"))
        if msg.get("method") != "session/update":
            return []
        params = msg.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return []
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            return self._chunk("text", content_text(update.get("content")))
        if kind == "agent_thought_chunk":
            return self._chunk("reasoning", content_text(update.get("content")))
        if kind == "tool_call":
            return self._tool_started(update)
        if kind == "tool_call_update":
            return self._tool_updated(update)
        return []  # plans, usage gauges, command lists, titles, mode changes

    def _chunk(self, kind: str, delta: str) -> list[ev.AgentEvent]:
        out: list[ev.AgentEvent] = []
        if self._open is not None and self._open.kind != kind:
            out += self._close()
        if self._open is None:
            # Agents often put a paragraph break before text that follows a tool call; an
            # item begins with its first real character.
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
        call_id = str(update.get("toolCallId") or "")
        if not call_id:
            return []
        known = self._calls.get(call_id)
        if known is not None:
            # Announced again while its input streams in (claude-code-acp: `{}` first, then
            # the whole input): an update of the call, its name included, until it starts.
            if not known.started:
                known.name = self.tool_name(update)
            return self._tool_updated(update)
        self._calls[call_id] = _Call(self.tool_name(update), update.get("rawInput"))
        # A `pending` call may still be receiving its input: it starts with the first update
        # that says it runs (and carries the whole input). Without a status it starts now.
        if update.get("status") == "pending":
            return []
        return self._tool_updated(update)

    def _tool_updated(self, update: dict[str, Any]) -> list[ev.AgentEvent]:
        call_id = str(update.get("toolCallId") or "")
        call = self._calls.get(call_id)
        if call is None:
            return []
        if "rawInput" in update and not call.started:
            call.arguments = update["rawInput"]
        out: list[ev.AgentEvent] = []
        status = update.get("status")
        if not call.started and status != "pending":
            call.started = True
            arguments = json.dumps(self.tool_input(call.arguments), ensure_ascii=False)
            out += [*self._close(), ev.ToolCallStarted(call_id, call.name, arguments)]
        if status in ("completed", "failed"):
            del self._calls[call_id]
            output, ok = self.tool_result(update)
            out.append(ev.ToolCallFinished(call_id, output, ok and status == "completed"))
        return out

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
        return out + self.outcome(str(result.get("stopReason") or ""), result)

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before the prompt was answered."""
        if self.finished:
            return []
        self.finished = True
        # An item still open stays open: the engine ends it as incomplete.
        return [ev.TurnFailed(EXITED, "harness_error")]
