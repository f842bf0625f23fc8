"""The build's log: the installers' own output, bounded. The start of it (what ran, the
first error as a rule) and the end of it (the last error) are kept; the middle of a long log
gives way. Nothing secret enters a build, so nothing is scrubbed."""

from __future__ import annotations

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 448 * 1024


class BuildLog:
    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self.size = 0  # every byte ever added: tells a reader the log grew

    def add(self, data: bytes) -> None:
        self.size += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        self._tail += data
        if len(self._tail) > self._tail_limit:
            cut = len(self._tail) - self._tail_limit
            del self._tail[:cut]
            self._dropped += cut

    def line(self, text: str) -> None:
        """A line of the builder's own (what it reused, what it skipped)."""
        self.add(f"\n# {text}\n".encode())

    def text(self) -> str:
        gap = f"\n[… {self._dropped} bytes of output left out …]\n" if self._dropped else ""
        head = self._head.decode("utf-8", errors="replace")
        return head + gap + self._tail.decode("utf-8", errors="replace")
