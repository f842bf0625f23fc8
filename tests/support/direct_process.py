"""The Process protocol over a plain subprocess, with no sandbox: how the base tests and the
overhead bench run a CLI directly, to look at the base alone or to time it against the server.

Every stdout line is kept with the time it arrived, so a test can save a live run as a parser
fixture or check when the CLI reported something.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from harness_bases.base import Invocation

# A CLI may print one very long JSON line (a whole tool output); asyncio's default is 64 KiB.
LINE_LIMIT = 64 * 1024 * 1024


class DirectProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.stdout: list[tuple[float, bytes]] = []  # (time.monotonic(), line)
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def start(cls, invocation: Invocation, wrap: list[str] | None = None) -> DirectProcess:
        """Start the invocation as it is; `wrap` goes in front of its argv (e.g. strace)."""
        proc = await asyncio.create_subprocess_exec(
            *(wrap or []),
            *invocation.argv,
            env=invocation.env,
            cwd=invocation.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )
        return cls(proc)

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def close_stdin(self) -> None:
        assert self._proc.stdin is not None
        if not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    async def lines(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            self.stdout.append((time.monotonic(), line.rstrip(b"\n")))
            yield line.rstrip(b"\n")

    def stderr_tail(self) -> str:
        return self._stderr[-4096:].decode(errors="replace")

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr += chunk

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def finish(self, timeout: float = 10.0) -> int:
        """Wait for the exit, killing the CLI after `timeout`; then stderr is complete."""
        try:
            return await asyncio.wait_for(self._proc.wait(), timeout)
        except TimeoutError:
            self._proc.kill()
            return await self._proc.wait()
        finally:
            await self._stderr_task

    def messages(self) -> list[dict[str, Any]]:
        """stdout as JSON messages (the CLIs the bases drive all speak JSONL)."""
        return [json.loads(line) for _, line in self.stdout if line.strip()]

    def save_stdout(self, path: Path) -> None:
        """Write stdout as it came, one line each (a parser fixture)."""
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"\n".join(line for _, line in self.stdout) + b"\n")
