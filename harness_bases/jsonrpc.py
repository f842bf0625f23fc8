"""JSON-RPC over JSONL on a Process's stdio: what `codex app-server` and ACP agents speak.

One reader (the driver) pulls messages; `call` sends a request and reads until its response
arrives, keeping everything read meanwhile for `next_message`. Requests from the other side
(approvals, permission questions) are answered on the way, also while `call` waits: the
CLI may need the answer before it can respond. Writes may come from elsewhere too (an
interrupt while the driver waits), so they are serialised.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from harness_bases.base import Process

log = logging.getLogger(__name__)

Message = dict[str, Any]
# on_request(method, params) -> the result, or None to answer "method not found".
RequestHandler = Callable[[str, dict[str, Any]], Awaitable["dict[str, Any] | None"]]

METHOD_NOT_FOUND = -32601


class RpcError(Exception):
    """The CLI answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: int | None, message: str) -> None:
        super().__init__(f"{method} failed ({code}): {message}")
        self.method = method
        self.code = code
        self.message = message


class ConnectionClosed(Exception):
    """The CLI's stdout ended before the awaited response, or its stdin is gone."""


def is_request(msg: Message) -> bool:
    return "method" in msg and "id" in msg


def is_notification(msg: Message) -> bool:
    return "method" in msg and "id" not in msg


def is_response(msg: Message) -> bool:
    return "method" not in msg and "id" in msg


class RpcConnection:
    """One JSON-RPC conversation with a CLI on its stdio.

    `name` prefixes the log events (`<name>_non_json_stdout`). `jsonrpc` is the version
    member every message carries ("2.0" for ACP), or None where the CLI's dialect omits it
    (Codex does, and so do we when talking to it)."""

    def __init__(
        self,
        proc: Process,
        on_request: RequestHandler,
        *,
        name: str,
        jsonrpc: str | None = None,
    ) -> None:
        self._proc = proc
        self._on_request = on_request
        self._name = name
        self._envelope: Message = {} if jsonrpc is None else {"jsonrpc": jsonrpc}
        self._lines: AsyncIterator[bytes] = aiter(proc.lines())
        self._backlog: deque[Message] = deque()
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self.closed = False

    def answer_with(self, on_request: RequestHandler) -> None:
        """Answer the CLI's requests with `on_request` from now on: a process kept warm for
        the session's next turn asks that turn's user, not the last one's."""
        self._on_request = on_request

    async def _send(self, msg: Message) -> None:
        text = json.dumps({**self._envelope, **msg}, ensure_ascii=False, separators=(",", ":"))
        # A lone surrogate (possible in a str) is not UTF-8; the CLI would reject the line.
        data = text.encode("utf-8", errors="replace") + b"\n"
        async with self._write_lock:
            try:
                await self._proc.write(data)
            except (ConnectionError, OSError) as exc:  # the CLI is gone
                raise ConnectionClosed(f"stdin closed: {exc}") from exc

    async def request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request without waiting; returns its id."""
        self._next_id += 1
        await self._send({"id": self._next_id, "method": method, "params": params})
        return self._next_id

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: Message = {"method": method}
        if params is not None:
            msg["params"] = params
        await self._send(msg)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and wait for its result (may be None); other messages are kept."""
        return await self.wait_for(await self.request(method, params), method)

    async def wait_for(self, request_id: int, method: str) -> Any:
        """Read until the response to `request_id`; returns its result (may be None)."""
        while True:
            msg = await self._read()
            if msg is None:
                raise ConnectionClosed(f"stdout ended while waiting for {method}")
            if is_response(msg) and msg.get("id") == request_id:
                if "error" in msg:
                    error = msg.get("error") or {}
                    raise RpcError(method, error.get("code"), str(error.get("message", "")))
                return msg.get("result")
            self._backlog.append(msg)

    async def next_message(self) -> Message | None:
        """The next response or notification not consumed by `call`; None at end of stdout."""
        if self._backlog:
            return self._backlog.popleft()
        return await self._read()

    async def messages(self) -> AsyncIterator[Message]:
        """`next_message` until stdout ends."""
        while (msg := await self.next_message()) is not None:
            yield msg

    def drop_backlog(self) -> None:
        """Forget the messages read so far (e.g. a loaded session's replayed history)."""
        self._backlog.clear()

    async def _serve(self, msg: Message) -> None:
        method = str(msg.get("method"))
        params = msg.get("params")
        result = await self._on_request(method, params if isinstance(params, dict) else {})
        if result is None:
            error = {"code": METHOD_NOT_FOUND, "message": f"{method} is not supported"}
            reply: Message = {"id": msg["id"], "error": error}
        else:
            reply = {"id": msg["id"], "result": result}
        with contextlib.suppress(ConnectionClosed):  # gone: stdout's end will say so
            await self._send(reply)

    async def _read(self) -> Message | None:
        """The next response or notification; the CLI's requests are answered on the way."""
        while not self.closed:
            try:
                line = await anext(self._lines)
            except StopAsyncIteration:
                self.closed = True
                return None
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning(f"{self._name}_non_json_stdout", extra={"line": line[:500]})
                continue
            if not isinstance(msg, dict):
                continue
            if is_request(msg):
                await self._serve(msg)
                continue
            return msg
        return None
