"""Kimi CLI's ACP quirks, on top of the shared ACP parser.

- A tool call is announced `in_progress` the moment the model starts it, with an empty
  argument text, and every streamed piece of its arguments comes as another `in_progress`
  update whose content is the arguments' text so far; there is no `rawInput`. Here an update
  whose text is not yet a whole JSON object counts as `pending` (the shared parser then waits),
  and the first whose text is one starts the call with those arguments (a JSON object's text
  is whole only once its closing brace arrived). A call whose arguments never parse starts
  when it finishes, with none.
- The title is the tool's name, then `: ` and its key argument ("Shell: echo hi").
- A model call that failed answers `session/prompt` with JSON-RPC's internal error, whose
  `data.error` is the provider client's message: `Error code: 400 - {…}` with the provider's
  error body when the provider answered (a `provider_error`, with the body's message), a
  connection failure's text when it did not.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.acp.parser import AcpParser, Message, content_text
from harness_bases.messages import PROVIDER_REFUSED, safe_message

_PROVIDER_STATUS = re.compile(r"^Error code: ([45]\d\d) - (.*)$", re.S)
_TOOL_UPDATES = ("tool_call", "tool_call_update")


def whole_arguments(text: str) -> dict[str, Any] | None:
    """The arguments when `text` is a whole JSON object, else None."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def provider_message(detail: str) -> str:
    """The provider's own message out of `Error code: 400 - <body>` (an OpenAI-style error
    body, JSON or the Python dict the client printed), else the body as it is."""
    body = detail.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(body)
        except (ValueError, SyntaxError):
            continue
        error = value.get("error") if isinstance(value, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message
    return body


@dataclass
class KimiParser(AcpParser):
    def tool_name(self, update: dict[str, Any]) -> str:
        title = str(update.get("title") or "")
        return title.split(": ", 1)[0] or super().tool_name(update)

    def prompt_error(self, error: dict[str, Any]) -> list[ev.AgentEvent]:
        data = error.get("data")
        detail = data.get("error") if isinstance(data, dict) else None
        found = _PROVIDER_STATUS.match(detail.strip()) if isinstance(detail, str) else None
        if found is None:
            return super().prompt_error(error)
        message = provider_message(found.group(2))
        return [ev.TurnFailed(safe_message(message, PROVIDER_REFUSED), "provider_error")]

    def feed(self, msg: Message) -> list[ev.AgentEvent]:
        return super().feed(self._with_arguments(msg))

    def _with_arguments(self, msg: Message) -> Message:
        """A streaming tool-call update in the shape the shared parser reads: `pending`
        until its arguments are whole, then `in_progress` with them as `rawInput`."""
        params = msg.get("params")
        if not isinstance(params, dict):
            return msg
        update = params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") not in _TOOL_UPDATES:
            return msg
        if update.get("status") != "in_progress":
            return msg
        arguments = whole_arguments(content_text(update.get("content")))
        if arguments is None:
            update = {**update, "status": "pending"}
        else:
            update = {**update, "rawInput": arguments}
        return {**msg, "params": {**params, "update": update}}
