"""A session's CLI process kept warm between its turns (`uhpserver_keepWarmSeconds`).

A harness may keep a session's agent alive for a while after a completed turn, inside the
sandbox it already had, when its base's CLI holds several turns in one process
(`HarnessBase.keeps_warm`): the session's next turn then goes on in it instead of paying a
cold CLI start. The process is parked here, by session, with an idle timer; the next turn of
that same session takes it only when its `WarmKey` is the one the process was started with
(same principal, base, harness revision, model, environment version, MCP servers, question
route, memory, instructions and budgets the CLI was started with), and otherwise ends it and
starts cold. It is never handed to another session or principal.

The guarantee this weakens, and why it is off by default: a cold turn gets a new process and
a new sandbox for every response; a warm one shares them with the responses before it in the
same session (whatever the agent left running in its sandbox is still running).

While it idles, its gateway grant is suspended (every model or MCP request with the token it
holds is refused) and comes back with the next turn's own limits (gateway/tokens.py). It is
ended on idle timeout, a cancel, the session's deletion, a key that no longer matches (the
harness changed), the server stopping, and its own exit (a crash costs only the warm start:
the next turn starts cold from the session's files, as it always could).

A turn's response ends (and its caller may cancel it) before its process is paused and
parked: the process is expected from just before its response ends, and an end asked for
meanwhile is kept for it, so that it is stopped as it arrives; so is the process of a turn
stopped meanwhile (a cancel that wrote the response's end itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness_bases.turns import AgentTurn
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.run import Outcome, Run
from uhp_server.gateway.tokens import TurnGrant
from uhp_server.sandbox.base import SandboxedProcess

log = logging.getLogger("uhp_server.warm")

# What stopping a warm process may take: stdin closed (the CLI flushes its transcript and
# exits by itself), then a kill.
STOP_SECONDS = 2.0


@dataclass(frozen=True)
class WarmKey:
    """Everything the CLI process was started with that a turn could ask differently: a warm
    process is reused only by a turn with the same key."""

    principal_id: str
    base: str  # name@version
    harness_revision: str
    model: str
    environment: tuple[str, int] | None
    mcp_servers: tuple[tuple[str, str, str], ...]  # (name, url, transport)
    ask_user: bool
    memory: bool
    instructions: str  # a digest of the system prompt the CLI was started with
    max_step: int | None
    max_output_tokens: int | None

    @classmethod
    def of(cls, run: Run) -> WarmKey:
        plan = run.plan
        environment = plan.environment
        return cls(
            principal_id=run.principal_id,
            base=f"{plan.base.name}@{plan.base.cli_version}",
            harness_revision=plan.harness_revision,
            model=plan.model,
            environment=(
                None if environment is None else (environment.environment_id, environment.version)
            ),
            mcp_servers=tuple((t.name, t.url, t.transport) for t in plan.mcp_servers),
            ask_user=plan.ask_user,
            memory=plan.memory is not None,
            instructions=hashlib.sha256(plan.system_prompt.encode()).hexdigest(),
            max_step=plan.max_step,
            max_output_tokens=plan.max_output_tokens,
        )


def harness_revision(harness_id: str, stored_config: dict[str, object]) -> str:
    """A digest of a harness's configuration as stored: any change to it makes another."""
    text = json.dumps([harness_id, stored_config], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class WarmAgent:
    """A session's CLI process, idle between two of its turns."""

    session_id: str
    response_id: str  # the turn that parked it
    harness_id: str
    key: WarmKey
    native_session_id: str | None  # the CLI conversation it holds
    proc: SandboxedProcess
    turn: AgentTurn  # the last turn it ran: the next one goes on from it
    grant: TurnGrant  # suspended while it idles
    parked_at: float = field(default_factory=time.monotonic)
    exited: asyncio.Future[int] | None = None  # the process's exit, watched while it idles
    timer: asyncio.TimerHandle | None = None


@dataclass
class Arriving:
    """A finished turn's process on its way to the pool: its response already ended."""

    session_id: str
    response_id: str
    harness_id: str
    ended: bool = False  # an end was asked for meanwhile: stopped as it arrives


class WarmAgents:
    """The warm processes of this server, by session. `tokens`: the gateway's TokenRegistry,
    whose grants the processes hold. At most `limit` idle at once, so kept processes cannot
    pile up on the machine: a further one ends the oldest of the principal holding the most."""

    def __init__(self, tokens: object, limit: int = 16) -> None:
        self.tokens = tokens
        self.limit = max(1, limit)
        self._idle: dict[str, WarmAgent] = {}
        self._arriving: dict[str, Arriving] = {}  # by session
        self._ending: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._idle)

    def sessions(self) -> list[str]:
        return list(self._idle)

    # -- keeping one ---------------------------------------------------------------------------
    @staticmethod
    def may_keep(run: Run, outcome: Outcome, proc: SandboxedProcess | None) -> bool:
        """Whether the process of this finished turn may stay warm: the harness asks for it,
        the base can, the turn completed by itself and nothing stopped it, and its CLI's
        conversation is kept (a `store: false` turn's is put back as it was, which a process
        holding it in memory would contradict)."""
        plan = run.plan
        return (
            proc is not None
            and plan.keep_warm_seconds > 0
            and plan.base.keeps_warm
            and plan.store
            and outcome.status is TaskStatus.COMPLETED
            and not run.stop.is_set()
        )

    def expect(self, run: Run) -> None:
        """The finished turn will park its process: called before its response ends, so that
        a cancel or deletion that follows at once still ends the process (see park)."""
        self._arriving[run.session_id] = Arriving(run.session_id, run.response_id, _harness_id(run))

    def not_coming(self, run: Run) -> None:
        """The expected process of this turn will not be parked after all."""
        arriving = self._arriving.get(run.session_id)
        if arriving is not None and arriving.response_id == run.response_id:
            del self._arriving[run.session_id]

    def park(self, run: Run, proc: SandboxedProcess, turn: AgentTurn, grant: TurnGrant) -> None:
        """Keep the finished turn's process (its grant already suspended) for the session's
        next turn, until its idle time ends; unless it was ended on its way here, or its turn
        was stopped meanwhile (a cancel that wrote the response's end itself)."""
        session_id = run.session_id
        self._end_later(self._idle.pop(session_id, None))
        arriving = self._arriving.get(session_id)
        if arriving is not None and arriving.response_id == run.response_id:
            del self._arriving[session_id]
        else:
            arriving = None
        agent = WarmAgent(
            session_id=session_id,
            response_id=run.response_id,
            harness_id=_harness_id(run),
            key=WarmKey.of(run),
            native_session_id=run.native_session_id or run.plan.native_session_id,
            proc=proc,
            turn=turn,
            grant=grant,
        )
        if arriving is None or arriving.ended or run.stop.is_set():
            log.info("warm_ended", extra={"session_id": session_id, "why": "ended_on_its_way"})
            self._end_later(agent)
            return
        loop = asyncio.get_running_loop()
        agent.exited = asyncio.ensure_future(proc.wait())
        agent.exited.add_done_callback(lambda _: self._gone(agent, "exited"))
        agent.timer = loop.call_later(run.plan.keep_warm_seconds, self._gone, agent, "idle_timeout")
        self._idle[session_id] = agent
        log.info("warm_parked", extra={"session_id": session_id})
        while len(self._idle) > self.limit:
            self._gone(self._to_evict(), "over_limit")

    def _to_evict(self) -> WarmAgent:
        """The idle process to end for room: the oldest of the principal that holds the most,
        so one principal's many sessions cannot push another's few out."""
        held: dict[str, int] = {}
        for agent in self._idle.values():
            held[agent.key.principal_id] = held.get(agent.key.principal_id, 0) + 1
        return min(self._idle.values(), key=lambda a: (-held[a.key.principal_id], a.parked_at))

    # -- taking one ----------------------------------------------------------------------------
    def take(self, run: Run) -> WarmAgent | None:
        """The session's warm process for this turn, out of the pool (the caller now owns
        it), when its key matches and it is alive; else None, and a process that no longer
        fits is ended."""
        agent = self._idle.pop(run.session_id, None)
        if agent is None:
            return None
        self._disarm(agent)
        fits = (
            agent.key == WarmKey.of(run)
            and run.plan.store
            # The server places a task's files in the workspace, which a warm sandbox has
            # mounted (as an overlay's upper layer, sandbox/neutral_mounts.py: never to be
            # changed under it): a turn bringing files starts cold, and sees them.
            and not run.plan.attachments
            and agent.native_session_id == run.plan.native_session_id
            and not (agent.exited is not None and agent.exited.done())
        )
        if not fits:
            log.info("warm_not_reused", extra={"session_id": run.session_id})
            self._end_later(agent)
            return None
        return agent

    # -- ending them ---------------------------------------------------------------------------
    async def end(self, session_id: str) -> None:
        """End the session's warm process, if any (a cancel, its deletion)."""
        if session_id in self._arriving:
            self._arriving[session_id].ended = True
        agent = self._idle.pop(session_id, None)
        if agent is not None:
            self._disarm(agent)
            await self._stop(agent)

    async def end_where(self, sessions: Iterable[str]) -> None:
        await asyncio.gather(*(self.end(session_id) for session_id in sessions))

    async def end_after(self, response_id: str) -> None:
        """End the warm process the turn of `response_id` parked, if it still idles (that
        response was cancelled after it completed: the user wants the agent stopped)."""
        await self.end_where([a.session_id for a in self._all() if a.response_id == response_id])

    async def end_harness(self, harness_id: str) -> None:
        """End the warm processes of a harness that changed or was deleted: its sessions'
        next turns start cold with what it says now."""
        await self.end_where([a.session_id for a in self._all() if a.harness_id == harness_id])

    def pid(self, session_id: str) -> int | None:
        """The host pid of the session's idle warm process, where the sandbox tells it."""
        agent = self._idle.get(session_id)
        return None if agent is None else getattr(agent.proc, "pid", None)

    async def close(self) -> None:
        """The server stops: every warm process ends, and whatever was ending finishes."""
        await self.end_where([*self._idle, *self._arriving])
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)

    def _all(self) -> list[WarmAgent | Arriving]:
        """The idle processes and those on their way."""
        return [*self._idle.values(), *self._arriving.values()]

    def _gone(self, agent: WarmAgent, why: str) -> None:
        """Its idle time ran out, it exited, or room was needed: out of the pool, ended."""
        if self._idle.get(agent.session_id) is not agent:
            return  # already taken or ended
        del self._idle[agent.session_id]
        self._disarm(agent)
        log.info("warm_ended", extra={"session_id": agent.session_id, "why": why})
        self._end_later(agent)

    @staticmethod
    def _disarm(agent: WarmAgent) -> None:
        if agent.timer is not None:
            agent.timer.cancel()
            agent.timer = None

    def _end_later(self, agent: WarmAgent | None) -> None:
        if agent is None:
            return
        ending = asyncio.ensure_future(self._stop(agent))
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def _stop(self, agent: WarmAgent) -> None:
        """Revoke its token, then let the CLI exit by itself (stdin closed, its transcript
        flushed), killing it after STOP_SECONDS."""
        await stop_revoked(self.tokens, agent.grant.token, agent.proc)


def _harness_id(run: Run) -> str:
    return str(run.builder.response["metadata"].get("harness_id", ""))


async def stop_revoked(tokens: Any, token: str, proc: SandboxedProcess) -> None:
    """Revoke the process's gateway token (`tokens`: the gateway's), then stop it: a process
    no turn will go on in."""
    tokens.revoke(token)
    await stop_process(proc)


async def stop_process(proc: SandboxedProcess) -> None:
    """Close stdin, read stdout to its end (so the CLI never blocks on a full pipe while it
    flushes), kill: always, whatever fails on the way."""
    try:
        with contextlib.suppress(Exception):
            await proc.resume()  # a paused process reads no closed stdin, and exits not
        with contextlib.suppress(Exception):
            await proc.close_stdin()
        with contextlib.suppress(Exception, TimeoutError):
            await asyncio.wait_for(_read_to_end(proc), STOP_SECONDS)
    finally:
        with contextlib.suppress(Exception):
            await proc.kill()


async def _read_to_end(proc: SandboxedProcess) -> None:
    async for _ in proc.lines():
        pass
