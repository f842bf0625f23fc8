"""Starting a child process without holding up the event loop.

`asyncio.create_subprocess_exec` forks on the loop's thread and then waits there until the
child has called exec (Popen reads its error pipe). On a loaded machine that is tens of
milliseconds per start, and 50 tasks starting at once stall every other request for a second.
Here Popen runs on a worker thread; the pipes are then attached to the loop, and the exit is
watched through a pidfd, so no thread waits for the process while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class _WriteProtocol(asyncio.streams.FlowControlMixin):
    """Flow control for the child's stdin, and the close waiter StreamWriter.wait_closed needs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self._closed: asyncio.Future[None] = loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


class SpawnedProcess:
    """The parts of asyncio.subprocess.Process a sandbox uses: pid, pipes, wait, returncode."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._exited = asyncio.get_running_loop().create_future()
        self._watch_exit()

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        assert self._popen.returncode is not None
        return self._popen.returncode

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(self.pid)

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._popen.wait()  # reaps at once: the pidfd said the process is gone
            if not self._exited.done():
                self._exited.set_result(None)

        loop.add_reader(pidfd, exited)


# Children start at this niceness (Linux: a thread's nice value is inherited by what it
# forks, and the spawning threads keep it): on a busy machine the agents yield the CPU to the
# server, which keeps answering requests, cancels and every other agent's model calls.
CHILD_NICE = 10
_spawner: ThreadPoolExecutor | None = None


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, CHILD_NICE)  # 0: this thread


def _the_spawner() -> ThreadPoolExecutor:
    global _spawner
    if _spawner is None:
        _spawner = ThreadPoolExecutor(2, thread_name_prefix="spawn", initializer=_lower_priority)
    return _spawner


async def spawn(argv: list[str], *, limit: int, **popen_kwargs: Any) -> SpawnedProcess:
    """Start `argv` with piped stdin/stdout/stderr; `limit` is the stdout line limit."""
    loop = asyncio.get_running_loop()
    started = loop.run_in_executor(
        _the_spawner(),
        lambda: subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **popen_kwargs,
        ),
    )
    try:
        popen = await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(_kill_started)  # cancelled mid-start: leave nothing running
        raise
    try:
        return await _attach(loop, popen, limit)
    except BaseException:
        _kill(popen)
        raise


async def _attach(
    loop: asyncio.AbstractEventLoop, popen: subprocess.Popen[bytes], limit: int
) -> SpawnedProcess:
    assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
    stdout = asyncio.StreamReader(limit=limit, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), popen.stdout)
    stderr = asyncio.StreamReader(loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stderr), popen.stderr)
    transport, protocol = await loop.connect_write_pipe(lambda: _WriteProtocol(loop), popen.stdin)
    stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    return SpawnedProcess(popen, stdin, stdout, stderr)


def _kill_started(started: asyncio.Future[subprocess.Popen[bytes]]) -> None:
    if not started.cancelled() and started.exception() is None:
        _kill(started.result())


def _kill(popen: subprocess.Popen[bytes]) -> None:
    """Kill the child's process group (it leads its own) and reap it off the loop."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    asyncio.get_running_loop().run_in_executor(None, popen.wait)
