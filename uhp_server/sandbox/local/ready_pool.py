"""A few local sandboxes' cgroups made ahead, each already holding the process that will
become its bubblewrap (UHP_LOCAL_READY_POOL).

Why: on cgroup v1 the kernel's first move of a process into a cgroup after a quiet moment
waits out an RCU grace period (cgroup_threadgroup_rwsem), some 10 ms per turn on the 2-core
machine, the largest part of a local sandbox's start (bench/README.md, overhead.py). A slot
pays that move ahead: its cgroup is made, with no limit yet, and a small waiting process
(the stub below, a Python of its own at the sandbox's niceness) is started and moved into
it. When a turn starts it takes a slot: its limits are written to the cgroup, and the stub
receives bwrap's argv, environment and the turn's descriptors over a socket of its own and
execs bwrap, which with everything it starts is born inside the cgroup: no move left.

What a slot holds is nothing of a turn's: no folder, no uid, no argv, no environment until
it is taken, and the bwrap it becomes is exactly the one a cold start runs. A slot serves
one turn (its stub execs once; its cgroup goes with that turn's sandbox) and is never
reused, across responses or principals. Empty pool: the cold start, as without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from uhp_server.sandbox import cgroups
from uhp_server.sandbox.spawn import SpawnedProcess, spawn

log = logging.getLogger(__name__)

# The descriptors a taken stub hands bwrap are renumbered from here, so the argv can name
# them before the stub has them (its own are 0-2, its socket and Python's few).
FIRST_FD = 100
_HEADER = 4  # bytes of the message's length, big-endian

# The stub: wait on its socket (argv[1]) for the message and the descriptors, put them at
# FIRST_FD.., exec bwrap. The server gone or the slot let go (EOF): exit.
STUB = f"""
import json, os, socket, sys
channel = socket.socket(fileno=int(sys.argv[1]))
def read(count, have=b""):
    while len(have) < count:
        more = channel.recv(count - len(have))
        if not more:
            sys.exit(0)
        have += more
    return have
head, fds, _, _ = socket.recv_fds(channel, {_HEADER}, 64)
if not head:
    sys.exit(0)
body = read(int.from_bytes(read({_HEADER}, head), "big"))
channel.close()
for index, fd in enumerate(fds):
    os.dup2(fd, {FIRST_FD} + index)
    os.close(fd)
message = json.loads(body)
os.execve(message["argv"][0], message["argv"], message["env"])
"""


@dataclass
class ReadySlot:
    """One stub in its cgroup, waiting."""

    proc: SpawnedProcess
    channel: socket.socket
    group: cgroups.TurnCgroup

    def alive(self) -> bool:
        return self.proc.returncode is None

    async def launch(self, argv: Sequence[str], env: Mapping[str, str], fds: Sequence[int]) -> None:
        """Make the stub exec `argv` with `env`, `fds` at FIRST_FD, FIRST_FD + 1, ... in
        order (the caller closes its own copies). Raises OSError when the stub is gone."""
        body = json.dumps({"argv": list(argv), "env": dict(env)}).encode()
        loop = asyncio.get_running_loop()
        socket.send_fds(self.channel, [len(body).to_bytes(_HEADER, "big")], list(fds))
        await loop.sock_sendall(self.channel, body)
        self.channel.close()

    async def discard(self) -> None:
        """Kill a slot never launched, or whose launch failed (its cgroup stays for the
        caller's cleanup when it was taken; `remove_group` removes it too)."""
        self.channel.close()
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


class ReadyPool:
    """Keeps `size` slots ready; `take()` hands one over and starts making its successor."""

    def __init__(
        self,
        size: int,
        make_group: Callable[[str], cgroups.TurnCgroup],
        name_prefix: str,
        stdout_limit: int,
    ) -> None:
        self.size = size
        self._make_group = make_group  # a cgroup with no limit yet, in the CPU pool
        self._prefix = name_prefix
        self._stdout_limit = stdout_limit
        self._slots: list[ReadySlot] = []
        self._filling: asyncio.Task[None] | None = None
        self._dropping: set[asyncio.Future[None]] = set()
        self._closed = False

    def open(self) -> None:
        self._refill()

    def take(self) -> ReadySlot | None:
        """A ready slot, now the caller's alone; None when none is ready (a cold start)."""
        while self._slots:
            slot = self._slots.pop(0)
            if slot.alive():
                self._refill()
                return slot
            # Died waiting (killed by someone): its cgroup goes in the background.
            self._dropping.add(dropping := asyncio.ensure_future(self._drop(slot)))
            dropping.add_done_callback(self._dropping.discard)
        self._refill()
        return None

    def _refill(self) -> None:
        if self._closed or (self._filling is not None and not self._filling.done()):
            return
        self._filling = asyncio.ensure_future(self._fill())

    async def _fill(self) -> None:
        while not self._closed and len(self._slots) < self.size:
            try:
                slot = await self._make()
            except Exception as exc:  # the cold start still works: say so, try later
                log.warning("sandbox_ready_pool_unavailable", extra={"reason": str(exc)})
                return
            if self._closed:
                await self._drop(slot)
                return
            self._slots.append(slot)

    async def _make(self) -> ReadySlot:
        name = f"{self._prefix}ready-{secrets.token_hex(8)}"
        group = await asyncio.to_thread(self._make_group, name)
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        try:
            proc = await spawn(
                [sys.executable, "-I", "-S", "-c", STUB, str(theirs.fileno())],
                limit=self._stdout_limit,
                start_new_session=True,  # its own process group: bwrap leads it after exec
                pass_fds=(theirs.fileno(),),
                env={},
            )
        except BaseException:
            ours.close()
            await asyncio.to_thread(group.remove)
            raise
        finally:
            theirs.close()
        slot = ReadySlot(proc, ours, group)
        try:
            # The slow move, made here ahead of any turn (the CPU pool's too).
            await asyncio.to_thread(group.add, proc.pid)
        except BaseException:
            await self._drop(slot)
            raise
        return slot

    async def _drop(self, slot: ReadySlot) -> None:
        await slot.discard()
        await asyncio.to_thread(slot.group.remove)

    async def close(self) -> None:
        """Kill the waiting stubs and remove their cgroups (taken slots are their turns')."""
        self._closed = True
        if self._filling is not None:
            self._filling.cancel()
            await asyncio.gather(self._filling, return_exceptions=True)
        slots, self._slots = self._slots, []
        await asyncio.gather(*(self._drop(slot) for slot in slots), return_exceptions=True)
