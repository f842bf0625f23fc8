"""A small pool of agent containers started ahead, each bound to one turn when it starts.

Creating and starting a hardened container costs a few hundred milliseconds of the engine's
time, which a turn would otherwise wait for. A slot is such a container, started with the
sandbox's hardening and limits, its agent's uid and empty folders of its own where the turn's
folders will be mounted (slot_mounts.py), its shell waiting on stdin for the turn's script
(slot_launch.py). A turn takes a ready slot of its uid on the engine it is placed on; the slot
serves that one turn and is removed after it, and the pool makes another in the background.
A slot never sees a principal's folders, token or environment before it is bound, never
serves a second turn, and never another uid.

Slots are kept per (engine, agent uid): the uid is fixed when a container is created. At most
MAX_USERS uids have slots; a principal's first turn is a cold one and gives its uid a place
when one is free, or when the uid holding one has started no turn for USER_IDLE_SECONDS (its
slots are then removed). A place is never taken from a uid in use: with more principals
active than places, the others' turns go cold rather than every turn making and removing
containers for a churning pool. A turn the pool cannot serve
(no ready slot, or what is fixed at create differs: its own memory limit, extra mounts)
creates its own container, as without a pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from uhp_server.sandbox.docker.engines import Engine, EnginePool

log = logging.getLogger(__name__)

MAX_USERS = 4  # agent uids with slots of their own
USER_IDLE_SECONDS = 300.0  # a uid with no turn this long gives its place to the next
FAILURES_BEFORE_PAUSE = 3  # a fill that fails this often in a row waits for the next turn
RETRY_FIRST_SECONDS = 0.5

User = tuple[int, int]


@dataclass(eq=False)
class Slot:
    """One ready container, for one turn of `user` on `engine`."""

    name: str  # random: its folders' names and its label
    engine: Engine
    user: User
    container_id: str
    sock: socket.socket  # attached before start: stdin, stdout and stderr
    exited: asyncio.Future  # its exit code, once it exited
    points: dict[str, Path] = field(default_factory=dict)  # where the turn's folders go

    @property
    def alive(self) -> bool:
        return not self.exited.done() and self.engine.up


class ReadyPool:
    def __init__(
        self,
        size: int,
        engines: EnginePool,
        make: Callable[[Engine, User], Awaitable[Slot]],
        discard: Callable[[Slot], Awaitable[None]],
        max_users: int = MAX_USERS,
    ) -> None:
        """`size` slots per engine and uid. `make(engine, user)` starts a slot (leaving
        nothing behind when it fails or is cancelled); `discard(slot)` removes an unused one."""
        self.size = size
        self.engines = engines
        self._make = make
        self._discard = discard
        self.max_users = max_users
        self._ready: dict[tuple[Engine, User], list[Slot]] = {}
        self._filling: dict[tuple[Engine, User], asyncio.Task[None]] = {}
        self._active: dict[User, float] = {}  # uids with a place: when last active
        self._discarding: set[asyncio.Task[None]] = set()
        self._closed = False

    def ready(self, user: User) -> list[Slot]:
        """The ready slots of `user`, on every engine."""
        return [s for (_, u), slots in self._ready.items() if u == user for s in slots]

    def take(self, engine: Engine, user: User) -> Slot | None:
        """A live slot of `user` on `engine` (the one the turn was placed on), or None: none
        is ready. Either way the pool goes on to keep `user`'s slots filled."""
        slots = self._ready.get((engine, user), [])
        taken: Slot | None = None
        while slots and taken is None:
            slot = slots.pop(0)
            if slot.alive:
                taken = slot
            else:
                self._drop(slot)
        self.want(user)
        return taken

    def want(self, user: User) -> None:
        """Keep `user`'s slots filled on every engine that is up, if it has a place or can
        have one (see the module's docstring)."""
        if self._closed or self.size <= 0 or not self._place_for(user):
            return
        for engine in self.engines.up_engines():
            key = (engine, user)
            if key not in self._filling:
                task = asyncio.create_task(self._fill(engine, user), name="docker ready pool")
                self._filling[key] = task

    async def close(self) -> None:
        """Stop filling and remove every unused slot."""
        self._closed = True
        for task in list(self._filling.values()):
            task.cancel()
        for task in list(self._filling.values()):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for slots in self._ready.values():
            for slot in slots:
                self._drop(slot)
        self._ready.clear()
        while self._discarding:
            await asyncio.gather(*self._discarding, return_exceptions=True)

    def _place_for(self, user: User) -> bool:
        """Whether `user` has a place (now marked active), taking a free one or an idle
        uid's."""
        now = time.monotonic()
        if user not in self._active and len(self._active) >= self.max_users:
            idlest = min(self._active, key=self._active.__getitem__)
            if now - self._active[idlest] < USER_IDLE_SECONDS:
                return False
            self._evict(idlest)
        self._active[user] = now
        return True

    # -- filling -----------------------------------------------------------------------------

    def _wanted(self, engine: Engine, user: User) -> bool:
        return not self._closed and engine.up and user in self._active

    async def _fill(self, engine: Engine, user: User) -> None:
        key = (engine, user)
        try:
            await self._fill_up(engine, user)
        finally:
            # Forgotten before the task ends, not in a done callback: a slot taken between
            # the two would find the key still filling and start no fill of its own.
            if self._filling.get(key) is asyncio.current_task():
                del self._filling[key]

    async def _fill_up(self, engine: Engine, user: User) -> None:
        failures = 0
        key = (engine, user)
        while self._wanted(engine, user) and len(self._ready.get(key, [])) < self.size:
            try:
                slot = await self._make(engine, user)
            except Exception as exc:
                failures += 1
                log.warning(
                    "docker_ready_slot_failed", extra={"engine": engine.name, "error": str(exc)}
                )
                if failures >= FAILURES_BEFORE_PAUSE:
                    return  # the next turn of this uid tries again
                await asyncio.sleep(RETRY_FIRST_SECONDS * 2**failures)
                continue
            failures = 0
            if not self._wanted(engine, user):
                self._drop(slot)
                return
            self._ready.setdefault(key, []).append(slot)
            slot.exited.add_done_callback(functools.partial(self._died, slot))

    def _died(self, slot: Slot, _exited: object = None) -> None:
        """An unused slot's container exited (its engine was lost or reaped it)."""
        slots = self._ready.get((slot.engine, slot.user), [])
        if slot in slots:
            slots.remove(slot)
            self._drop(slot)

    def _evict(self, user: User) -> None:
        del self._active[user]
        for key in [key for key in self._ready if key[1] == user]:
            for slot in self._ready.pop(key):
                self._drop(slot)
        for key in [key for key in self._filling if key[1] == user]:
            self._filling.pop(key).cancel()

    def _drop(self, slot: Slot) -> None:
        task = asyncio.ensure_future(self._discard(slot))
        self._discarding.add(task)
        task.add_done_callback(self._discarding.discard)
