"""Rebuild a response object from its ordered events.

The terminal event carries the final response; before that, the object is the one in
`response.created` with every output item applied as the events describe it. Reading a task
back, resuming a stream and recovering after a crash all go through here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

TERMINAL_TYPES = frozenset({"response.completed", "response.incomplete", "response.failed"})


def fold(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    folding = Folding()
    for event in events:
        folding.apply(event)
    return folding.response


class Folding:
    """A response folded one event at a time, for a reader that follows a live stream and
    wants the response after each event without folding the whole log again."""

    def __init__(self) -> None:
        self._response: dict[str, Any] | None = None

    @property
    def started(self) -> bool:
        return self._response is not None

    @property
    def response(self) -> dict[str, Any]:
        """The response as the events applied so far make it (live: the caller's to read,
        not to keep, as later events change it in place)."""
        if self._response is None:
            raise ValueError("no response.created event")
        return self._response

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind in TERMINAL_TYPES or kind in ("response.created", "response.in_progress"):
            self._response = copy.deepcopy(event["response"])
            return
        if self._response is None:
            return
        output = self._response["output"]
        index = event.get("output_index")
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = copy.deepcopy(event["item"])
            if index == len(output):
                output.append(item)
            elif index is not None and index < len(output):
                output[index] = item
            if kind == "response.output_item.added":
                _open_parts(item)
        elif kind == "response.output_text.delta":
            output[index]["content"][event["content_index"]]["text"] += event["delta"]
        elif kind == "response.reasoning_summary_text.delta":
            output[index]["summary"][event["summary_index"]]["text"] += event["delta"]
        elif kind == "response.function_call_arguments.done":
            output[index]["arguments"] = event["arguments"]
        elif kind == "response.output_text.annotation.added":
            part = output[index]["content"][event["content_index"]]
            annotations = part.setdefault("annotations", [])
            del annotations[event["annotation_index"] :]  # a replayed event lands where it was
            annotations.append(copy.deepcopy(event["annotation"]))


def _open_parts(item: dict[str, Any]) -> None:
    """An added item's text parts open empty (content_part.added / summary_part.added)."""
    if item.get("type") == "message" and not item.get("content"):
        item["content"] = [{"type": "output_text", "text": "", "annotations": []}]
    if item.get("type") == "reasoning" and not item.get("summary"):
        item["summary"] = [{"type": "summary_text", "text": ""}]
