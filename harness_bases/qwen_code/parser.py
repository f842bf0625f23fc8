"""Qwen Code's ACP quirks, on top of the shared ACP parser.

- A tool call is announced while the model is still streaming it (`_meta.phase` is
  `preparing`, `rawInput` empty); its arguments come with the `in_progress` update. The call
  starts there, so its arguments are complete.
- The tool's own name is in `_meta.toolName` (`title` is a label such as "Shell: ls").
- A shell command's `rawOutput` is a `shell_result` whose `output` is the command's output
  and whose `exitCode` says whether it succeeded.
- Token usage comes per model response, in the `_meta.usage` of its last message chunk;
  the prompt's answer carries none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import AcpParser, Message, as_text, content_text


@dataclass
class QwenParser(AcpParser):
    _preparing: dict[str, dict[str, Any]] = field(default_factory=dict)
    _usage: list[int] = field(default_factory=lambda: [0, 0, 0])

    def tool_name(self, update: dict[str, Any]) -> str:
        meta = update.get("_meta")
        name = meta.get("toolName") if isinstance(meta, dict) else None
        return str(name) if name else super().tool_name(update)

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        raw = update.get("rawOutput")
        ok = update.get("status") == "completed"
        if isinstance(raw, dict) and raw.get("type") == "shell_result":
            return str(raw.get("output") or ""), ok and raw.get("exitCode") == 0
        if raw is None or isinstance(raw, dict):
            return content_text(update.get("content")), ok
        return as_text(raw), ok

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        update = _update(msg)
        if update is not None:
            self._count_usage(update)
            held = self._hold_preparing_call(update)
            if held is not None:
                return held
        out = super().feed(msg)
        if self.finished and any(self._usage) and not any(isinstance(e, ev.Usage) for e in out):
            usage = ev.Usage(self._usage[0], self._usage[1], self._usage[2])
            position = next((i for i, e in enumerate(out) if _is_outcome(e)), len(out))
            out.insert(position, usage)
        return out

    def _hold_preparing_call(self, update: dict[str, Any]) -> list[ev.AgentEvent] | None:
        """None to let the update through, or what to emit in its place."""
        call = str(update.get("toolCallId") or "")
        kind = update.get("sessionUpdate")
        meta = update.get("_meta")
        if kind == "tool_call" and isinstance(meta, dict) and meta.get("phase") == "preparing":
            self._preparing[call] = update
            return []
        if kind == "tool_call_update" and call in self._preparing:
            announced = self._preparing.pop(call)
            merged = {**announced, **update, "sessionUpdate": "tool_call"}
            return self._tool_started(merged)
        return None

    def _count_usage(self, update: dict[str, Any]) -> None:
        meta = update.get("_meta")
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if update.get("sessionUpdate") != "agent_message_chunk" or not isinstance(usage, dict):
            return
        self._usage[0] += int(usage.get("inputTokens") or 0)
        self._usage[1] += int(usage.get("outputTokens") or 0)
        self._usage[2] += int(usage.get("cachedReadTokens") or 0)


def _update(msg: Message) -> dict[str, Any] | None:
    if msg.get("method") != "session/update":
        return None
    params = msg.get("params")
    update = params.get("update") if isinstance(params, dict) else None
    return update if isinstance(update, dict) else None


def _is_outcome(event: ev.AgentEvent) -> bool:
    return isinstance(event, ev.TurnFinished | ev.TurnFailed | ev.StepBudgetReached | ev.Notice)
