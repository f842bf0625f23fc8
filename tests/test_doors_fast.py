"""One engine behind every door, in process (the FakeBase, the FakeSandbox): the same scripted
turn answered through UHP, Chat Completions, the Oumi harness protocol, the Oumi tool endpoint
over HTTP and over MCP, and the AgentOS contract — each in its own shapes — and every one of
those tasks an ordinary session of the principal, listed by the Sessions chapter."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.agentos_platform import start_invocation
from tests.support.fakes import answer
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for

SCRIPT = "hello"  # every door's prompt; the fake turn answers it
TEXT = "hello from the one engine"
CONNECTION = {"base_url": "https://example.com/v1", "model": "m", "api_key": "k"}


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, agentos_principal="agentos"
    ) as running:
        running.base.script(SCRIPT, answer(TEXT))
        yield running


async def harness_id(server: InProcess) -> str:
    return (await server.client.get("/v1/harnesses")).json()["harnesses"][0]["id"]


async def sessions(server: InProcess) -> int:
    return len((await server.client.get("/v1/sessions")).json()["sessions"])


async def test_uhp(server: InProcess) -> None:
    created = await server.submit(SCRIPT)
    assert created.status_code == 200, created.text
    assert created.json()["output"][-1]["content"][0]["text"] == TEXT
    assert await sessions(server) == 1


async def test_chat_completions(server: InProcess) -> None:
    models = (await server.client.get("/openai/v1/models")).json()["data"]
    chat = await server.client.post(
        "/openai/v1/chat/completions",
        json={"model": models[0]["id"], "messages": [{"role": "user", "content": SCRIPT}]},
    )
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"].endswith(TEXT)
    assert await sessions(server) == 1


async def test_oumi_harness_protocol(server: InProcess) -> None:
    door = f"/oumi/harnesses/{await harness_id(server)}"
    ids = {"protocol_version": "1", "session_id": "row-1", "invocation_id": "inv-1"}
    submitted = await server.client.post(
        f"{door}/submit",
        json={
            **ids,
            "session_action": "start",
            "input_messages": [{"role": "user", "content": SCRIPT}],
            "model_connection": CONNECTION,
        },
    )
    assert submitted.status_code in (200, 202), submitted.text

    async def completed() -> bool:
        status = await server.client.get(f"{door}/get_status", params=ids)
        return status.json()["status"] == "completed"

    await wait_for(completed)
    output = await server.client.get(f"{door}/collect_output", params=ids)
    assert output.json()["messages"][-1]["content"] == TEXT
    assert await sessions(server) == 1


async def test_oumi_tool_over_http(server: InProcess) -> None:
    called = await server.client.post(
        f"/oumi/tools/{await harness_id(server)}", json={"prompt": SCRIPT}
    )
    assert called.status_code == 200, called.text
    assert (called.json()["status"], called.json()["text"]) == ("completed", TEXT)
    assert await sessions(server) == 1


async def test_oumi_tool_over_mcp(server: InProcess) -> None:
    listed = await server.client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    )
    (tool,) = listed.json()["result"]["tools"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool["name"], "arguments": {"prompt": SCRIPT}},
    }
    answered = await server.client.post(
        "/mcp", json=call, headers={"Accept": "application/json, text/event-stream"}
    )
    assert answered.status_code == 200, answered.text
    result = answered.json()["result"]["structuredContent"]
    assert (result["status"], result["text"]) == ("completed", TEXT)
    assert await sessions(server) == 1


async def test_agentos_contract(server: InProcess) -> None:
    body = start_invocation(SCRIPT, CONNECTION["base_url"])
    invoked = await server.client.post("/invoke", json=body, headers={"Authorization": ""})
    assert invoked.status_code == 200, invoked.text
    assert invoked.json()["status"] == "completed", json.dumps(invoked.json())
    assert TEXT in json.dumps(invoked.json()["output"])
    # Its principal is the contract's own (UHP_AGENTOS_PRINCIPAL), not the API key's.
    assert await sessions(server) == 0
