"""One turn of the mini-swe-agent driver: the prompt in on stdin, JSON events out on stdout.

The prompt goes as the first JSON line (never an argv element: prompts above 128 KiB fail
there); an interrupt is `{"type": "interrupt"}` on a later line, and the driver stops the
model call or command that runs and ends with `interrupted`. Once the outcome is known stdin
is closed (drain) and the driver exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from harness_bases import events as ev
from harness_bases.base import Process
from harness_bases.mini_swe_agent.parser import EXITED, MiniParser
from harness_bases.turns import AgentTurn, Message, drain

log = logging.getLogger(__name__)


class MiniTurn(AgentTurn):
    """A running driver: its stdin, its parser, and the way to stop it."""

    name = "mini_swe_agent"

    def __init__(self, proc: Process, prompt: str) -> None:
        super().__init__()
        self.proc = proc
        self.prompt = prompt
        self.parser = MiniParser()
        self.prompt_sent = False
        self._stdin_open = True
        self._lock = asyncio.Lock()

    async def send(self, msg: dict[str, Any]) -> bool:
        """Write one JSON line; False when the driver's stdin is gone."""
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", errors="replace") + b"\n"
        async with self._lock:
            if not self._stdin_open:
                return False
            try:
                await self.proc.write(data)
            except (ConnectionError, OSError):
                self._stdin_open = False
                return False
        return True

    async def close_stdin(self) -> None:
        async with self._lock:
            if self._stdin_open:
                self._stdin_open = False
                with contextlib.suppress(Exception):
                    await self.proc.close_stdin()

    async def send_interrupt(self) -> bool:
        if self.parser.finished:
            return False
        self.parser.interrupt_requested = True
        if not self.prompt_sent:
            return True  # the prompt is never sent
        return await self.send({"type": "interrupt"})

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        if self.parser.interrupt_requested:
            await self.close_stdin()
            return
        if not await self.send({"prompt": self.prompt}):
            log.warning("mini_swe_agent_stdin_closed", extra={"stderr": self.proc.stderr_tail()})
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        self.prompt_sent = True
        events = drain(
            self._messages(),
            self.parser,
            close_stdin=self.close_stdin,
            stderr_tail=self.proc.stderr_tail,
            name="mini_swe_agent",
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
                log.warning("mini_swe_agent_non_json_stdout", extra={"line": line[:500]})
                continue
            if isinstance(msg, dict):
                yield msg
