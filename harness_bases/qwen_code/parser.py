"""Qwen Code's ACP quirks, on top of the shared ACP parser.

- The tool's own name is in `_meta.toolName` (`title` is a label such as "Shell: ls").
- A shell command's `rawOutput` is a `shell_result` whose `output` is the command's output
  and whose `exitCode` says whether it succeeded (the call itself is `completed` either way).
- A refused model call answers `session/prompt` with a JSON-RPC error whose `data.details`
  is the provider's status and message ("400 bad request").
- Token usage comes per model response, in the `_meta.usage` of its last message chunk;
  the prompt's answer carries none.

(A tool call announced while the model still streams it, `pending` with empty `rawInput`,
starts at its `in_progress` update: the shared parser does that for every ACP agent.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import AcpParser, Message
from harness_bases.messages import PROVIDER_REFUSED, safe_message

_PROVIDER_STATUS = re.compile(r"^([45]\d\d)\s+(.*)$", re.S)
_OUTCOMES = (ev.TurnFinished, ev.TurnFailed, ev.StepBudgetReached, ev.Notice)


@dataclass
class QwenParser(AcpParser):
    _usage: list[int] = field(default_factory=lambda: [0, 0, 0])  # input, output, cached

    def tool_name(self, update: dict[str, Any]) -> str:
        meta = update.get("_meta")
        name = meta.get("toolName") if isinstance(meta, dict) else None
        return str(name) if name else super().tool_name(update)

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        text, ok = super().tool_result(update)
        raw = update.get("rawOutput")
        if isinstance(raw, dict) and raw.get("type") == "shell_result":
            ok = ok and raw.get("exitCode") == 0
        return text, ok

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        details = data.get("details") if isinstance(data, dict) else None
        found = _PROVIDER_STATUS.match(details.strip()) if isinstance(details, str) else None
        if found is None:
            return super().prompt_error(error)
        return [ev.TurnFailed(safe_message(found.group(2), PROVIDER_REFUSED), "provider_error")]

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        self._count_usage(msg)
        out = super().feed(msg)
        if self.finished and any(self._usage) and not any(isinstance(e, ev.Usage) for e in out):
            usage = ev.Usage(self._usage[0], self._usage[1], self._usage[2])
            position = next((i for i, e in enumerate(out) if isinstance(e, _OUTCOMES)), len(out))
            out.insert(position, usage)
        return out

    def _count_usage(self, msg: Message) -> None:
        params = msg.get("params") if msg.get("method") == "session/update" else None
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or update.get("sessionUpdate") != "agent_message_chunk":
            return
        meta = update.get("_meta")
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if isinstance(usage, dict):
            self._usage[0] += int(usage.get("inputTokens") or 0)
            self._usage[1] += int(usage.get("outputTokens") or 0)
            self._usage[2] += int(usage.get("cachedReadTokens") or 0)
