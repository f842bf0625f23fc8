"""An agent's memories end to end (Memories §9, §13): a real server with the chapter served,
the real CLI of the base under test in the sandbox under test, the scripted model provider.

The agent remembers a fact in one session through its memory tools (the server's MCP server
`uhp-memory`, reached through the gateway with the turn's token), and finds it again in a NEW
session through the same tools; the record is stamped with the agent's principal, whatever
the agent said, and the second session's instructions were primed with its memory.

Runs per base (scripts/test.sh's per-base passes). A base with no MCP client cannot reach
`uhp-memory`: there each turn says so, and the memory still primes and observes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.scripted_provider import RunningProvider
from tests.support.base_under_test import BASE
from tests.support.server import ServerProcess
from tests.test_tasks_e2e import create, message_text
from uhp_server.engine.facade.memories import Memories
from uhp_server.engine.turns.executor import NO_MEMORY_TOOLS

pytestmark = pytest.mark.slow

FACT = "The launch word is heliotrope."
# The new session finds the fact by asking (memory_recall) where this server answers recall;
# until then by reading the memory (memory_get), the tools it does hold.
RECALLS = hasattr(Memories, "recall")


@pytest.fixture
def client(
    tmp_path: Path, provider: RunningProvider, base_installed: Path
) -> Iterator[httpx.Client]:
    server = ServerProcess(tmp_path, server_env(provider, UHP_MEMORIES="preview")).start()
    try:
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=180
        ) as http:
            yield http
    finally:
        server.stop()


def _ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return dict(response.json())


def _episodes(client: httpx.Client, memory_id: str, count: int = 3) -> list[dict]:
    """The episodes observed into a memory, once the last turn's are there (observe runs
    as the turn ends, after its response is final)."""
    deadline = time.monotonic() + 30
    while True:
        listed = _ok(client.get(f"/v1/memories/{memory_id}/records", params={"type": "episode"}))
        if len(listed["data"]) >= count or time.monotonic() > deadline:
            return list(listed["data"])
        time.sleep(0.2)


def _tool(name: str, arguments: dict) -> str:
    """The directive that makes the scripted model call one memory tool and say its answer.
    The tool's full MCP name: Claude Code defers MCP tools behind its ToolSearch, and over a
    Chat Completions provider a deferred tool is only callable by that name."""
    return f"TOOL mcp__uhp_memory__{name} {json.dumps(arguments)}\nSAY {{result}}"


def _offered_tools(provider: RunningProvider) -> set[str]:
    """Every tool name the model was offered since the provider's last reset, whatever the
    wire (Chat's `function.name`, the others' `name`)."""
    names: set[str] = set()
    for request in provider.requests():
        body = request.get("body")
        tools = body.get("tools") if isinstance(body, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            function = tool.get("function") if isinstance(tool.get("function"), dict) else tool
            names.add(str(function.get("name", "")))
    return names


def test_the_agent_remembers_in_one_session_and_finds_it_in_a_new_one(
    client: httpx.Client, provider: RunningProvider
) -> None:
    harness = _ok(client.post("/v1/harnesses", json=BASE.harness(name="Rememberer")))
    agent = f"member:{harness['id']}"
    notes = _ok(
        client.post(
            "/v1/memories",
            json={"name": "Agent notes", "description": "What the agent keeps for later."},
        )
    )
    grant = {"principal": agent, "privileges": ["read", "write"]}
    _ok(client.post(f"/v1/memories/{notes['id']}/grants", json=grant))
    settings = _ok(
        client.put(
            f"/v1/harnesses/{harness['id']}/memories", json={"default_memory_id": notes["id"]}
        )
    )
    assert settings["principal"] == agent and settings["data"][0]["default"] is True
    if not BASE.speaks_mcp:
        _without_mcp_the_memory_primes_and_observes(client, provider, harness, notes)
        return

    # Session 1: the agent keeps the fact (in its default memory), claiming another writer.
    forged = {"kind": "member", "id": "prin_somebody", "type": "human"}
    stated = {"title": "Launch word", "content": FACT}
    forging = {**stated, "written_by": forged}
    if BASE.passes_unnamed_arguments:
        remember = _tool("memory_remember", forging)
    else:
        # Its CLI answers the forged call itself, refused; the model then calls without it.
        remember = f"TOOL mcp__uhp_memory__memory_remember {json.dumps(forging)}\n" + _tool(
            "memory_remember", stated
        )
    first = create(client, {"input": remember, "metadata": {"harness_id": harness["id"]}})
    assert first["status"] == "completed", first
    assert FACT in message_text(first), json.dumps(first["output"])[:3000]
    if not BASE.passes_unnamed_arguments:
        refused, _kept = [
            i["output"] for i in first["output"] if i["type"] == "function_call_output"
        ]
        assert "written_by" in refused and FACT not in refused, refused
    facts = _ok(client.get(f"/v1/memories/{notes['id']}/records", params={"type": "fact"}))
    assert [r["content"][0]["text"] for r in facts["data"]] == [FACT]
    record = facts["data"][0]
    assert record["written_by"] == {"kind": "member", "id": harness["id"], "type": "agent"}

    # The turn itself was observed into the default memory, as the agent: asked, tools, answer.
    episodes = _episodes(client, notes["id"])
    roles = {part["role"]: part["text"] for e in episodes for part in e["content"]}
    assert roles["user"] == remember and "memory_remember" in roles["tool"]
    assert FACT in roles["assistant"]
    assert {e["written_by"]["id"] for e in episodes} == {harness["id"]}

    # Session 2 (no previous response: a new conversation) finds it through its tools.
    if RECALLS:
        find = _tool("memory_recall", {"text": "launch word"})  # in the default memory
    else:
        find = _tool("memory_get", {"memory_id": notes["id"], "record_id": record["id"]})
    second = create(client, {"input": find, "metadata": {"harness_id": harness["id"]}})
    assert second["status"] == "completed", second
    assert second["metadata"]["session_id"] != first["metadata"]["session_id"]
    said = message_text(second)
    assert FACT in said and "memory-data" in said and harness["id"] in said  # fenced, its writer
    # Priming placed the memory in the new session's instructions, and says what it cost.
    primed = json.loads(second["metadata"]["memory_priming_tokens"])
    assert list(primed) == [notes["id"]] and primed[notes["id"]] > 0


def _without_mcp_the_memory_primes_and_observes(
    client: httpx.Client, provider: RunningProvider, harness: dict, notes: dict
) -> None:
    """A base with no MCP client (it declares no transport) cannot hold the memory tools:
    each turn says so, visibly, and offers the model none; its memory still records the turn
    as the agent's and primes a new session with what it holds."""
    metadata = {"harness_id": harness["id"]}
    provider.reset()
    first = create(client, {"input": "SAY noted", "metadata": metadata})
    assert first["status"] == "completed", first
    assert NO_MEMORY_TOOLS.format(label=BASE.base.label) in json.dumps(first["output"])
    offered = _offered_tools(provider)
    assert not [name for name in offered if "memory_" in name], offered
    episodes = _episodes(client, notes["id"], count=2)  # asked, answered: no tool
    roles = {part["role"]: part["text"] for e in episodes for part in e["content"]}
    assert roles["user"] == "SAY noted" and "noted" in roles["assistant"]
    assert {e["written_by"]["id"] for e in episodes} == {harness["id"]}

    # What the owner keeps there primes the agent's next new session.
    stated = {"content": FACT, "attributes": {"prime": True}}  # always relevant (§9.1)
    _ok(client.post(f"/v1/memories/{notes['id']}/records", json=stated))
    provider.reset()
    second = create(client, {"input": "SAY primed", "metadata": metadata})
    assert second["status"] == "completed", second
    assert second["metadata"]["session_id"] != first["metadata"]["session_id"]
    assert FACT in json.dumps([r.get("body") for r in provider.requests()])
    primed = json.loads(second["metadata"]["memory_priming_tokens"])
    assert list(primed) == [notes["id"]] and primed[notes["id"]] > 0
