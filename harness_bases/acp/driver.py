"""Drives one turn of an ACP agent: handshake, session, prompt, then the event stream.

The agent gets no file-system or terminal capabilities from us: it uses its own tools
inside the sandbox. A native session is resumed with `session/load` when the agent
advertises `loadSession`; the conversation it replays as notifications is not this turn's
and is dropped. `session/cancel` stops a running prompt; asked before the prompt was sent,
the prompt is never sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any

from harness_bases import events as ev
from harness_bases.acp.parser import EXITED
from harness_bases.base import Process, TurnSpec
from harness_bases.jsonrpc import ConnectionClosed, RpcConnection, RpcError
from harness_bases.messages import RESUME_FAILED_NOTICE
from harness_bases.turns import AgentTurn, Message, drain

if TYPE_CHECKING:
    from harness_bases.acp.base import AcpBase

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CLIENT_CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}


class AcpTurn(AgentTurn):
    """One turn of a started ACP agent; `base` supplies the agent's quirks."""

    def __init__(self, base: AcpBase, proc: Process, turn: TurnSpec) -> None:
        super().__init__()
        self.name = base.log_name
        self.base = base
        self.proc = proc
        self.turn = turn
        self.rpc = RpcConnection(proc, self._answer_request, name=self.name, jsonrpc="2.0")
        self.agent_capabilities: dict[str, Any] = {}
        self.session_id: str | None = None
        self.prompt_sent = False
        self.interrupt_requested = False  # asked before the prompt was sent
        self.held_native_session: ev.NativeSession | None = None
        self.warm = False  # goes on in a process an earlier turn initialised and kept

    @classmethod
    def after(cls, previous: AcpTurn, turn: TurnSpec) -> AcpTurn | None:
        """The next turn on `previous`'s agent and ACP session, kept warm: its connection
        (its reader, mid-stream) goes on, answering this turn's requests from now on. None
        when `previous` never opened a session."""
        if previous.session_id is None or previous.rpc.closed:
            return None
        following = cls.__new__(cls)
        AgentTurn.__init__(following)
        following.name = previous.name
        following.base = previous.base
        following.proc = previous.proc
        following.turn = turn
        following.rpc = previous.rpc
        following.rpc.answer_with(following._answer_request)
        following.agent_capabilities = previous.agent_capabilities
        following.session_id = previous.session_id
        following.prompt_sent = False
        following.interrupt_requested = False
        following.held_native_session = None
        following.warm = True
        return following

    async def send_interrupt(self) -> bool:
        """Send session/cancel now, or make sure the prompt is never sent."""
        self.interrupt_requested = True
        if self.session_id is not None and self.prompt_sent:
            await self.rpc.notify("session/cancel", {"sessionId": self.session_id})
        return True

    async def _answer_request(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        log.info(f"{self.name}_client_request", extra={"method": method})
        return await self.base.answer_request(method, params, self.turn)

    async def _image_blocks(self) -> list[dict[str, Any]]:
        """The turn's images as ACP image blocks, when the agent says it takes them."""
        prompt_capabilities = self.agent_capabilities.get("promptCapabilities") or {}
        if not self.turn.images or not prompt_capabilities.get("image"):
            return []
        return [
            {
                "type": "image",
                "mimeType": image.media_type,
                "data": await asyncio.to_thread(image.base64),
            }
            for image in self.turn.images
        ]

    async def run(self) -> AsyncGenerator[ev.AgentEvent, None]:
        if self.warm:  # initialised, its session open: the next prompt goes straight in
            yield ev.NativeSession(str(self.session_id))
        else:
            async for event in self._setup():
                yield event
                if isinstance(event, ev.TurnFailed):
                    return
        if self.interrupt_requested:  # stopped before it began: no prompt to send
            with contextlib.suppress(Exception):
                await self.proc.close_stdin()
            return
        parser = self.base.acp_parser(self.turn)
        prompt = [{"type": "text", "text": self.turn.prompt}, *await self._image_blocks()]
        try:
            parser.prompt_id = await self.rpc.request(
                "session/prompt", {"sessionId": self.session_id, "prompt": prompt}
            )
        except ConnectionClosed:
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        self.prompt_sent = True
        if self.interrupt_requested:  # asked while the prompt was being sent
            await self.send_interrupt()
        events = drain(
            self._messages(parser.prompt_id),
            parser,
            close_stdin=self.proc.close_stdin,  # ends the agent's ACP server: it exits
            stderr_tail=self.proc.stderr_tail,
            name=self.name,
        )
        async for event in self._with_native_session(events):
            yield event

    async def _with_native_session(
        self, events: AsyncIterator[ev.AgentEvent]
    ) -> AsyncIterator[ev.AgentEvent]:
        """The turn's events; the id of a new session the agent forgets unless its first turn
        finishes (`forgets_unfinished_turns`) goes out just before the turn's end."""
        async for event in events:
            if self.held_native_session is not None and isinstance(event, ev.TurnFinished):
                yield self.held_native_session
            yield event

    async def _messages(self, prompt_id: int) -> AsyncIterator[Message]:
        async for msg in self.rpc.messages():
            if msg.get("id") == prompt_id and "error" in msg:
                error = msg.get("error") or {}
                message = str(error.get("message", "")) if isinstance(error, dict) else ""
                log.warning(f"{self.name}_prompt_error", extra={"error": message})
                # Before the parser sees the answer: once it has, stdin closes.
                await self.base.after_failed_prompt(self.rpc, str(self.session_id))
            yield msg

    async def _setup(self) -> AsyncIterator[ev.AgentEvent]:
        """Handshake and session; yields notices, then NativeSession; TurnFailed on failure."""
        try:
            params = {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": CLIENT_CAPABILITIES,
                "clientInfo": self.base.acp_client_info(),
            }
            result = await self.rpc.call("initialize", params)
            capabilities = (result or {}).get("agentCapabilities")
            self.agent_capabilities = capabilities if isinstance(capabilities, dict) else {}
            async for notice in self._open_session():
                yield notice
            await self.base.session_opened(self.rpc, str(self.session_id), self.turn)
        except ConnectionClosed:
            log.warning(
                f"{self.name}_exited_during_setup", extra={"stderr": self.proc.stderr_tail()}
            )
            yield ev.TurnFailed(EXITED, "harness_error")
            return
        except (RpcError, KeyError, TypeError, AttributeError) as exc:
            log.warning(f"{self.name}_setup_failed", extra={"error": str(exc)})
            yield ev.TurnFailed("The agent could not start the turn.", "harness_error")
            return
        native = ev.NativeSession(str(self.session_id))
        resumed = self.session_id == self.turn.native_session_id
        if self.base.forgets_unfinished_turns and not resumed:
            self.held_native_session = native
        else:
            yield native

    async def _open_session(self) -> AsyncIterator[ev.AgentEvent]:
        """Load the turn's native session when there is one, else start a new one."""
        rpc, turn = self.rpc, self.turn
        servers, left_out = self.base.offered_mcp_servers(turn, self.agent_capabilities)
        for notice in left_out:
            yield notice
        where = {"cwd": turn.paths.workspace, "mcpServers": servers}
        if turn.native_session_id:
            if self.agent_capabilities.get("loadSession"):
                try:
                    params = {**where, "sessionId": turn.native_session_id}
                    result = await rpc.call("session/load", params)
                except RpcError as exc:
                    log.warning(f"{self.name}_resume_failed", extra={"error": exc.message})
                else:
                    if self.base.session_loaded(result):
                        # Loading replays the old conversation: none of it is this turn's.
                        rpc.drop_backlog()
                        self.session_id = turn.native_session_id
                        for notice in self.base.session_notices(result):
                            yield notice
                        return
            rpc.drop_backlog()
            yield ev.Notice(RESUME_FAILED_NOTICE)
        result = await rpc.call("session/new", where)
        self.session_id = str((result or {})["sessionId"])
        for notice in self.base.session_notices(result):
            yield notice
