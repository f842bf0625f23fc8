"""A harness as a tool, played the way the Oumi platform calls it: the HTTP tool endpoint
(`POST /oumi/tools/<harness_id>`), the stateless MCP `tools/call` with no initialize, and
the official `mcp` SDK's client as an ordinary MCP client, against a real server running
the real CLI with the scripted provider. Runs on every base (UHP_TEST_BASE)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import jsonschema
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import API_KEY
from tests.support import passes
from tests.support.server import ServerProcess

pytestmark = pytest.mark.slow
SESSION_META = "ai.oumi/sessionId"


@pytest.fixture(scope="module")
def harness_id(server: ServerProcess) -> str:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    return httpx.get(f"{server.url}/v1/harnesses", headers=headers).json()["harnesses"][0]["id"]


@pytest.fixture(scope="module")
def schemas(server: ServerProcess) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/oumi/tools/schemas")  # no credential needed
    assert answer.status_code == 200
    return answer.json()


def call_http(client: httpx.Client, harness_id: str, body: Any, query: str = "") -> httpx.Response:
    return client.post(f"/oumi/tools/{harness_id}{query}", json=body)


def mcp_call(
    client: httpx.Client,
    name: str,
    arguments: dict[str, Any],
    session: str | None = None,
    accept: str = "application/json, text/event-stream",
) -> dict[str, Any]:
    """The platform's call: one stateless JSON-RPC tools/call, no initialize."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if session is not None:
        params["_meta"] = {SESSION_META: session}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    answer = client.post("/mcp", json=message, headers={"Accept": accept})
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in answer.text.splitlines() if line.startswith("data: ")]
        assert len(data) == 1
        return json.loads(data[0])
    return answer.json()


def test_the_http_tool_runs_the_harness_and_continues_its_session(
    client: httpx.Client, harness_id: str, schemas: dict[str, Any]
) -> None:
    first = call_http(
        client, harness_id, {"prompt": "REMEMBER pear\nRUN echo made > made.txt\nSAY wrote it"}
    )
    assert first.status_code == 200, first.text
    result = first.json()
    jsonschema.validate(result, schemas["output_schema"])
    assert result["status"] == "completed"
    assert result["text"] == "wrote it"
    assert [f["filename"] for f in result["files"]] == ["made.txt"]
    assert result["files"][0]["size"] == len("made\n")
    content = client.get(result["files"][0]["download_url"])
    assert content.status_code == 200 and content.content == b"made\n"
    second = call_http(client, harness_id, {"prompt": "RECALL", "session_id": result["session_id"]})
    assert second.status_code == 200, second.text
    assert second.json()["text"] == "you said pear"
    assert second.json()["session_id"] == result["session_id"]
    # An ordinary session of the principal: listed, with both turns.
    turns = client.get(f"/v1/sessions/{result['session_id']}/turns").json()
    assert len(turns["data"] if "data" in turns else turns["turns"]) == 2


@passes.same_on_every_base
def test_http_refusals_are_short_readable_4xx(client: httpx.Client, harness_id: str) -> None:
    for body, needle in (
        ({}, "prompt"),
        ({"prompt": 5}, "prompt"),
        ({"prompt": "SAY x", "colour": "red"}, "colour"),
        ({"prompt": "SAY x", "session_id": "hsess_nope"}, "session"),
        ([1, 2], "object"),
    ):
        answer = call_http(client, harness_id, body)
        assert 400 <= answer.status_code < 500 and answer.status_code not in (408, 429), body
        assert needle in answer.text[:200] and len(answer.text) < 300, answer.text
    bad_json = client.post(f"/oumi/tools/{harness_id}", content=b"{nope")
    assert bad_json.status_code == 400 and "JSON" in bad_json.text
    unknown = call_http(client, "chrn_missing", {"prompt": "SAY x"})
    assert unknown.status_code == 404 and "harness" in unknown.text
    for query in ("?timeout_seconds=0", "?timeout_seconds=121", "?timeout_seconds=abc"):
        answer = call_http(client, harness_id, {"prompt": "SAY x"}, query)
        assert answer.status_code == 400 and "timeout_seconds" in answer.text
    no_key = httpx.post(f"{client.base_url}/oumi/tools/{harness_id}", json={"prompt": "SAY x"})
    assert no_key.status_code == 401


@passes.same_on_every_base
def test_a_failed_turn_is_a_refusal_with_its_reason(client: httpx.Client, harness_id: str) -> None:
    answer = call_http(client, harness_id, {"prompt": "FAIL 400 the upstream refused this"})
    assert answer.status_code == 422, answer.text
    assert "failed" in answer.text and "refused this" in answer.text[:200]


@passes.same_on_every_base
def test_at_the_budget_the_call_answers_incomplete_before_the_platform_gives_up(
    client: httpx.Client, harness_id: str
) -> None:
    started = time.monotonic()
    answer = call_http(
        client, harness_id, {"prompt": "SLOW 60\nSAY " + "slow words " * 20}, "?timeout_seconds=5"
    )
    elapsed = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "incomplete"
    assert elapsed < 5, elapsed


@pytest.mark.parametrize("budget", [1, 2])
@passes.same_on_every_base
def test_a_budget_too_short_for_the_turn_still_answers_incomplete_in_time(
    client: httpx.Client, harness_id: str, budget: int
) -> None:
    """The turn's own budget is whole seconds and cannot fit inside 1 or 2: the call's
    deadline ends it `incomplete` with the timeout reason, never `cancelled`."""
    started = time.monotonic()
    answer = call_http(
        client, harness_id, {"prompt": "SLOW 60\nSAY slow words"}, f"?timeout_seconds={budget}"
    )
    elapsed = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["status"] == "incomplete", result
    assert elapsed < budget, elapsed
    turn = client.get(f"/v1/sessions/{result['session_id']}/turns").json()["turns"][-1]
    response = client.get(f"/v1/responses/{turn['id']}").json()
    assert response["incomplete_details"]["reason"] == "timeout_seconds"


@passes.same_on_every_base
def test_an_mcp_call_past_its_budget_is_incomplete(client: httpx.Client, harness_id: str) -> None:
    started = time.monotonic()
    params = {"name": harness_id, "arguments": {"prompt": "SLOW 60\nSAY slow words"}}
    message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
    answer = client.post("/mcp?timeout_seconds=1", json=message)
    assert time.monotonic() - started < 1
    result = answer.json()["result"]
    assert not result.get("isError") and result["structuredContent"]["status"] == "incomplete"


@passes.same_on_every_base
def test_stateless_mcp_calls_continue_one_session_per_platform_session(
    client: httpx.Client, harness_id: str, schemas: dict[str, Any]
) -> None:
    platform_session = f"oumi-session-{time.time_ns()}"
    first = mcp_call(client, harness_id, {"prompt": "REMEMBER plum\nSAY ok"}, platform_session)
    result = first["result"]
    assert not result.get("isError"), result
    jsonschema.validate(result["structuredContent"], schemas["output_schema"])
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    sse_only = "text/event-stream"
    second = mcp_call(client, harness_id, {"prompt": "RECALL"}, platform_session, sse_only)
    assert second["result"]["structuredContent"]["text"] == "you said plum"
    session = result["structuredContent"]["session_id"]
    assert second["result"]["structuredContent"]["session_id"] == session
    other = mcp_call(client, harness_id, {"prompt": "RECALL"}, platform_session + "-b")
    assert other["result"]["structuredContent"]["session_id"] != session


@passes.same_on_every_base
def test_mcp_refusals_and_protocol_faults(client: httpx.Client, harness_id: str) -> None:
    refused = mcp_call(client, harness_id, {"prompt": "FAIL 400 the upstream refused this"})
    assert refused["result"].get("isError") is True, refused
    assert "refused this" in refused["result"]["content"][0]["text"]
    bad_args = mcp_call(client, harness_id, {"text": "no prompt"})
    assert bad_args["result"]["isError"] is True
    unknown_tool = mcp_call(client, "chrn_missing", {"prompt": "SAY x"})
    assert unknown_tool["error"]["code"] == -32602
    method = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "resources/list"})
    assert method.json()["error"]["code"] == -32601
    parse = client.post("/mcp", content=b"{", headers={"Content-Type": "application/json"})
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    assert client.get("/mcp").status_code == 405
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    no_key = httpx.post(f"{client.base_url}/mcp", json=ping)
    assert no_key.status_code == 401


@pytest.mark.parametrize("request_id", [None, {"a": 1}, [1], True])
@passes.same_on_every_base
def test_a_request_id_that_is_not_a_string_or_number_is_an_invalid_request(
    client: httpx.Client, request_id: Any
) -> None:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "ping"}
    answer = client.post("/mcp", json=message)
    assert answer.status_code == 200
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": answer.json()["error"]["message"]},
    }
    for good_id in ("abc", 0, 7):
        ping = client.post("/mcp", json={**message, "id": good_id}).json()
        assert ping == {"jsonrpc": "2.0", "id": good_id, "result": {}}
    note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202 and not note.content


@passes.same_on_every_base
def test_the_official_mcp_client_lists_and_calls_the_harnesses(
    server: ServerProcess, harness_id: str, schemas: dict[str, Any]
) -> None:
    async def session() -> tuple[Any, Any]:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            tools = await mcp.list_tools()
            prompt = "RUN echo via-sdk\nSAY got {output}"
            called = await mcp.call_tool(harness_id, {"prompt": prompt})
            return tools, called

    tools, called = asyncio.run(session())
    tool = next(t for t in tools.tools if t.name == harness_id)
    assert tool.inputSchema["required"] == ["prompt"]
    assert tool.outputSchema["required"] == ["status", "text", "session_id", "files"]
    assert not called.isError
    jsonschema.validate(called.structuredContent, schemas["output_schema"])
    assert called.structuredContent["text"].startswith("got via-sdk")
