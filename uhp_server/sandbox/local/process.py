"""A process in the local sandbox: its streams, its kill, and the watch over its limits."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable

from uhp_server.sandbox.base import SandboxedProcess, SandboxError
from uhp_server.sandbox.limits import WATCH_SECONDS, LimitWatch
from uhp_server.sandbox.spawn import SpawnedProcess

log = logging.getLogger(__name__)

STDOUT_LINE_LIMIT = 64 * 1024 * 1024  # CLIs print single JSON lines of several MB
STDERR_TAIL_BYTES = 8 * 1024


class LocalProcess(SandboxedProcess):
    """A bwrap process. bwrap leads its own process group and holds a pid namespace whose
    init dies with it, so killing the group ends everything the agent started, including
    processes that called setsid() or ignore SIGHUP. A limit hit kills it the same way;
    `cleanup` (the sandbox's sockets and cgroup) runs once it is gone."""

    def __init__(
        self,
        proc: SpawnedProcess,
        watch: LimitWatch | None = None,
        cleanup: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._proc = proc
        self._stderr = bytearray()
        self._watch = watch
        self._limit_reason: str | None = None
        # Drained in the background so a chatty stderr can never block the child.
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        self._watch_task = asyncio.create_task(self._watch_limits()) if watch else None
        self._after_exit = asyncio.create_task(self._clean_up_after_exit(cleanup))

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr += chunk
            if len(self._stderr) > STDERR_TAIL_BYTES:
                del self._stderr[:-STDERR_TAIL_BYTES]

    async def _watch_limits(self) -> None:
        assert self._watch is not None
        while self._proc.returncode is None:
            try:
                reason = await self._watch.reason()
            except Exception:
                log.exception("sandbox_limit_watch_failed")
                return
            if reason is not None:
                self._limit_reason = reason
                log.warning("sandbox_limit_exceeded", extra={"reason": reason})
                self._killpg()
                return
            await asyncio.sleep(WATCH_SECONDS)

    async def _clean_up_after_exit(self, cleanup: Callable[[], Awaitable[None]] | None) -> None:
        await self._proc.wait()
        if self._watch_task is not None:
            self._watch_task.cancel()
        if self._limit_reason is None and self._watch is not None:
            self._limit_reason = self._watch.cgroup_reason()  # before the cgroup goes
        if cleanup is not None:
            try:
                await cleanup()
            except Exception:
                log.exception("sandbox_cleanup_failed")

    async def limit_exceeded(self) -> str | None:
        if self._limit_reason is None and self._watch is not None:
            # A hit between two looks of the watch: the turn's outcome must not depend on it.
            self._limit_reason = await self._watch.reason(force_disk=True)
        return self._limit_reason

    async def write(self, data: bytes) -> None:
        """Raises ConnectionError (e.g. BrokenPipeError) when the process stopped reading."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def close_stdin(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(ConnectionError):
                await stdin.wait_closed()

    async def lines(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while True:
            try:
                line = await self._proc.stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # EOF; maybe a last unterminated line
                if exc.partial:
                    yield exc.partial
                return
            except asyncio.LimitOverrunError as exc:
                raise SandboxError(f"stdout line longer than {STDOUT_LINE_LIMIT} bytes") from exc
            yield line[:-1]

    def stderr_tail(self) -> str:
        return self._stderr[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")

    async def wait(self) -> int:
        code = await self._proc.wait()
        # stderr closes when the sandbox is gone; give the reader a moment to catch the end.
        await asyncio.wait({self._stderr_task}, timeout=2.0)
        await asyncio.shield(self._after_exit)
        return code

    def _killpg(self) -> None:
        if self._proc.returncode is None:
            # Only while unreaped: after that the pgid could belong to someone else.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    async def pause(self) -> bool:
        group = self._watch.cgroup if self._watch is not None else None
        if group is None or self._proc.returncode is not None:
            return False
        try:
            return await asyncio.to_thread(group.freeze)
        except Exception:  # not paused, whatever the reason: the caller stops it
            log.exception("sandbox_pause_failed")
            await self.resume()
            return False

    async def resume(self) -> None:
        group = self._watch.cgroup if self._watch is not None else None
        if group is not None and group.frozen:
            await asyncio.to_thread(group.thaw)

    async def kill(self) -> None:
        self._killpg()
        await self.resume()  # a frozen process takes its SIGKILL only once thawed
        await self.wait()

    async def kill_and_wait(self) -> int:
        await self.kill()
        return await self.wait()
