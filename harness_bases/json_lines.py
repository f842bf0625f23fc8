"""A turn of a program that takes `{"prompt": …}` as its first stdin line, then
`{"type": "interrupt"}` to stop, and writes one JSON event a line on stdout: what the
launchers and drivers of the bases without a protocol of their own speak (mini-swe-agent's
driver, Copilot CLI's launcher).

The prompt goes on stdin, never argv (prompts above 128 KiB fail there). Once the parser
knows the outcome stdin is closed (drain) and the program exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, Protocol

from harness_bases import events as ev
from harness_bases.base import Process
from harness_bases.turns import AgentTurn, Message, StreamParser, drain

log = logging.getLogger(__name__)

EXITED = "the agent exited unexpectedly"


class InterruptibleParser(StreamParser, Protocol):
    interrupt_requested: bool  # set once the engine asked the turn to stop


class LineWriter:
    """A program's stdin as JSON lines, one writer at a time (the turn and its interrupt),
    closed once: a write after it, or after the program went away, answers False."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self._open = True
        self._lock = asyncio.Lock()

    async def send(self, msg: dict[str, Any]) -> bool:
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", errors="replace") + b"\n"  # a lone surrogate is not UTF-8
        async with self._lock:
            if not self._open:
                return False
            try:
                await self.proc.write(data)
            except (ConnectionError, OSError):
                self._open = False
                return False
        return True

    async def close(self) -> None:
        async with self._lock:
            if self._open:
                self._open = False
                with contextlib.suppress(Exception):
                    await self.proc.close_stdin()


class PromptedTurn(AgentTurn):
    """A running program: its stdin, its parser, and the way to stop it. `opening` are
    events known before the program says anything (the conversation's id, a notice)."""

    def __init__(
        self,
        proc: Process,
        prompt: str,
        parser: InterruptibleParser,
        *,
        name: str,
        opening: Sequence[ev.AgentEvent] = (),
    ) -> None:
        super().__init__()
        self.name = name
        self.proc = proc
        self.prompt = prompt
        self.parser = parser
        self.opening = tuple(opening)
        self.prompt_sent = False
        self.stdin = LineWriter(proc)

    async def send(self, msg: dict[str, Any]) -> bool:
        """Write one JSON line; False when the program's stdin is gone."""
        return await self.stdin.send(msg)

    async def close_stdin(self) -> None:
        await self.stdin.close()

    async def send_interrupt(self) -> bool:
        if self.parser.finished:
            return False
        self.parser.interrupt_requested = True
        if not self.prompt_sent:
            return True  # the prompt is never sent
        return await self.send({"type": "interrupt"})

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        for event in self.opening:
            yield event
        if self.parser.interrupt_requested:  # stopped before it began
            await self.close_stdin()
            return
        if not await self.send({"prompt": self.prompt}):
            log.warning(f"{self.name}_stdin_closed", extra={"stderr": self.proc.stderr_tail()})
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        self.prompt_sent = True
        events = drain(
            self._messages(),
            self.parser,
            close_stdin=self.close_stdin,
            stderr_tail=self.proc.stderr_tail,
            name=self.name,
        )
        async for event in events:
            yield event

    async def _messages(self) -> AsyncIterator[Message]:
        async for line in self.proc.lines():
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning(f"{self.name}_non_json_stdout", extra={"line": line[:500]})
                continue
            if isinstance(msg, dict):
                yield msg
