"""Drives one turn of `claude -p` in stream-json mode: prompt in on stdin, events out.

`--input-format stream-json` keeps stdin open as a control channel: the prompt goes in as
a `user` message (no argv limit), an interrupt goes in as a `control_request`, and closing
stdin after the `result` lets the CLI flush its transcript and exit on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from harness_bases import events as ev
from harness_bases.base import ImageInput, Process, TurnSpec, UserAsker
from harness_bases.claude_code import questions
from harness_bases.claude_code.parser import EXITED, ClaudeParser
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.turns import AgentTurn, Message, drain

log = logging.getLogger(__name__)

_NO_ONE = "No user is available to answer; continue without it."


def user_message(prompt: str, images: tuple[ImageInput, ...] = ()) -> dict[str, Any]:
    """The stream-json user message; images go along as base64 image blocks (the CLI has no
    flag that reads an image file into the prompt)."""
    if not images:
        return {"type": "user", "message": {"role": "user", "content": prompt}}
    blocks: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for image in images:
        source = {"type": "base64", "media_type": image.media_type, "data": image.base64()}
        blocks.append({"type": "image", "source": source})
    return {"type": "user", "message": {"role": "user", "content": blocks}}


def control_reply(request: dict[str, Any]) -> dict[str, Any]:
    """How the driver answers the CLI's own control requests (permission prompts, questions):
    nobody is at a keyboard, so a tool that asks is denied and anything else is refused.
    `--permission-prompts none` should keep these from coming at all; this is the net."""
    request_id = request.get("request_id")
    subtype = (request.get("request") or {}).get("subtype")
    if subtype == "can_use_tool":
        answer = {"behavior": "deny", "message": _NO_ONE}
        return {
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": answer},
        }
    return {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": _NO_ONE},
    }


class ClaudeCodeTurn(AgentTurn):
    """One turn of a started `claude -p`; its stdin is shared by the turn and `interrupt`."""

    name = "claude_code"

    def __init__(self, proc: Process, turn: TurnSpec, *, fresh_start: bool) -> None:
        super().__init__()
        self.proc = proc
        self.prompt = turn.prompt
        self.images = turn.images
        self.ask_user = turn.ask_user
        self._asking: set[asyncio.Task[None]] = set()  # questions waiting for the user
        self.fresh_start = fresh_start  # the native session could not be resumed
        self.parser = ClaudeParser()
        self.stdin_open = True
        self._interrupts = 0
        self._lock = asyncio.Lock()

    async def send(self, msg: dict[str, Any]) -> bool:
        """Write one JSON line; False when the CLI's stdin is gone."""
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8", errors="replace") + b"\n"  # a lone surrogate is not UTF-8
        async with self._lock:
            if not self.stdin_open:
                return False
            try:
                await self.proc.write(data)
            except (ConnectionError, OSError):
                self.stdin_open = False
                return False
        return True

    async def close_stdin(self) -> None:
        async with self._lock:
            if self.stdin_open:
                self.stdin_open = False
                with contextlib.suppress(Exception):
                    await self.proc.close_stdin()

    async def send_interrupt(self) -> bool:
        """Ask the CLI to stop the turn: it answers, ends the turn with a `result` and keeps
        the conversation resumable. False when the turn already ended."""
        if self.parser.finished:
            return False
        self.parser.interrupt_requested = True
        self._interrupts += 1
        request_id = f"uhp-interrupt-{self._interrupts}"
        request = {"type": "control_request", "request_id": request_id}
        return await self.send({**request, "request": {"subtype": "interrupt"}})

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        """Send the prompt, then yield the turn's events until the CLI's stdout ends."""
        if self.fresh_start:
            yield ev.Notice(RESUME_FAILED_NOTICE)
        message = await asyncio.to_thread(user_message, self.prompt, self.images)  # file reads
        if not await self.send(message):
            log.warning("claude_code_stdin_closed", extra={"stderr": self.proc.stderr_tail()})
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        events = drain(
            self._messages(),
            self.parser,
            close_stdin=self.close_stdin,
            stderr_tail=self.proc.stderr_tail,
            name="claude_code",
        )
        async for event in events:
            yield event

    async def _answer_question(self, msg: dict[str, Any], ask: UserAsker) -> None:
        reply = await questions.answered(msg, ask)
        if reply is not None:
            await self.send(reply)

    async def _messages(self) -> AsyncIterator[Message]:
        """stdout's JSON messages; the CLI's own control requests are answered on the way."""
        async for line in self.proc.lines():
            msg = _parse_line(line)
            if msg is None:
                continue
            if msg.get("type") == "control_request":
                log.info("claude_code_control_request", extra={"request": msg.get("request")})
                if self.ask_user is not None and questions.is_question_request(msg):
                    # Answered off the read loop: the CLI's output keeps flowing meanwhile.
                    task = asyncio.create_task(self._answer_question(msg, self.ask_user))
                    self._asking.add(task)
                    task.add_done_callback(self._asking.discard)
                else:
                    await self.send(control_reply(msg))
                continue
            yield msg


def _parse_line(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        log.warning("claude_code_non_json_stdout", extra={"line": line[:500]})
        return None
    return msg if isinstance(msg, dict) else None
