"""A CLI running in an agent container, spoken to through the container's attach socket.

Docker multiplexes stdout and stderr on one attach stream (no TTY): frames of an 8-byte
header (stream id, 3 zero bytes, big-endian length) and a payload. A pump task splits them:
stdout into a bounded queue read line by line, stderr into a small tail buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import docker.errors
import requests.exceptions

from uhp_server.sandbox.base import SandboxedProcess, SandboxError

log = logging.getLogger(__name__)

STDOUT_LINE_LIMIT = 64 * 1024 * 1024  # CLIs print single JSON lines of several MB
STDERR_TAIL_BYTES = 8 * 1024
QUEUED_CHUNKS = 256  # stdout back-pressure: the pump stops reading past this many chunks
# How long a turn whose streams ended waits for its container's exit to be known before
# saying whether its engine was lost (a stopping engine ends the streams first).
EXIT_SETTLE_SECONDS = 5.0
_STDOUT, _STDERR = 1, 2
_HEADER = 8


def attach_socket(api: Any, container_id: str) -> socket.socket:
    """A plain socket attached to the container's stdin, stdout and stderr (before start, so
    no output can be missed)."""
    params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
    raw = api.attach_socket(container_id, params=params)
    inner = getattr(raw, "_sock", raw)
    # The descriptor taken over outright: asyncio needs a real socket to make non-blocking,
    # and no copy may stay open in the SDK's response object (it sits in a reference cycle,
    # so only a garbage collection would close it): the engine must see our close at once.
    return socket.socket(fileno=inner.detach())


def wait_for_exit(
    api: Any,
    container_id: str,
    loop: asyncio.AbstractEventLoop,
    on_failure: Callable[[BaseException], None] | None = None,
) -> asyncio.Future:
    """A future for the container's exit code, waited for on a thread of its own: the wait
    blocks for the whole turn and must not occupy the loop's shared executor. When the wait
    fails (e.g. the engine went away), `on_failure(error)` runs on the loop before the
    future resolves with -1."""
    future: asyncio.Future[int] = loop.create_future()

    def resolve(code: int) -> None:
        if not future.done():
            future.set_result(code)

    def waiting() -> None:
        failure: BaseException | None = None
        try:
            # Asked before start, "next-exit" answers as the process ends; the engine then
            # removes the container (auto_remove) without making the turn wait for it.
            answer = api.wait(container_id, timeout=None, condition="next-exit")
            code = int(answer.get("StatusCode", -1))
        except docker.errors.NotFound:
            code = -1  # gone before we could ask
        except Exception as exc:
            log.warning("docker_wait_failed", extra={"error": str(exc)})
            code, failure = -1, exc
        # An engine shutting down may answer the wait (an error, or an exit it made up)
        # before it stops answering: whether it still answers is what tells a lost engine.
        try:
            api.ping()
        except Exception as exc:
            failure = exc
        if failure is not None and on_failure is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(on_failure, failure)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(resolve, code)

    threading.Thread(target=waiting, name=f"wait {container_id[:12]}", daemon=True).start()
    return future


class DockerProcess(SandboxedProcess):
    def __init__(
        self,
        api: Any,
        container_id: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        exited: asyncio.Future,
    ) -> None:
        self.api = api
        self.container_id = container_id
        self._reader = reader
        self._writer = writer
        self._exited = exited
        self._stdout: asyncio.Queue[bytes | None] = asyncio.Queue(QUEUED_CHUNKS)
        self._stderr = bytearray()
        self._killed = False
        self._lost: str | None = None  # why the turn's engine was lost, once it was
        self._pump_task = asyncio.create_task(self._pump(), name=f"attach {container_id[:12]}")

    @classmethod
    async def connect(
        cls, api: Any, container_id: str, sock: socket.socket, exited: asyncio.Future
    ) -> DockerProcess:
        reader, writer = await asyncio.open_connection(sock=sock, limit=STDOUT_LINE_LIMIT)
        return cls(api, container_id, reader, writer, exited)

    async def _pump(self) -> None:
        try:
            while True:
                header = await self._reader.readexactly(_HEADER)
                size = int.from_bytes(header[4:8], "big")
                payload = await self._reader.readexactly(size) if size else b""
                if header[0] == _STDERR:
                    self._stderr += payload
                    if len(self._stderr) > STDERR_TAIL_BYTES:
                        del self._stderr[:-STDERR_TAIL_BYTES]
                elif payload:
                    await self._stdout.put(payload)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the container's streams closed: it exited or was killed
        finally:
            await self._stdout.put(None)

    async def write(self, data: bytes) -> None:
        """Raises ConnectionError when the container stopped reading."""
        if self._writer.is_closing():
            raise BrokenPipeError("stdin is closed")
        self._writer.write(data)
        await self._writer.drain()

    async def close_stdin(self) -> None:
        # A half-close: Docker then closes the container's stdin (stdin_once) and the CLI
        # reads end-of-file, while its output keeps flowing back on the same socket.
        if not self._writer.is_closing() and self._writer.can_write_eof():
            with contextlib.suppress(OSError):
                self._writer.write_eof()

    async def lines(self) -> AsyncIterator[bytes]:
        buffer = bytearray()
        while True:
            chunk = await self._stdout.get()
            if chunk is None:
                await self._stdout.put(None)  # a second reader also sees the end
                if buffer:
                    yield bytes(buffer)
                return
            start, scan_from = 0, len(buffer)  # the buffer before this chunk has no newline
            buffer += chunk
            while (newline := buffer.find(b"\n", scan_from)) >= 0:
                yield bytes(buffer[start:newline])
                start = scan_from = newline + 1
            del buffer[:start]
            if len(buffer) > STDOUT_LINE_LIMIT:
                raise SandboxError(f"stdout line longer than {STDOUT_LINE_LIMIT} bytes")

    def stderr_tail(self) -> str:
        return self._stderr[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")

    @property
    def exited(self) -> asyncio.Future:
        """Resolves with the exit code once the container has exited."""
        return self._exited

    async def wait(self) -> int:
        code = await asyncio.shield(self._exited)
        # The attach stream ends with the container; give the pump a moment to catch the end.
        await asyncio.wait({self._pump_task}, timeout=2.0)
        self._writer.close()
        if self._killed and code > 128:
            return -(code - 128)  # like a process killed by a signal
        return code

    def engine_lost(self, reason: str) -> None:
        """The engine running the container is gone: end the process here, with `reason`
        (the engine reaps the container when it is back)."""
        if self._lost is None and not self._exited.done():
            self._lost = reason
            self._writer.transport.abort()  # the pump sees the end of the streams
            self._exited.set_result(-1)

    async def limit_exceeded(self) -> str | None:
        # The attach stream of a stopping engine can end before its wait does: once the
        # streams ended, the exit (and with it whether the engine still answers) is awaited,
        # briefly, before saying. A container still running is not waited for.
        if self._pump_task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._exited), EXIT_SETTLE_SECONDS)
        return self._lost

    async def kill(self) -> None:
        if not self._exited.done():
            self._killed = True
            try:
                await asyncio.to_thread(self.api.kill, self.container_id)
            except docker.errors.NotFound:
                pass  # already gone
            except requests.exceptions.ConnectionError:
                pass  # the engine is gone (its turns are ended by the engine pool)
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: not running any more
                    log.warning("docker_kill_failed", extra={"error": str(exc)})
        await self.wait()
