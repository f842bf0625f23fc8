"""A task's event log rendered as Chat Completions: the answer, and what the agent did.

The agent's text becomes `content`, its messages separated by a blank line. Its reasoning
and tool use become `reasoning_content` (the field chat UIs fold away): reasoning as the
agent wrote it, each tool call as one readable line (`→ shell: ls -la`) and its output
summarised on the next (`← 12 lines: total 48`). Files the turn produced are listed after
the answer as markdown download links. Streaming and blocking answers are both built from
these pieces, so their content is identical, byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SUMMARY_CHARS = 160  # a tool line's longest summary
_SHELL_ARGUMENTS = ("cmd", "command")
_SHELL_WRAPPERS = (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"], ["/bin/sh", "-c"])


@dataclass(frozen=True)
class Piece:
    """One streamed delta: answer text or reasoning text."""

    content: str = ""
    reasoning: str = ""


@dataclass
class ChatRenderer:
    """Feed it the log's events in order; it returns the pieces each one adds."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    final: dict[str, Any] | None = None  # the response, once the terminal event arrived
    _message: str | None = None  # the message item whose text is streaming
    _reasoning_item: str | None = None
    _files: dict[str, dict[str, Any]] = field(default_factory=dict)  # by file id

    @property
    def text(self) -> str:
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    def feed(self, event: dict[str, Any]) -> list[Piece]:
        kind = event["type"]
        if kind == "response.output_text.delta":
            return self._answer(event["item_id"], event["delta"])
        if kind == "response.reasoning_summary_text.delta":
            return self._think(event["item_id"], event["delta"])
        if kind == "response.output_item.done":
            return self._item_done(event["item"])
        if kind == "response.output_text.annotation.added":
            annotation = event["annotation"]
            if annotation.get("download_url"):
                self._files.setdefault(annotation.get("file_id", ""), annotation)
            return []
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event["response"]
            return self._emit(self._file_list(), "")
        return []

    def _answer(self, item_id: str, delta: str) -> list[Piece]:
        if not delta:
            return []
        if item_id != self._message and self.content:
            delta = "\n\n" + delta  # another message of the agent's: a new paragraph
        self._message = item_id
        return self._emit(delta, "")

    def _think(self, item_id: str, delta: str) -> list[Piece]:
        if not delta:
            return []
        if item_id != self._reasoning_item:
            delta = self._line_break() + delta
        self._reasoning_item = item_id
        return self._emit("", delta)

    def _item_done(self, item: dict[str, Any]) -> list[Piece]:
        if item.get("type") == "function_call":
            line = f"→ {item.get('name', 'tool')}: {describe_call(item.get('arguments', ''))}\n"
            return self._emit("", self._line_break() + line)
        if item.get("type") == "function_call_output":
            return self._emit("", f"← {describe_output(item.get('output'))}\n")
        return []

    def _line_break(self) -> str:
        self._reasoning_item = None
        text = self.reasoning_text
        return "\n" if text and not text.endswith("\n") else ""

    def _file_list(self) -> str:
        if not self._files:
            return ""
        lines = [
            f"- [{_link_text(f['filename'])}]({f['download_url']})" for f in self._files.values()
        ]
        lead = "\n\n" if self.content else ""
        return lead + "Files:\n" + "\n".join(lines)

    def _emit(self, content: str, reasoning: str) -> list[Piece]:
        if not content and not reasoning:
            return []
        if content:
            self.content.append(content)
        if reasoning:
            self.reasoning.append(reasoning)
        return [Piece(content, reasoning)]


def describe_call(arguments: str) -> str:
    """A tool call's arguments in one line: a shell command as typed, else compact JSON."""
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return _clip(arguments)
    if isinstance(value, dict):
        for name in _SHELL_ARGUMENTS:
            command = value.get(name)
            if isinstance(command, list) and all(isinstance(p, str) for p in command):
                command = _unwrap(command)
            if isinstance(command, str):
                return _clip(command)
    return _clip(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def describe_output(output: Any) -> str:
    """A tool's output summarised: how many lines, and the first one that says something."""
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    first = _clip(lines[0].strip())
    return first if len(lines) == 1 else f"{len(lines)} lines: {first}"


def _unwrap(argv: list[str]) -> str:
    for wrapper in _SHELL_WRAPPERS:
        if argv[: len(wrapper)] == wrapper and len(argv) == len(wrapper) + 1:
            return argv[-1]
    return " ".join(argv)


def _clip(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= SUMMARY_CHARS else one_line[: SUMMARY_CHARS - 1] + "…"


def _link_text(name: str) -> str:
    return name.replace("[", "\\[").replace("]", "\\]")
