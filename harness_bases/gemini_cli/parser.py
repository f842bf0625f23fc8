"""Gemini CLI's ACP quirks, on top of the shared ACP parser.

- The tool's own name is the part of `toolCallId` before `__` (`run_shell_command__<id>`);
  `title` is a label (a shell call's is the command itself).
- A shell command's exit code is not in the update: a command that printed nothing says
  "Command exited with code: N" as its output, which is read as a failure; so is a command
  its shell tool refused to run ("Blocked: command substitution detected …").
- A refused model call answers `session/prompt` with a JSON-RPC error whose message holds
  the provider's error body; it is reported as `provider_error` without it.
- Token usage is in the prompt's answer, `_meta.quota.token_count`.
- Each thought chunk is rendered as `**<subject>**\n<description>`: a streamed piece of
  plain reasoning (no subject) arrives as `****\n<piece>`, its surrounding whitespace
  trimmed by the CLI. The empty subject is dropped; the lost whitespace cannot be restored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import AcpParser, Message
from harness_bases.messages import PROVIDER_REFUSED, safe_message

_FAILED_COMMAND = re.compile(
    r"^(Command (exited with code: [1-9]\d*|terminated by signal|failed:)|Blocked: )"
)
_PROVIDER_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"')


_NO_SUBJECT = "****\n"


@dataclass
class GeminiParser(AcpParser):
    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        params = msg.get("params") if msg.get("method") == "session/update" else None
        update = params.get("update") if isinstance(params, dict) else None
        thought = isinstance(update, dict) and update.get("sessionUpdate") == "agent_thought_chunk"
        if isinstance(params, dict) and isinstance(update, dict) and thought:
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if isinstance(content, dict) and isinstance(text, str) and text.startswith(_NO_SUBJECT):
                trimmed = {**content, "text": text.removeprefix(_NO_SUBJECT)}
                update = {**update, "content": trimmed}
                msg = {**msg, "params": {**params, "update": update}}
        return super().feed(msg)

    def tool_name(self, update: dict[str, Any]) -> str:
        call_id = str(update.get("toolCallId") or "")
        name, separator, _ = call_id.partition("__")
        return name if separator and name else super().tool_name(update)

    def tool_result(self, update: dict[str, Any]) -> tuple[str, bool]:
        text, ok = super().tool_result(update)
        if update.get("kind") == "execute" and _FAILED_COMMAND.match(text):
            ok = False
        return text, ok

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        message = error.get("message")
        if not isinstance(message, str) or not message:
            return super().prompt_error(error)
        found = _PROVIDER_MESSAGE.search(message)
        said = found.group(1) if found else message
        return [ev.TurnFailed(safe_message(said, PROVIDER_REFUSED), "provider_error")]

    def answer(self, result: Any) -> list[ev.AgentEvent]:
        out = super().answer(result)
        usage = _quota_usage(result)
        if usage is not None and not any(isinstance(e, ev.Usage) for e in out):
            position = next(
                (i for i, e in enumerate(out) if not isinstance(e, ev.TextDone | ev.ReasoningDone)),
                len(out),
            )
            out.insert(position, usage)
        return out


def _quota_usage(result: Any) -> ev.Usage | None:
    meta = result.get("_meta") if isinstance(result, dict) else None
    quota = meta.get("quota") if isinstance(meta, dict) else None
    count = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(count, dict):
        return None
    return ev.Usage(int(count.get("input_tokens") or 0), int(count.get("output_tokens") or 0), 0)
