"""Building a Chat Completions `messages` list: one leading system message, assistant tool
calls grouped with their results, and images that Chat only takes from a user."""

from __future__ import annotations

from uhp_server.gateway.wires.errors import Untranslatable


def image_part(url: str, detail: str | None = None) -> dict:
    image: dict = {"url": url}
    if detail in ("low", "high", "auto"):
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


class ChatMessages:
    """Accumulates messages in order.

    System text from anywhere in the conversation goes into ONE leading system message:
    many chat templates served by vLLM, llama.cpp or Ollama refuse a system message after
    the first position. Images inside tool results (Chat's tool messages take text only)
    follow the run of tool messages in a user message, so tool results stay adjacent to the
    assistant message that called the tools, as Chat requires.
    """

    def __init__(self) -> None:
        self.system: list[str] = []
        self.messages: list[dict] = []
        self._tool_images: list[dict] = []

    def add_system(self, text: str) -> None:
        if text:
            self.system.append(text)

    def add_user(self, parts: list[dict]) -> None:
        self._flush_tool_images()
        if parts:
            self.messages.append({"role": "user", "content": _content(parts)})

    def add_assistant_text(self, text: str) -> None:
        self._flush_tool_images()
        last = self.messages[-1] if self.messages else None
        if last and last["role"] == "assistant" and not last.get("tool_calls"):
            last["content"] = (last["content"] or "") + text
        else:
            self.messages.append({"role": "assistant", "content": text})

    def add_tool_call(self, call_id: str, name: str, arguments: str) -> None:
        self._flush_tool_images()
        last = self.messages[-1] if self.messages else None
        if not (last and last["role"] == "assistant"):
            last = {"role": "assistant", "content": None}
            self.messages.append(last)
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        last.setdefault("tool_calls", []).append(call)

    def add_tool_result(self, call_id: str, parts: list[dict]) -> None:
        texts = [p["text"] for p in parts if p["type"] == "text"]
        images = [p for p in parts if p["type"] == "image_url"]
        content = "\n".join(texts)
        if images:
            content = (content + "\n" if content else "") + "(image attached below)"
            self._tool_images.extend(images)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def build(self) -> list[dict]:
        self._flush_tool_images()
        if not self.messages:
            raise Untranslatable("The request has no messages to send.")
        head = [{"role": "system", "content": "\n\n".join(self.system)}] if self.system else []
        return head + self.messages

    def _flush_tool_images(self) -> None:
        if self._tool_images:
            parts = [text_part("Images returned by the tool calls above:"), *self._tool_images]
            self.messages.append({"role": "user", "content": parts})
            self._tool_images = []


def _content(parts: list[dict]) -> str | list[dict]:
    """One text part as a plain string (what every server takes); several parts stay a list,
    so the boundaries between a client's text blocks survive (Claude Code folds the prompt
    of a turn that got no answer into the next message as a block of its own)."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts
