"""One turn of `pi --mode rpc`: commands in on stdin as JSON lines, events out on stdout.

The turn asks for the session's id (`get_state`), sends the prompt, and reads events until
`agent_end`; then it closes stdin, on which Pi exits. An interrupt is Pi's own `abort`
command: the running model call or tool stops and the prompt ends with `agent_end`, its last
response `aborted`, the session kept for the next turn. Dialogs an extension may open
(`extension_ui_request`) are cancelled: nobody is at a keyboard.
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
from harness_bases.pi.parser import EXITED, PiParser

log = logging.getLogger(__name__)

RESUME_FAILED_NOTICE = "The earlier conversation could not be resumed; this turn starts a new one."
_STATE_ID = "uhp-state"
_PROMPT_ID = "uhp-prompt"
_DIALOGS = {"select", "confirm", "input", "editor"}


class PiTurn:
    """A running Pi turn: its stdin, its parser, and the way to stop it."""

    name = "pi"

    def __init__(self, proc: Process, prompt: str, *, fresh_start: bool) -> None:
        self.proc = proc
        self.prompt = prompt
        self.fresh_start = fresh_start
        self.parser = PiParser()
        self._stdin_open = True
        self._lock = asyncio.Lock()

    async def send(self, msg: dict[str, Any]) -> bool:
        """Write one JSON line; False when the CLI's stdin is gone."""
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", errors="replace") + b"\n"  # a lone surrogate is not UTF-8
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
        """Pi's `abort`: False when the turn already ended."""
        if self.parser.finished:
            return False
        self.parser.interrupt_requested = True
        return await self.send({"type": "abort"})

    async def interrupt(self) -> bool:
        return await self.send_interrupt()

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """Start the prompt, then yield the turn's events until the CLI's stdout ends."""
        if self.fresh_start:
            yield ev.Notice(RESUME_FAILED_NOTICE)
        if not await self.send({"id": _STATE_ID, "type": "get_state"}):
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        async for event in self._read():
            yield event

    async def _read(self) -> AsyncIterator[ev.AgentEvent]:
        parser = self.parser
        async for msg in self._messages():
            if msg.get("type") == "response":
                for event in await self._response(msg):
                    yield event
                continue
            if msg.get("type") == "extension_ui_request":
                await self._cancel_dialog(msg)
                continue
            for event in parser.feed(msg):
                yield event
            if parser.finished:
                # The prompt is done: with stdin closed Pi finishes its session file and exits.
                await self.close_stdin()
        if not parser.finished:
            log.warning("pi_stdout_eof", extra={"stderr": self.proc.stderr_tail()})
        for event in parser.at_eof():
            yield event

    async def _response(self, msg: dict[str, Any]) -> list[ev.AgentEvent]:
        """The answers to our own commands: the session id, then the prompt's acceptance."""
        if msg.get("id") == _STATE_ID:
            session = (msg.get("data") or {}).get("sessionId")
            started = await self.send({"id": _PROMPT_ID, "type": "prompt", "message": self.prompt})
            out: list[ev.AgentEvent] = [ev.NativeSession(session)] if session else []
            if not started:
                self.parser.finished = True
                out.append(ev.TurnFailed(EXITED, "harness_error"))
            return out
        if msg.get("id") == _PROMPT_ID and not msg.get("success"):
            log.warning("pi_prompt_refused", extra={"error": msg.get("error")})
            self.parser.finished = True
            await self.close_stdin()
            return [ev.TurnFailed("the agent did not accept the prompt", "harness_error")]
        return []

    async def _cancel_dialog(self, msg: dict[str, Any]) -> None:
        if msg.get("method") in _DIALOGS:
            await self.send(
                {"type": "extension_ui_response", "id": msg.get("id"), "cancelled": True}
            )

    async def _messages(self) -> AsyncIterator[dict[str, Any]]:
        async for line in self.proc.lines():
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning("pi_non_json_stdout", extra={"line": line[:500]})
                continue
            if isinstance(msg, dict):
                yield msg
