"""Pure mapping from `codex app-server` notifications to base-neutral AgentEvents (no I/O).

One parser per turn. It only looks at its own thread and turn: a resumed thread replays
the previous turn's token usage before ours starts, and sub-agents run threads of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.codex.failures import classify_failure
from harness_bases.codex.tool_items import tool_call_finished, tool_call_started

Message = dict[str, Any]

SUMMARY_SEPARATOR = "\n\n"  # between reasoning summary parts, in deltas and in the whole


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
    _compaction_items: bool = False  # a `contextCompaction` item was seen this turn

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
        started = tool_call_started(item)
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
        if kind == "contextCompaction":
            self._compaction_items = True
            return [ev.ConversationCompacted()]
        finished = tool_call_finished(item)
        if finished is None:
            return []
        out: list[ev.AgentEvent] = []
        if item_id not in self._open_calls:  # e.g. declined before it ever started
            started = tool_call_started(item)
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

    def _thread_compacted(self, params: dict[str, Any]) -> list[ev.AgentEvent]:
        # The deprecated twin of the `contextCompaction` item: counted only where no item says it.
        return [] if self._compaction_items else [ev.ConversationCompacted()]

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
    "thread/compacted": CodexParser._thread_compacted,
    "mcpServer/startupStatus/updated": CodexParser._mcp_status,
}
