"""The translator: base-neutral AgentEvents in, UHP output items and stream events out.

The builder keeps the response object as the stream has assembled it so far. Every event it
returns is appended to the response's event log by the caller, which assigns sequence numbers;
the stream, the blocking answer and the read-back are all folds of that log (see fold.py).

The most recent assistant message stays open after its text is complete, until another item
starts or the turn finishes: artifacts are only known at the end, and their citations
(`output_text.annotation.added`) must land on that message before its `output_item.done`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from harness_bases import events as ev
from uhp_server.engine.requests import TaskStatus
from uhp_server.ids import new_id

Event = dict[str, Any]


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


class ResponseBuilder:
    def __init__(self, response: dict[str, Any]) -> None:
        self.response = response
        self._messages: dict[str, int] = {}  # base item key -> output index (open messages)
        self._reasoning: dict[str, int] = {}
        self._calls: dict[str, int] = {}  # base call key -> output index of the function_call
        self._deferred: str | None = None  # a finished message held open for citations
        self._complete: set[str] = set()  # open messages whose text is final
        self.tool_calls = 0

    @classmethod
    def resume(cls, response: dict[str, Any]) -> ResponseBuilder:
        """A builder for a response folded from stored events, its open items still open."""
        builder = cls(response)
        for index, item in enumerate(response["output"]):
            if item.get("status") != "in_progress":
                continue
            if item["type"] == "message":
                builder._messages[f"open-{index}"] = index
            elif item["type"] == "reasoning":
                builder._reasoning[f"open-{index}"] = index
        return builder

    # -- lifecycle -----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy(self.response)

    def created(self) -> list[Event]:
        return [{"type": "response.created", "response": self.snapshot()}]

    def in_progress(self) -> list[Event]:
        return [{"type": "response.in_progress", "response": self.snapshot()}]

    def finish(
        self,
        status: TaskStatus,
        *,
        error: dict[str, Any] | None = None,
        incomplete_details: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None,
        files: list[dict[str, Any]] | None = None,
        notice: str | None = None,
    ) -> list[Event]:
        """Cite the turn's artifacts, close whatever is still open, say what was left out
        (`notice`), and emit the one terminal event."""
        out: list[Event] = []
        item_status = "completed" if status == TaskStatus.COMPLETED else "incomplete"
        for key in list(self._reasoning):
            out += self._close_reasoning(key, None, item_status)
        if files:
            out += self._cite(files)
        for key in list(self._messages):
            final = "completed" if key in self._complete else item_status
            out += self._close_message(key, None, final)
        if notice:
            out += self._notice(notice)
        self.response.update(
            status=status, error=error, incomplete_details=incomplete_details, usage=usage
        )
        terminal = {
            "completed": "response.completed",
            "incomplete": "response.incomplete",
        }.get(status, "response.failed")  # failed and cancelled (Streaming §4)
        out.append({"type": terminal, "response": self.snapshot()})
        return out

    # -- agent events --------------------------------------------------------------------
    def apply(self, event: ev.AgentEvent) -> list[Event]:
        out = self._release_deferred(event)
        match event:
            case ev.TextDelta(item=key, delta=delta):
                out += self._text_delta(key, delta)
            case ev.TextDone(item=key, text=text):
                out += self._complete_text(key, text)
            case ev.ReasoningDelta(item=key, delta=delta):
                out += self._reasoning_delta(key, delta)
            case ev.ReasoningDone(item=key, text=text):
                out += self._close_reasoning(key, text, "completed")
            case ev.ToolCallStarted():
                out += self._tool_call(event)
            case ev.ToolCallFinished():
                out += self._tool_output(event)
            case ev.Notice(text=text):
                out += self._notice(text)
        return out

    def _release_deferred(self, event: ev.AgentEvent) -> list[Event]:
        """Anything but more of the held message closes it: it is no longer the last one."""
        key = self._deferred
        if key is None or getattr(event, "item", None) == key:
            return []
        self._deferred = None
        return self._close_message(key, None, "completed")

    def _notice(self, text: str) -> list[Event]:
        key = new_id("message")
        return self._text_delta(key, text) + self._close_message(key, text, "completed")

    # -- messages ------------------------------------------------------------------------
    def _add_item(self, item: dict[str, Any]) -> tuple[int, Event]:
        index = len(self.response["output"])
        self.response["output"].append(item)
        return index, {
            "type": "response.output_item.added",
            "output_index": index,
            "item": copy.deepcopy(item),
        }

    def _item_done(self, index: int) -> Event:
        item = self.response["output"][index]
        return {
            "type": "response.output_item.done",
            "output_index": index,
            "item": copy.deepcopy(item),
        }

    def _open_message(self, key: str) -> tuple[int, list[Event]]:
        if key in self._messages:
            return self._messages[key], []
        item: dict[str, Any] = {
            "id": new_id("message"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        index, added = self._add_item(item)
        item["content"].append(_text_part(""))
        self._messages[key] = index
        part_added = {
            "type": "response.content_part.added",
            "item_id": item["id"],
            "output_index": index,
            "content_index": 0,
            "part": _text_part(""),
        }
        return index, [added, part_added]

    def _text_delta(self, key: str, delta: str) -> list[Event]:
        index, out = self._open_message(key)
        if not delta:
            return out
        item = self.response["output"][index]
        item["content"][0]["text"] += delta
        out.append(
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
        )
        return out

    def _final_text(self, key: str, text: str | None) -> list[Event]:
        index, out = self._open_message(key)
        part = self.response["output"][index]["content"][0]
        if text is not None and text != part["text"]:
            # The CLI's final text is authoritative; send what the deltas missed, if anything.
            if text.startswith(part["text"]):
                out += self._text_delta(key, text[len(part["text"]) :])
            else:
                part["text"] = text
        return out

    def _complete_text(self, key: str, text: str) -> list[Event]:
        """The message's text is final; it stays open as the citation target for now."""
        out = self._final_text(key, text)
        self._complete.add(key)
        self._deferred = key
        return out

    def _close_message(self, key: str, text: str | None, status: str) -> list[Event]:
        out = self._final_text(key, text)
        index = self._messages.pop(key)
        self._complete.discard(key)
        if self._deferred == key:
            self._deferred = None
        item = self.response["output"][index]
        part = item["content"][0]
        item["status"] = status
        out += [
            {
                "type": "response.output_text.done",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "text": part["text"],
                "logprobs": [],
            },
            {
                "type": "response.content_part.done",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "part": copy.deepcopy(part),
            },
            self._item_done(index),
        ]
        return out

    # -- artifact citations --------------------------------------------------------------
    def _citation_target(self) -> str | None:
        """The open message that is the last output item, if there is one."""
        last = len(self.response["output"]) - 1
        return next((key for key, index in self._messages.items() if index == last), None)

    def _cite(self, files: list[dict[str, Any]]) -> list[Event]:
        """Cite each artifact on the final message; without one, a short message lists them."""
        out: list[Event] = []
        key = self._citation_target()
        if key is None:
            key = new_id("message")
            listing = "Files: " + ", ".join(f["filename"] for f in files)
            out += self._text_delta(key, listing)
            self._complete.add(key)
        index = self._messages[key]
        item = self.response["output"][index]
        part = item["content"][0]
        for annotation in files:
            start, end = _span(part["text"], annotation["filename"])
            cited = {**annotation, "start_index": start, "end_index": end}
            part["annotations"].append(cited)
            out.append(
                {
                    "type": "response.output_text.annotation.added",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "annotation_index": len(part["annotations"]) - 1,
                    "annotation": copy.deepcopy(cited),
                }
            )
        return out

    # -- reasoning -----------------------------------------------------------------------
    def _open_reasoning(self, key: str) -> tuple[int, list[Event]]:
        if key in self._reasoning:
            return self._reasoning[key], []
        item: dict[str, Any] = {
            "id": new_id("reasoning"),
            "type": "reasoning",
            "summary": [],
            "status": "in_progress",
        }
        index, added = self._add_item(item)
        item["summary"].append({"type": "summary_text", "text": ""})
        self._reasoning[key] = index
        part_added = {
            "type": "response.reasoning_summary_part.added",
            "item_id": item["id"],
            "output_index": index,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        }
        return index, [added, part_added]

    def _reasoning_delta(self, key: str, delta: str) -> list[Event]:
        index, out = self._open_reasoning(key)
        if not delta:
            return out
        item = self.response["output"][index]
        item["summary"][0]["text"] += delta
        out.append(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": item["id"],
                "output_index": index,
                "summary_index": 0,
                "delta": delta,
            }
        )
        return out

    def _close_reasoning(self, key: str, text: str | None, status: str) -> list[Event]:
        index, out = self._open_reasoning(key)
        item = self.response["output"][index]
        part = item["summary"][0]
        if text is not None and text != part["text"]:
            if text.startswith(part["text"]):
                out += self._reasoning_delta(key, text[len(part["text"]) :])
            else:
                part["text"] = text
        del self._reasoning[key]
        item["status"] = status
        out += [
            {
                "type": "response.reasoning_summary_text.done",
                "item_id": item["id"],
                "output_index": index,
                "summary_index": 0,
                "text": part["text"],
            },
            {
                "type": "response.reasoning_summary_part.done",
                "item_id": item["id"],
                "output_index": index,
                "summary_index": 0,
                "part": copy.deepcopy(part),
            },
            self._item_done(index),
        ]
        return out

    # -- tools ---------------------------------------------------------------------------
    def _tool_call(self, event: ev.ToolCallStarted) -> list[Event]:
        self.tool_calls += 1
        arguments = event.arguments if _is_json(event.arguments) else json.dumps(event.arguments)
        call_id = event.call if event.call.startswith("call") else f"call_{event.call}"
        item = {
            "id": new_id("function_call"),
            "type": "function_call",
            "call_id": call_id,
            "name": event.name,
            "arguments": "",
            "status": "in_progress",
        }
        index, added = self._add_item(item)
        self._calls[event.call] = index
        item["arguments"] = arguments
        item["status"] = "completed"
        common = {"item_id": item["id"], "output_index": index}
        return [
            added,
            {"type": "response.function_call_arguments.delta", **common, "delta": arguments},
            {
                "type": "response.function_call_arguments.done",
                **common,
                "name": event.name,
                "arguments": arguments,
            },
            self._item_done(index),
        ]

    def _tool_output(self, event: ev.ToolCallFinished) -> list[Event]:
        call_index = self._calls.pop(event.call, None)
        if call_index is None:
            return []  # an output for a call we never saw announced: nothing to attach it to
        call = self.response["output"][call_index]
        item = {
            "id": new_id("function_call_output"),
            "type": "function_call_output",
            "call_id": call["call_id"],
            "output": event.output,
            "status": "completed" if event.ok else "incomplete",
        }
        index, added = self._add_item(item)
        return [added, self._item_done(index)]


def _span(text: str, filename: str) -> tuple[int, int]:
    """Where the text names the file (its path, else its base name); else the whole text."""
    for name in (filename, filename.rsplit("/", 1)[-1]):
        start = text.find(name)
        if name and start >= 0:
            return start, start + len(name)
    return 0, len(text)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (TypeError, ValueError):
        return False
    return True
