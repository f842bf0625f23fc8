"""Drives one turn of `codex app-server`: handshake, thread, turn, then the event stream.

We talk to app-server rather than `codex exec --json` because only app-server streams real
text and reasoning deltas and offers a clean `turn/interrupt` (exec has whole items only
and can merely be killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from harness_bases import events as ev
from harness_bases.base import Process, TurnSpec, UserAsker
from harness_bases.codex import instructions, long_input, questions
from harness_bases.codex.failures import setup_failure
from harness_bases.codex.install import CLI_VERSION
from harness_bases.codex.parser import CodexParser
from harness_bases.codex.replies import reply_for
from harness_bases.jsonrpc import ConnectionClosed, RequestHandler, RpcConnection, RpcError
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.turns import AgentTurn, drain

log = logging.getLogger(__name__)

CLIENT_NAME = "uhp-server"


def _thread_params(turn: TurnSpec) -> dict[str, Any]:
    return {
        "cwd": turn.paths.workspace,
        "model": turn.model,
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
        "developerInstructions": instructions.developer_instructions(turn),
    }


async def answer_request(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """How the driver answers app-server's requests (approvals, questions): declined."""
    log.info("codex_server_request", extra={"method": method})
    return reply_for(method)


def request_handler(ask_user: UserAsker | None = None) -> RequestHandler:
    """How app-server's requests are answered: with `ask_user`, the CLI's own question tool
    asks the user (the read waits for the answer, as the CLI itself does)."""

    async def on_request(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if ask_user is not None and method == questions.REQUEST_METHOD:
            return await questions.answered(params, ask_user)
        return await answer_request(method, params)

    return on_request


def connect(proc: Process, ask_user: UserAsker | None = None) -> RpcConnection:
    """app-server's JSON-RPC dialect leaves out the `"jsonrpc": "2.0"` member."""
    return RpcConnection(proc, request_handler(ask_user), name="codex")


class CodexTurn(AgentTurn):
    """One turn of a started `codex app-server`."""

    name = "codex"

    def __init__(self, proc: Process, turn: TurnSpec) -> None:
        super().__init__()
        self.proc = proc
        self.turn = turn
        self.rpc = connect(proc, turn.ask_user)
        self.thread_id: str | None = None
        self.turn_id: str | None = None
        self.interrupt_requested = False  # asked before the turn id was known
        self.warm = False  # goes on in a process an earlier turn initialised and kept

    @classmethod
    def after(cls, previous: CodexTurn, turn: TurnSpec) -> CodexTurn | None:
        """The next turn on `previous`'s app-server and thread, kept warm: its connection
        (its reader, mid-stream) goes on, asking this turn's user from now on. None when
        `previous` never opened a thread."""
        if previous.thread_id is None or previous.rpc.closed:
            return None
        following = cls.__new__(cls)
        AgentTurn.__init__(following)
        following.proc = previous.proc
        following.turn = turn
        following.rpc = previous.rpc
        following.rpc.answer_with(request_handler(turn.ask_user))
        following.thread_id = previous.thread_id
        following.turn_id = None
        following.interrupt_requested = False
        following.warm = True
        return following

    async def send_interrupt(self) -> bool:
        """Send turn/interrupt now, or as soon as the turn exists. The answer (and
        turn/completed) is read off stdout by `run`."""
        self.interrupt_requested = True
        if self.thread_id is None or self.turn_id is None:
            return True
        await self.rpc.request(
            "turn/interrupt", {"threadId": self.thread_id, "turnId": self.turn_id}
        )
        return True

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        rpc, proc = self.rpc, self.proc
        try:
            if not self.warm:  # a warm process is initialised, its thread open
                client = {"name": CLIENT_NAME, "title": "UHP Server", "version": CLI_VERSION}
                await rpc.call("initialize", {"clientInfo": client})
                await rpc.notify("initialized")
                async for notice in self._open_thread():
                    yield notice
            thread_id = str(self.thread_id)
            yield ev.NativeSession(thread_id)
            if self.interrupt_requested:  # stopped before it began: no turn to start
                with contextlib.suppress(Exception):
                    await proc.close_stdin()
                return
            prompt = await asyncio.to_thread(long_input.turn_text, self.turn)
            text = {"type": "text", "text": prompt, "text_elements": []}
            # Codex reads each image itself, inside the sandbox, and sends it to the model.
            images = [{"type": "localImage", "path": image.path} for image in self.turn.images]
            turn_input = [text, *images]
            result = await rpc.call("turn/start", {"threadId": thread_id, "input": turn_input})
            self.turn_id = str(result["turn"]["id"])
            if self.interrupt_requested:  # asked while turn/start was under way
                await self.send_interrupt()
            parser = CodexParser(thread_id=thread_id, turn_id=self.turn_id)
        except ConnectionClosed:
            log.warning("codex_exited_during_setup", extra={"stderr": proc.stderr_tail()})
            yield ev.TurnFailed("the agent exited unexpectedly", "harness_error")
            return
        except RpcError as exc:
            log.warning("codex_setup_failed", extra={"error": str(exc)})
            yield setup_failure(exc.method, exc.message)
            return
        except (KeyError, TypeError) as exc:
            log.warning("codex_setup_failed", extra={"error": str(exc)})
            yield ev.TurnFailed("The agent could not start the turn.", "harness_error")
            return
        events = drain(
            rpc.messages(),
            parser,
            close_stdin=proc.close_stdin,
            stderr_tail=proc.stderr_tail,
            name="codex",
        )
        async for event in events:
            if isinstance(event, ev.ConversationCompacted):
                # What was injected into the history is summarised away: the next turn is
                # told its instructions again (the thread's own, from its start, stay).
                codex_home = self.turn.host_home / ".codex"
                await asyncio.to_thread(instructions.forget, codex_home, thread_id)
            yield event

    async def _open_thread(self) -> AsyncIterator[ev.AgentEvent]:
        """Resume the turn's native session when there is one, else start a thread."""
        rpc, turn = self.rpc, self.turn
        codex_home = turn.host_home / ".codex"
        wanted = instructions.developer_instructions(turn)
        if turn.native_session_id:
            params = {**_thread_params(turn), "threadId": turn.native_session_id}
            try:
                # excludeTurns: we do not need the old history echoed back to us.
                result = await rpc.call("thread/resume", {**params, "excludeTurns": True})
            except RpcError as exc:
                log.warning("codex_resume_failed", extra={"error": exc.message})
                yield ev.Notice(RESUME_FAILED_NOTICE)
            else:
                self.thread_id = str(result["thread"]["id"])
                told = await asyncio.to_thread(instructions.recorded, codex_home, self.thread_id)
                update = instructions.update_message(told, wanted)
                if update is not None:
                    items = [instructions.developer_item(update)]
                    injected = {"threadId": self.thread_id, "items": items}
                    await rpc.call("thread/inject_items", injected)
                    await asyncio.to_thread(instructions.record, codex_home, self.thread_id, wanted)
                return
        result = await rpc.call("thread/start", _thread_params(turn))
        self.thread_id = str(result["thread"]["id"])
        # Disk work: off the event loop, which every other turn and request shares.
        await asyncio.to_thread(instructions.record, codex_home, self.thread_id, wanted)
