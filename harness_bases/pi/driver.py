"""One turn of `pi --mode rpc`: commands in on stdin as JSON lines, events out on stdout.

The turn asks for the session's id (`get_state`) and sends the prompt at once (Pi answers
its commands in order), then reads events until `agent_end`; with stdin closed Pi exits. An
interrupt is Pi's own `abort`: the running model call or tool stops, the prompt ends with
`agent_end` and its last response `aborted`, and the session stays resumable. Dialogs an
extension may open (`extension_ui_request`) are cancelled: nobody is at a keyboard.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from harness_bases import events as ev
from harness_bases.base import ImageInput, Process
from harness_bases.json_lines import LineWriter
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.pi.parser import EXITED, PROMPT_ID, STATE_ID, PiParser
from harness_bases.turns import AgentTurn, Message, drain

log = logging.getLogger(__name__)

_DIALOGS = {"select", "confirm", "input", "editor"}


class PiTurn(AgentTurn):
    """A running Pi turn: its stdin, its parser, and the way to stop it."""

    name = "pi"

    def __init__(
        self,
        proc: Process,
        prompt: str,
        *,
        fresh_start: bool,
        images: tuple[ImageInput, ...] = (),
    ) -> None:
        super().__init__()
        self.proc = proc
        self.prompt = prompt
        self.images = images
        self.fresh_start = fresh_start
        self.parser = PiParser()
        self.prompt_sent = False
        self.stdin = LineWriter(proc)

    async def send(self, msg: dict[str, Any]) -> bool:
        """Write one JSON line; False when the CLI's stdin is gone."""
        return await self.stdin.send(msg)

    async def close_stdin(self) -> None:
        await self.stdin.close()

    async def send_interrupt(self) -> bool:
        """Pi's `abort` once the prompt is out; before that, the prompt is never sent."""
        if self.parser.finished:
            return False
        self.parser.interrupt_requested = True
        if not self.prompt_sent:
            return True
        return await self.send({"type": "abort"})

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """Start the prompt, then yield the turn's events until the CLI's stdout ends."""
        if self.fresh_start:
            yield ev.Notice(RESUME_FAILED_NOTICE)
        if self.parser.interrupt_requested:  # stopped before it began: no prompt to send
            await self.close_stdin()
            return
        prompt: dict[str, Any] = {"id": PROMPT_ID, "type": "prompt", "message": self.prompt}
        if self.images:  # pi's RPC prompt takes images beside the message
            prompt["images"] = [
                {
                    "type": "image",
                    "mimeType": i.media_type,
                    "data": await asyncio.to_thread(i.base64),
                }
                for i in self.images
            ]
        if not (await self.send({"id": STATE_ID, "type": "get_state"}) and await self.send(prompt)):
            log.warning("pi_stdin_closed", extra={"stderr": self.proc.stderr_tail()})
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        self.prompt_sent = True
        events = drain(
            self._messages(),
            self.parser,
            close_stdin=self.close_stdin,
            stderr_tail=self.proc.stderr_tail,
            name="pi",
        )
        async for event in events:
            yield event

    async def _messages(self) -> AsyncIterator[Message]:
        """stdout's JSON messages; extension dialogs are cancelled on the way."""
        async for line in self.proc.lines():
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning("pi_non_json_stdout", extra={"line": line[:500]})
                continue
            if not isinstance(msg, dict):
                continue
            if msg.get("type") == "extension_ui_request" and msg.get("method") in _DIALOGS:
                reply = {"type": "extension_ui_response", "id": msg.get("id"), "cancelled": True}
                await self.send(reply)
                continue
            yield msg
