"""JSON-RPC over JSONL on a Process's stdio, as `codex app-server` speaks it.

One reader (the driver) pulls messages; `call` sends a request and reads until its
response arrives, keeping everything read meanwhile for `next_message`. Writes may come
from elsewhere too (an interrupt while the driver waits), so they are serialised.
Codex omits the `"jsonrpc": "2.0"` member, and so do we.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from harness_bases.base import Process

log = logging.getLogger(__name__)

Message = dict[str, Any]


class RpcError(Exception):
    """The server answered a request with a JSON-RPC error."""

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


RequestHandler = Callable[[str, dict[str, Any]], Awaitable["dict[str, Any] | None"]]


class RpcConnection:
    """`on_request(method, params)` answers the server's own requests wherever they turn up
    (also while `call` waits: the server may need the answer before it can respond); it
    returns the result, or None to answer "method not found"."""

    def __init__(self, proc: Process, on_request: RequestHandler) -> None:
        self._proc = proc
        self._on_request = on_request
        self._lines: AsyncIterator[bytes] = aiter(proc.lines())
        self._backlog: deque[Message] = deque()
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self.closed = False

    async def _send(self, msg: Message) -> None:
        text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        # A lone surrogate (possible in a str) is not UTF-8; Codex would reject the line.
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

    async def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        await self._send({"id": request_id, "result": result})

    async def respond_error(self, request_id: Any, code: int, message: str) -> None:
        await self._send({"id": request_id, "error": {"code": code, "message": message}})

    async def call(self, method: str, params: dict[str, Any]) -> Message:
        """Send a request and wait for its result; other messages are kept for later."""
        request_id = await self.request(method, params)
        while True:
            msg = await self._read()
            if msg is None:
                raise ConnectionClosed(f"stdout ended while waiting for {method}")
            if is_response(msg) and msg.get("id") == request_id:
                if "error" in msg:
                    error = msg.get("error") or {}
                    raise RpcError(method, error.get("code"), str(error.get("message", "")))
                result = msg.get("result")
                return result if isinstance(result, dict) else {}
            self._backlog.append(msg)

    async def next_message(self) -> Message | None:
        """The next response or notification not consumed by `call`; None at end of stdout."""
        if self._backlog:
            return self._backlog.popleft()
        return await self._read()

    async def _serve(self, msg: Message) -> None:
        method = str(msg.get("method"))
        params = msg.get("params")
        result = await self._on_request(method, params if isinstance(params, dict) else {})
        try:
            if result is None:
                await self.respond_error(msg["id"], -32601, f"{method} is not supported")
            else:
                await self.respond(msg["id"], result)
        except ConnectionClosed:
            pass  # the CLI is gone; stdout's end will say so

    async def _read(self) -> Message | None:
        """The next response or notification; server requests are answered on the way."""
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
                log.warning("codex_non_json_stdout", extra={"line": line[:500]})
                continue
            if not isinstance(msg, dict):
                continue
            if is_request(msg):
                await self._serve(msg)
                continue
            return msg
        return None
