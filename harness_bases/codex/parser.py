"""Pure mapping from `codex app-server` notifications to base-neutral AgentEvents (no I/O).

One parser per turn. It only looks at its own thread and turn: a resumed thread replays
the previous turn's token usage before ours starts, and sub-agents run threads of their own.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev

log = logging.getLogger(__name__)

Message = dict[str, Any]

SUMMARY_SEPARATOR = "\n\n"  # between reasoning summary parts, in deltas and in the whole

# codexErrorInfo values that say the model provider (via our gateway) failed the request.
_PROVIDER_ERRORS = {
    "contextWindowExceeded",
    "usageLimitExceeded",
    "rateLimitExceeded",
    "serverOverloaded",
    "modelNotFound",
    "internalServerError",
    "unauthorized",
    "flexUnavailable",
    "policyCapacityUnavailable",
    "cyberPolicy",
    "misalignmentPolicyViolation",
}
# Object-shaped codexErrorInfo variants: HTTP trouble talking to the provider.
_PROVIDER_HTTP_ERRORS = {
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
}


def classify_failure(error: dict[str, Any] | None) -> ev.TurnFailed:
    """A TurnFailed for Codex's TurnError, with code `provider_error` when the model
    provider failed the request and `harness_error` otherwise."""
    if not error:
        return ev.TurnFailed("The agent reported a failure without details.", "harness_error")
    raw = str(error.get("message") or "The agent reported a failure.")
    info = error.get("codexErrorInfo")
    body_message = _http_error_body_message(raw)
    provider = (
        (isinstance(info, str) and info in _PROVIDER_ERRORS)
        or (isinstance(info, dict) and bool(_PROVIDER_HTTP_ERRORS & info.keys()))
        # A 400 from upstream arrives as codexErrorInfo "other" whose message is the
        # provider's raw error body ({"error": {...}}); nothing else in Codex looks so.
        or body_message is not None
    )
    message = body_message or raw
    return ev.TurnFailed(message, "provider_error" if provider else "harness_error")


def _http_error_body_message(text: str) -> str | None:
    """The message of an OpenAI-style error body, if `text` is one."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or text)
    if isinstance(error, str):
        return error
    return None


@dataclass
class _Tokens:
    input: int = 0
    output: int = 0
    cached: int = 0

    @classmethod
    def of(cls, breakdown: dict[str, Any]) -> _Tokens:
        return cls(
            int(breakdown.get("inputTokens") or 0),
            int(breakdown.get("outputTokens") or 0),
            int(breakdown.get("cachedInputTokens") or 0),
        )

    def minus(self, other: _Tokens) -> _Tokens:
        return _Tokens(
            self.input - other.input, self.output - other.output, self.cached - other.cached
        )


@dataclass
class CodexParser:
    """Feed it every message after `turn/start` was accepted; it returns the events."""

    thread_id: str
    turn_id: str | None = None
    finished: bool = False  # the turn's outcome was seen (completed, failed or interrupted)
    _text: dict[str, str] = field(default_factory=dict)
    _reasoning: dict[str, str] = field(default_factory=dict)
    _summary_index: dict[str, int] = field(default_factory=dict)
    _open_calls: set[str] = field(default_factory=set)
    _usage_base: _Tokens | None = None
    _fatal_error: dict[str, Any] | None = None

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        method = msg.get("method")
        params = msg.get("params")
        if not isinstance(method, str) or not isinstance(params, dict) or "id" in msg:
            return []
        if not self._ours(params):
            return []
        handler = _HANDLERS.get(method)
        return handler(self, params) if handler else []

    def at_eof(self) -> list[ev.AgentEvent]:
        """Events for stdout ending before the turn's outcome."""
        if self.finished:
            return []
        self.finished = True
        if self._fatal_error is not None:
            return [classify_failure(self._fatal_error)]
        return [ev.TurnFailed("the agent exited unexpectedly", "harness_error")]

    def _ours(self, params: dict[str, Any]) -> bool:
        thread = params.get("threadId")
        if thread is not None and thread != self.thread_id:
            return False
        turn = params.get("turnId") or (params.get("turn") or {}).get("id")
        return turn is None or self.turn_id is None or turn == self.turn_id

    # -- turn lifecycle ------------------------------------------------------------------

    def _turn_started(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        if self.turn_id is None:
            self.turn_id = (params.get("turn") or {}).get("id")
        return []

    def _turn_completed(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        turn = params.get("turn") or {}
        status = turn.get("status")
        if status == "inProgress" or self.finished:
            return []
        self.finished = True
        if status == "completed":
            return [ev.TurnFinished()]
        if status == "failed":
            return [classify_failure(turn.get("error") or self._fatal_error)]
        return []  # interrupted: the engine asked for it and knows

    def _error(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        # willRetry errors are Codex's own "Reconnecting... n/m" progress; the final one
        # precedes turn/completed(failed), which carries the same error.
        if not params.get("willRetry"):
            self._fatal_error = params.get("error") or {}
        return []

    # -- streamed text -------------------------------------------------------------------

    def _agent_delta(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        item, delta = str(params.get("itemId")), str(params.get("delta") or "")
        if not delta:
            return []
        self._text[item] = self._text.get(item, "") + delta
        return [ev.TextDelta(item, delta)]

    def _summary_delta(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        item, delta = str(params.get("itemId")), str(params.get("delta") or "")
        index = int(params.get("summaryIndex") or 0)
        out: list[ev.AgentEvent] = []
        last = self._summary_index.get(item)
        if last is not None and index != last and self._reasoning.get(item):
            out.append(self._reasoning_delta(item, SUMMARY_SEPARATOR))
        self._summary_index[item] = index
        if delta:
            out.append(self._reasoning_delta(item, delta))
        return out

    def _reasoning_delta(self, item: str, delta: str) -> ev.ReasoningDelta:
        self._reasoning[item] = self._reasoning.get(item, "") + delta
        return ev.ReasoningDelta(item, delta)

    # -- items ---------------------------------------------------------------------------

    def _item_started(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        item = params.get("item") or {}
        started = _tool_call_started(item)
        if started is None:
            return []
        self._open_calls.add(started.call)
        return [started]

    def _item_completed(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        item = params.get("item") or {}
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind == "agentMessage":
            return self._done(self._text, item_id, str(item.get("text") or ""), text=True)
        if kind == "reasoning":
            parts = item.get("summary") or item.get("content") or []
            whole = SUMMARY_SEPARATOR.join(str(p) for p in parts)
            return self._done(self._reasoning, item_id, whole, text=False)
        finished = _tool_call_finished(item)
        if finished is None:
            return []
        out: list[ev.AgentEvent] = []
        if item_id not in self._open_calls:  # e.g. declined before it ever started
            started = _tool_call_started(item)
            if started is not None:
                out.append(started)
        self._open_calls.discard(item_id)
        return [*out, finished]

    def _done(
        self, streamed: dict[str, str], item: str, whole: str, text: bool
    ) -> list[ev.AgentEvent]:
        so_far = streamed.pop(item, "")
        if not whole and not so_far:
            return []
        whole = whole or so_far
        out: list[ev.AgentEvent] = []
        # Deltas must add up to the whole text; send what the stream did not.
        if whole.startswith(so_far) and len(whole) > len(so_far):
            rest = whole[len(so_far) :]
            out.append(ev.TextDelta(item, rest) if text else ev.ReasoningDelta(item, rest))
        out.append(ev.TextDone(item, whole) if text else ev.ReasoningDone(item, whole))
        return out

    # -- usage and notices ---------------------------------------------------------------

    def _token_usage(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        usage = params.get("tokenUsage") or {}
        total, last = _Tokens.of(usage.get("total") or {}), _Tokens.of(usage.get("last") or {})
        # `total` counts the whole thread; the turn started where the first update's
        # total minus its own request's share (`last`) left off.
        if self._usage_base is None:
            self._usage_base = total.minus(last)
        turn = total.minus(self._usage_base)
        return [ev.Usage(turn.input, turn.output, turn.cached)]

    def _mcp_status(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        if params.get("status") != "failed":
            return []
        name, error = params.get("name"), params.get("error")
        detail = f": {error}" if error else ""
        return [ev.Notice(f"The MCP server {name} could not be started{detail}.")]


_HANDLERS = {
    "turn/started": CodexParser._turn_started,
    "turn/completed": CodexParser._turn_completed,
    "error": CodexParser._error,
    "item/agentMessage/delta": CodexParser._agent_delta,
    "item/reasoning/summaryTextDelta": CodexParser._summary_delta,
    "item/started": CodexParser._item_started,
    "item/completed": CodexParser._item_completed,
    "thread/tokenUsage/updated": CodexParser._token_usage,
    "mcpServer/startupStatus/updated": CodexParser._mcp_status,
}


# -- tool-like items -------------------------------------------------------------------------


def _tool_call_started(item: dict[str, Any]) -> ev.ToolCallStarted | None:
    kind, call = item.get("type"), str(item.get("id"))
    if kind == "commandExecution":
        return ev.ToolCallStarted(call, "shell", _json({"command": item.get("command", "")}))
    if kind == "fileChange":
        changes = [_change(c) for c in item.get("changes") or []]
        return ev.ToolCallStarted(call, "apply_patch", _json({"changes": changes}))
    if kind == "mcpToolCall":
        name = f"{item.get('server')}.{item.get('tool')}"
        return ev.ToolCallStarted(call, name, _json(item.get("arguments")))
    if kind == "dynamicToolCall":
        namespace = item.get("namespace")
        tool = str(item.get("tool"))
        name = f"{namespace}.{tool}" if namespace else tool
        return ev.ToolCallStarted(call, name, _json(item.get("arguments")))
    if kind == "webSearch":
        return ev.ToolCallStarted(call, "web_search", _json({"query": item.get("query", "")}))
    if kind == "imageView":
        return ev.ToolCallStarted(call, "view_image", _json({"path": item.get("path", "")}))
    if kind == "collabAgentToolCall":
        arguments = {"prompt": item.get("prompt"), "receivers": item.get("receiverThreadIds")}
        return ev.ToolCallStarted(call, f"agents.{item.get('tool')}", _json(arguments))
    return None


def _tool_call_finished(item: dict[str, Any]) -> ev.ToolCallFinished | None:
    kind, call, status = item.get("type"), str(item.get("id")), item.get("status")
    if kind == "commandExecution":
        output = str(item.get("aggregatedOutput") or "")
        ok = status == "completed" and item.get("exitCode") == 0
        return ev.ToolCallFinished(call, output, ok)
    if kind == "fileChange":
        lines = [f"{c['kind']}: {c['path']}" for c in map(_change, item.get("changes") or [])]
        return ev.ToolCallFinished(call, "\n".join(lines), status == "completed")
    if kind == "mcpToolCall":
        error = item.get("error")
        if error:
            return ev.ToolCallFinished(call, str(error.get("message", "")), False)
        output = _content_text((item.get("result") or {}).get("content"))
        return ev.ToolCallFinished(call, output, status == "completed")
    if kind == "dynamicToolCall":
        output = _content_text(item.get("contentItems"))
        return ev.ToolCallFinished(call, output, bool(item.get("success")))
    if kind in ("webSearch", "imageView"):
        return ev.ToolCallFinished(call, "", True)
    if kind == "collabAgentToolCall":
        return ev.ToolCallFinished(call, _json(item.get("agentsStates")), status == "completed")
    return None


def _change(change: dict[str, Any]) -> dict[str, Any]:
    kind = change.get("kind")
    kind_name = kind.get("type") if isinstance(kind, dict) else kind
    return {"path": change.get("path"), "kind": kind_name, "diff": change.get("diff", "")}


def _content_text(content: Any) -> str:
    """Text of MCP / dynamic tool content parts; other parts as JSON."""
    if not isinstance(content, list):
        return "" if content is None else _json(content)
    parts = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(_json(part))
    return "\n".join(parts)


def _json(value: Any) -> str:
    return json.dumps({} if value is None else value, ensure_ascii=False)
