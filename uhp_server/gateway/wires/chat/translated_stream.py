"""What every Chat-to-another-wire stream translator shares: read the Chat SSE, start the
builder at the first delta (or at the end, for an empty stream), hand it each delta, and pass
on whatever it has produced so far. Each wire's module says only how its builder starts and
how its pending output becomes bytes."""

from __future__ import annotations

import json
from typing import Generic, Protocol, TypeVar

from uhp_server.gateway.wires.chat.reader import ChatDelta, ChatStreamReader

EARLY_END = "The model provider's stream ended before the answer was finished."


class Builder(Protocol):
    def apply(self, delta: ChatDelta) -> None: ...

    def end(self, stream_done: bool) -> None: ...


B = TypeVar("B", bound=Builder)


class TranslatedStream(Generic[B]):
    """Chat SSE bytes in, the CLI's wire out; each delta goes out as it arrives."""

    content_type = "text/event-stream"

    def __init__(self, builder: B) -> None:
        self._reader = ChatStreamReader()
        self._builder = builder
        self._started = False

    def feed(self, chunk: bytes) -> bytes:
        return self._apply(self._reader.feed(chunk))

    def finish(self) -> bytes:
        out = self._apply(self._reader.flush())
        if not self._started:
            self._start()
        self._builder.end(self._reader.done)
        return out + self._take() + self._closing()

    def _apply(self, deltas: list[ChatDelta]) -> bytes:
        for delta in deltas:
            if not self._started:
                self._start()
            self._builder.apply(delta)
        return self._take()

    def _start(self) -> None:
        self._started = True
        self._begin(self._reader)

    def _begin(self, reader: ChatStreamReader) -> None:
        """Start the builder with what the stream said of itself (id, model, created)."""
        raise NotImplementedError

    def _take(self) -> bytes:
        """The builder's output since the last call, as bytes."""
        raise NotImplementedError

    def _closing(self) -> bytes:
        """Anything a wire sends after the builder's last output (nothing, by default)."""
        return b""


def arguments_object(arguments: str) -> dict:
    """A tool call's streamed arguments as the object the wires carry whole ({} when they
    are empty or not a JSON object: the CLI's tool then says what is missing)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
