"""Drives one turn of `codex app-server`: handshake, thread, turn, then the event stream.

We talk to app-server rather than `codex exec --json` because only app-server streams real
text and reasoning deltas and offers a clean `turn/interrupt` (exec has whole items only
and can merely be killed).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from harness_bases import events as ev
from harness_bases.base import Process, TurnSpec
from harness_bases.codex.install import CLI_VERSION
from harness_bases.codex.parser import CodexParser
from harness_bases.codex.replies import reply_for
from harness_bases.codex.rpc import ConnectionClosed, RpcConnection, RpcError, is_request

log = logging.getLogger(__name__)

CLIENT_NAME = "uhp-server"
RESUME_FAILED_NOTICE = "The earlier conversation could not be resumed; this turn starts a new one."


@dataclass
class LiveTurn:
    """What `interrupt` needs while a turn runs."""

    rpc: RpcConnection
    thread_id: str | None = None
    turn_id: str | None = None


def developer_instructions(turn: TurnSpec) -> str | None:
    """The system prompt plus the disabled tools, as standing developer instructions."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    return "\n\n".join(parts) or None


def _thread_params(turn: TurnSpec) -> dict[str, Any]:
    return {
        "cwd": turn.paths.workspace,
        "model": turn.model,
        "approvalPolicy": "never",
        "sandbox": "danger-full-access",
        "developerInstructions": developer_instructions(turn),
    }


async def _open_thread(live: LiveTurn, turn: TurnSpec) -> AsyncIterator[ev.AgentEvent]:
    """Resume the turn's native session when there is one, else start a thread."""
    rpc = live.rpc
    if turn.native_session_id:
        params = {**_thread_params(turn), "threadId": turn.native_session_id}
        try:
            # excludeTurns: we do not need the old history echoed back to us.
            result = await rpc.call("thread/resume", {**params, "excludeTurns": True})
            live.thread_id = str(result["thread"]["id"])
            return
        except RpcError as exc:
            log.warning("codex_resume_failed", extra={"error": exc.message})
            yield ev.Notice(RESUME_FAILED_NOTICE)
    result = await rpc.call("thread/start", _thread_params(turn))
    live.thread_id = str(result["thread"]["id"])


async def _answer(rpc: RpcConnection, msg: dict[str, Any]) -> None:
    method = str(msg.get("method"))
    reply = reply_for(method)
    log.info("codex_server_request", extra={"method": method})
    if reply is None:
        await rpc.respond_error(msg["id"], -32601, f"{method} is not supported by this client")
    else:
        await rpc.respond(msg["id"], reply)


async def drive_turn(proc: Process, turn: TurnSpec, live: LiveTurn) -> AsyncIterator[ev.AgentEvent]:
    rpc = live.rpc
    parser: CodexParser | None = None
    try:
        client = {"name": CLIENT_NAME, "title": "UHP Server", "version": CLI_VERSION}
        await rpc.call("initialize", {"clientInfo": client})
        await rpc.notify("initialized")
        async for notice in _open_thread(live, turn):
            yield notice
        assert live.thread_id is not None
        yield ev.NativeSession(live.thread_id)
        text = {"type": "text", "text": turn.prompt, "text_elements": []}
        result = await rpc.call("turn/start", {"threadId": live.thread_id, "input": [text]})
        live.turn_id = str(result["turn"]["id"])
        parser = CodexParser(thread_id=live.thread_id, turn_id=live.turn_id)
    except ConnectionClosed:
        log.warning("codex_exited_during_setup", extra={"stderr": proc.stderr_tail()})
        yield ev.TurnFailed("the agent exited unexpectedly", "harness_error")
        return
    except (RpcError, KeyError, TypeError) as exc:
        log.warning("codex_setup_failed", extra={"error": str(exc)})
        yield ev.TurnFailed("The agent could not start the turn.", "harness_error")
        return

    while True:
        msg = await rpc.next_message()
        if msg is None:
            break
        if is_request(msg):
            with contextlib.suppress(ConnectionClosed):
                await _answer(rpc, msg)
            continue
        if parser.finished:
            continue  # draining until the CLI exits, so its transcript is complete
        for event in parser.feed(msg):
            yield event
        if parser.finished:
            # The turn is over: closing stdin makes app-server flush its transcript and
            # exit now, rather than idle until the engine's grace period ends in a kill.
            with contextlib.suppress(Exception):
                await proc.close_stdin()
    if not parser.finished:
        log.warning("codex_stdout_eof", extra={"stderr": proc.stderr_tail()})
    for event in parser.at_eof():
        yield event
