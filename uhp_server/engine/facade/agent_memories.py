"""A harness's agent and its memories (Memories §9): the harness's two settings, what a task
gives its session (`metadata.memory`, priming), and observing a finished turn.

The agent is a member (memories/agent.py `agent_caller`) and reaches exactly what was granted
to it, read off the grants through the Memories facade as that member: nothing here widens
it, and nothing on the harness lists it. Only the harness's owner reads or sets the settings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from storage import agent_memories as store
from storage import harnesses as harness_store
from storage import memories as memory_store
from storage.db import Database, Order
from storage.unit import Tx
from uhp_server.engine.facade.harnesses import harness_not_found
from uhp_server.engine.facade.memories import Memories
from uhp_server.errors import VENDOR, ApiError
from uhp_server.memories.access import READ, WRITE, Caller
from uhp_server.memories.agent import (
    PrimedMemory,
    Primer,
    agent_caller,
    primer,
    turn_episodes,
)
from uhp_server.memories.errors import memories_not_attached, memory_invalid, memory_not_found
from uhp_server.memories.records import GrantedMemory, HarnessMemories, Memory

log = logging.getLogger(__name__)

TASK_PARAM = "metadata.memory"
# Written by the server, never set by a PUT (an object read back can be sent again).
_READ_ONLY = ("object", "principal", "data", "uhpserver_notice")


@dataclass(frozen=True)
class TurnMemory:
    """What a turn's agent holds of memories: who it is, where its unaddressed writes and
    its turns go, whether turns are observed, and the session's priming block."""

    caller: Caller
    default_memory_id: str | None
    observe: bool
    primer: str = ""
    primed: dict[str, int] = field(default_factory=dict)  # tokens per memory, this turn placed
    starts_session: bool = False
    reprimed: bool = False  # the block was placed afresh: the CLI compacted its conversation

    @property
    def places_block(self) -> bool:
        """This turn placed the block (its session's first, or the first after a
        compaction): it says what the block cost."""
        return self.starts_session or self.reprimed


class AgentMemories:
    def __init__(self, db: Database, memories: Memories, served: bool) -> None:
        self.db = db
        self.memories = memories
        self.served = served  # the chapter is served (UHP_MEMORIES=preview)

    # -- the harness's settings (§9) -------------------------------------------------------
    async def settings(self, principal_id: str, harness_id: str) -> HarnessMemories:
        row = await self.db.read(_owned_settings, principal_id, harness_id)
        caller = agent_caller(harness_id)
        given = await self.memories.listing(caller, granted=True)
        default = row.default_memory_id if row else None
        data = [
            GrantedMemory(
                m.id, m.name, m.privileges, m.id == default, self.memories.turns_sent_to(m.provider)
            )
            for m in given
            if m.privileges
        ]
        return HarnessMemories(
            principal=caller.principal,
            default_memory_id=default,
            observe=row.observe if row else True,
            data=data,
            notice=_notice(data),
        )

    async def configure(
        self, principal_id: str, harness_id: str, body: dict[str, Any]
    ) -> HarnessMemories:
        """Sets what the body names; what it leaves out stays as it was. The fields the
        server writes (`object`, `principal`, `data`) are ignored, so an object read back
        can be sent again."""
        unknown = sorted(set(body) - {"default_memory_id", "observe", *_READ_ONLY})
        if unknown:
            raise memory_invalid(f"Unknown fields {unknown}: default_memory_id and observe.")
        row = await self.db.read(_owned_settings, principal_id, harness_id)
        default = row.default_memory_id if row else None
        observe = row.observe if row else True
        if "observe" in body:
            if not isinstance(body["observe"], bool):
                raise memory_invalid("`observe` is true or false.", "observe")
            observe = body["observe"]
        if "default_memory_id" in body:
            default = body["default_memory_id"]
            if default is not None:
                await self._check_writable(agent_caller(harness_id), default)
        await self.db.write(
            store.put_harness_settings, harness_id, default, observe, order=Order.ANY
        )
        return await self.settings(principal_id, harness_id)

    async def _check_writable(self, caller: Caller, memory_id: object) -> None:
        """A default memory MUST be one the agent may write (§9): `memory_invalid`."""
        if not isinstance(memory_id, str):
            raise memory_invalid("`default_memory_id` is a memory's id, or null.")
        try:
            held = (await self.memories.get(caller, memory_id)).privileges
        except ApiError as refused:
            if refused.code not in ("memory_not_found", "memory_forbidden"):
                raise
            held = []
        if WRITE not in held:
            raise memory_invalid(
                "The harness's agent may not write that memory: grant its principal `write` "
                "there first.",
                "default_memory_id",
            )

    # -- a task (§9, §9.1) ------------------------------------------------------------------
    async def for_task(
        self, harness_id: str, session_id: str | None, named: str | None
    ) -> TurnMemory | None:
        """What the task's turn holds of memories (None: nothing, the chapter is off or the
        agent holds no memory). Refused before the task starts: a named memory the agent
        holds nothing on (`memory_not_found`), a named one when it holds none at all
        (`memories_not_attached`), another memory than its session's (409)."""
        if not self.served:
            return None
        if named is not None and not isinstance(named, str):
            raise memory_not_found("`metadata.memory` is a memory's id.", param=TASK_PARAM)
        caller = agent_caller(harness_id)
        # Most agents hold no memory: one indexed read says so, before the tree is read.
        if not await self.db.read(memory_store.grants_of, sorted(caller.principals())):
            if named is not None:
                raise memories_not_attached()
            return None
        given = [m for m in await self.memories.listing(caller, granted=True) if m.privileges]
        if named is not None:
            if not given:
                raise memories_not_attached()
            await self._check_held(caller, named)
        settings = await self.db.read(store.harness_settings, harness_id)
        observe = settings.observe if settings else True
        if session_id is not None:
            kept = await self.db.read(store.session_memory, session_id)
            if kept is not None:
                if named is not None and named != kept.memory_id:
                    raise memory_mismatch(kept.memory_id)
                if not given:
                    return None
                if kept.reprime:  # the CLI compacted its conversation: primed afresh (§9.1)
                    placed = await self._primer(caller, given, kept.memory_id)
                    return TurnMemory(
                        caller, kept.memory_id, observe, placed.text, placed.tokens, reprimed=True
                    )
                return TurnMemory(caller, kept.memory_id, observe, kept.primer)
        if not given:
            return None
        default = named or (settings.default_memory_id if settings else None)
        placed = await self._primer(caller, given, default)
        return TurnMemory(caller, default, observe, placed.text, placed.tokens, starts_session=True)

    async def _primer(self, caller: Caller, given: list[Memory], default: str | None) -> Primer:
        """The priming block, read from the providers now."""
        return primer([await self._primed(caller, memory, default) for memory in given])

    async def _check_held(self, caller: Caller, memory_id: str) -> None:
        try:
            await self.memories.get(caller, memory_id)
        except ApiError as refused:  # forbidden: it holds something there (write, say)
            if refused.code == "memory_not_found":
                raise memory_not_found(param=TASK_PARAM) from None
            if refused.code != "memory_forbidden":
                raise

    async def _primed(self, caller: Caller, memory: Memory, default: str | None) -> PrimedMemory:
        readable = READ in memory.privileges
        children = await self.memories.listing(caller, parent=memory.id) if readable else []
        records = await self.memories.primed(caller, memory.id) if readable else []
        return PrimedMemory(
            id=memory.id,
            name=memory.name,
            description=memory.description,
            privileges=memory.privileges,
            default=memory.id == default,
            children=[(kid.id, kid.name, kid.description) for kid in children],
            records=records,
        )

    async def started(self, session_id: str, turn: TurnMemory) -> None:
        """Kept with the session that turn started: its later turns carry the same block."""
        await self.db.write(
            store.put_session_memory,
            session_id,
            turn.default_memory_id,
            turn.primer,
            dict(turn.primed),
            order=Order.ANY,
        )

    async def reprimed(self, session_id: str, turn: TurnMemory) -> None:
        """The block a turn placed afresh after a compaction: the turns after it carry it."""
        await self.db.write(
            store.put_reprimed, session_id, turn.primer, dict(turn.primed), order=Order.ANY
        )

    async def compacted(self, session_id: str) -> None:
        """The session's CLI compacted its conversation (what its instructions placed may be
        gone from what the model sees): its next turn is primed afresh (§9.1)."""
        await self.db.write(store.mark_compacted, session_id, order=Order.ANY)

    # -- observe (§9.1) ---------------------------------------------------------------------
    async def observe(self, turn: TurnMemory, response: dict[str, Any], asked: str) -> None:
        """The finished turn, as episodes, into the default memory, as the agent. Never fails
        the turn: a memory gone or no longer writable is logged and skipped."""
        if not (turn.observe and turn.default_memory_id):
            return
        episodes = turn_episodes(response, asked)
        if not episodes:
            return
        try:
            await self.memories.observe(turn.caller, turn.default_memory_id, {"episodes": episodes})
        except ApiError as refused:
            log.warning(
                "memory_observe_refused",
                extra={"response_id": response.get("id"), "code": refused.code},
            )


def memory_mismatch(kept: str | None) -> ApiError:
    started = kept or "no memory"
    return ApiError(
        409,
        VENDOR + "memory_mismatch",
        f"The session was started with {started} as its memory; start a new session to use "
        "another.",
        param=TASK_PARAM,
    )


def _owned_settings(tx: Tx, principal_id: str, harness_id: str) -> Any:
    """The harness's settings row (None: never set); only its owner's harness is found."""
    if harness_store.get_harness(tx, principal_id, harness_id) is None:
        raise harness_not_found()
    return store.harness_settings(tx, harness_id)


def _notice(granted: list[GrantedMemory]) -> str | None:
    """§9.1: what the person who sets the default memory must be told when its provider
    sends turns beyond this server; None when it keeps them here."""
    for memory in granted:
        if memory.default and memory.turns_sent_to is not None:
            return (
                f"Every turn of this harness's agent will be sent to {memory.turns_sent_to}, "
                f"by the provider of its default memory `{memory.name}`."
            )
    return None
