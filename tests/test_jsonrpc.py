"""harness_bases.jsonrpc, the JSON-RPC plumbing the Codex (app-server) and Hermes (ACP)
drivers share, on scripted stdout lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness_bases.jsonrpc import ConnectionClosed, RpcConnection, RpcError


class ScriptedProcess:
    """A Process whose stdout is the given lines; records what is written to stdin."""

    def __init__(self, *lines: object) -> None:
        self._lines = [x if isinstance(x, bytes) else json.dumps(x).encode() for x in lines]
        self.written: list[dict[str, Any]] = []

    async def write(self, data: bytes) -> None:
        assert data.endswith(b"\n")
        self.written.append(json.loads(data))

    async def close_stdin(self) -> None:
        pass

    async def lines(self) -> AsyncIterator[bytes]:
        for line in self._lines:
            yield line

    def stderr_tail(self) -> str:
        return ""


async def allow(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    return {"ok": params.get("n")} if method == "ask" else None


async def test_call_returns_its_result_and_keeps_the_rest_for_later() -> None:
    proc = ScriptedProcess(
        b"not json",
        {"method": "progress", "params": {"step": 1}},
        {"id": 1, "result": {"thread": "t"}},
        {"method": "progress", "params": {"step": 2}},
    )
    rpc = RpcConnection(proc, allow, name="test")
    assert await rpc.call("start", {"x": 1}) == {"thread": "t"}
    assert await rpc.next_message() == {"method": "progress", "params": {"step": 1}}
    assert await rpc.next_message() == {"method": "progress", "params": {"step": 2}}
    assert await rpc.next_message() is None and rpc.closed
    assert proc.written == [{"id": 1, "method": "start", "params": {"x": 1}}]


async def test_the_clis_requests_are_answered_while_a_call_waits() -> None:
    proc = ScriptedProcess(
        {"id": "a", "method": "ask", "params": {"n": 7}},
        {"id": "b", "method": "refresh_token", "params": {}},
        {"id": 1, "result": None},
    )
    rpc = RpcConnection(proc, allow, name="test", jsonrpc="2.0")
    assert await rpc.call("go", {}) is None
    assert proc.written[1:] == [
        {"jsonrpc": "2.0", "id": "a", "result": {"ok": 7}},
        {
            "jsonrpc": "2.0",
            "id": "b",
            "error": {"code": -32601, "message": "refresh_token is not supported"},
        },
    ]
    assert proc.written[0] == {"jsonrpc": "2.0", "id": 1, "method": "go", "params": {}}


async def test_an_error_answer_and_the_end_of_stdout() -> None:
    proc = ScriptedProcess({"id": 1, "error": {"code": -1, "message": "no such thread"}})
    rpc = RpcConnection(proc, allow, name="test")
    with pytest.raises(RpcError) as failed:
        await rpc.call("thread/resume", {})
    assert failed.value.code == -1 and failed.value.message == "no such thread"
    with pytest.raises(ConnectionClosed):
        await rpc.call("thread/start", {})


async def test_notify_and_dropping_what_was_read() -> None:
    proc = ScriptedProcess({"method": "replayed"}, {"id": 1, "result": {}})
    rpc = RpcConnection(proc, allow, name="test")
    await rpc.notify("initialized")
    await rpc.call("load", {})
    rpc.drop_backlog()
    assert await rpc.next_message() is None
    assert proc.written[0] == {"method": "initialized"}
