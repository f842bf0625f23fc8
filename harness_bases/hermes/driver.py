"""Drives one turn of Hermes' ACP server: handshake, session, prompt, then the event stream.

ACP (Agent Client Protocol, JSON-RPC on stdio) is Hermes' most structured interface that
fits a sandboxed process: it streams message and thought deltas and tool calls as they
happen, keeps sessions in Hermes' own store (so `session/load` resumes a conversation in a
new process), and stops a turn cleanly with `session/cancel`. The alternative, the API
server's `/v1/runs`, needs a listening port inside the sandbox and reports tools only as
previews without their output.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.base import Process, TurnSpec
from harness_bases.hermes.install import CLI_VERSION
from harness_bases.hermes.parser import HermesParser, mcp_notices
from harness_bases.hermes.replies import reply_for
from harness_bases.jsonrpc import ConnectionClosed, RpcConnection, RpcError

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CLIENT_INFO = {"name": "uhp-server", "title": "UHP Server", "version": CLI_VERSION}
# No file-system or terminal capabilities: Hermes uses its own tools inside the sandbox.
CLIENT_CAPABILITIES = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
RESUME_FAILED_NOTICE = "The earlier conversation could not be resumed; this turn starts a new one."


@dataclass
class LiveTurn:
    """What `interrupt` needs while a turn runs."""

    rpc: RpcConnection
    session_id: str | None = None
    prompt_sent: bool = False
    interrupt_requested: bool = False  # asked before the prompt was sent

    async def interrupt(self) -> bool:
        """Send session/cancel now, or make sure the prompt is never sent."""
        self.interrupt_requested = True
        if self.session_id is not None and self.prompt_sent:
            await self.rpc.notify("session/cancel", {"sessionId": self.session_id})
        return True


async def answer_request(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    log.info("hermes_client_request", extra={"method": method})
    return reply_for(method, params)


def connect(proc: Process) -> RpcConnection:
    """ACP is JSON-RPC 2.0 proper: every message carries the version member."""
    return RpcConnection(proc, answer_request, name="hermes", jsonrpc="2.0")


async def _open_session(live: LiveTurn, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
    """Load the turn's native session when there is one, else start a new one."""
    rpc = live.rpc
    where = {"cwd": turn.paths.workspace, "mcpServers": []}  # MCP servers are in config.yaml
    if turn.native_session_id:
        try:
            params = {**where, "sessionId": turn.native_session_id}
            result = await rpc.call("session/load", params)
        except RpcError as exc:
            log.warning("hermes_resume_failed", extra={"error": exc.message})
            result = None
        # Loading replays the old conversation as notifications: none of it is this turn's.
        rpc.drop_backlog()
        # An unknown session is answered with an empty result (a loaded one has its modes).
        if isinstance(result, dict) and result:
            live.session_id = turn.native_session_id
            for notice in mcp_notices(result):
                yield notice
            return
        yield ev.Notice(RESUME_FAILED_NOTICE)
    result = await rpc.call("session/new", where)
    live.session_id = str((result or {})["sessionId"])
    for notice in mcp_notices(result):
        yield notice


async def _setup(proc: Process, turn: TurnSpec, live: LiveTurn) -> AsyncIterator[ev.AgentEvent]:
    """Handshake and session; yields notices, then NativeSession; TurnFailed on failure."""
    try:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": CLIENT_INFO,
        }
        await live.rpc.call("initialize", params)
        async for notice in _open_session(live, turn):
            yield notice
    except ConnectionClosed:
        log.warning("hermes_exited_during_setup", extra={"stderr": proc.stderr_tail()})
        yield ev.TurnFailed("the agent exited unexpectedly", "harness_error")
        return
    except (RpcError, KeyError, TypeError) as exc:
        log.warning("hermes_setup_failed", extra={"error": str(exc)})
        yield ev.TurnFailed("The agent could not start the turn.", "harness_error")
        return
    yield ev.NativeSession(str(live.session_id))


async def drive_turn(proc: Process, turn: TurnSpec, live: LiveTurn) -> AsyncIterator[ev.AgentEvent]:
    rpc = live.rpc
    async for event in _setup(proc, turn, live):
        yield event
        if isinstance(event, ev.TurnFailed):
            return
    if live.interrupt_requested:  # stopped before it began: no prompt to send
        with contextlib.suppress(Exception):
            await proc.close_stdin()
        return

    parser = HermesParser(max_step=turn.max_step)
    prompt = [{"type": "text", "text": turn.prompt}]
    try:
        prompt_id = await rpc.request(
            "session/prompt", {"sessionId": live.session_id, "prompt": prompt}
        )
    except ConnectionClosed:
        yield ev.TurnFailed("the agent exited unexpectedly", "harness_error")
        return
    live.prompt_sent = True
    if live.interrupt_requested:  # asked while the prompt was being sent
        await live.interrupt()

    while (msg := await rpc.next_message()) is not None:
        if parser.finished:
            continue  # draining until Hermes exits, so its session store is complete
        if msg.get("id") == prompt_id and "method" not in msg:
            events = _answer(parser, msg)
        else:
            events = parser.feed(msg)
        for event in events:
            yield event
        if parser.finished:
            # Closing stdin ends Hermes' ACP server, which then exits on its own.
            with contextlib.suppress(Exception):
                await proc.close_stdin()
    if not parser.finished:
        log.warning("hermes_stdout_eof", extra={"stderr": proc.stderr_tail()})
    for event in parser.at_eof():
        yield event


def _answer(parser: HermesParser, msg: dict[str, Any]) -> list[ev.AgentEvent]:
    if "error" in msg:
        error = msg.get("error") or {}
        log.warning("hermes_prompt_error", extra={"error": str(error.get("message", ""))})
        parser.finished = True
        return [ev.TurnFailed("The agent could not run the turn.", "harness_error")]
    return parser.answer(msg.get("result"))
