"""The `acp` base end to end, with each of its two real test agents (claude-code-acp,
codex-acp, installed by `uhp-server bases install acp`): a harness names the agent, the server
runs it in the sandbox through the gateway against the scripted provider.

Run one agent at a time: `pytest tests/test_acp_e2e.py -k claude-code-acp -x`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, PROVIDER_KEY, TEST_SANDBOX, installed_tools, server_env
from tests.scripted_provider.fixture import RunningProvider, start_provider
from tests.support.acp_agents import AGENTS, harness_body
from tests.support.base_under_test import ACP_AGENT_MODELS
from tests.support.sandbox_processes import processes_naming
from tests.support.schema import check_stream
from tests.support.server import ServerProcess
from tests.support.sse import read_stream
from tests.test_sessions_e2e import files_holding
from tests.test_tasks_e2e import create, message_text, wait_terminal

pytestmark = pytest.mark.slow

# Models each agent knows by name (Codex puts a warning about an unknown model's metadata in
# its reply), served by the scripted provider.
MODEL = {agent: known[0] for agent, known in ACP_AGENT_MODELS.items()}


@pytest.fixture(scope="module")
def acp_provider() -> Iterator[RunningProvider]:
    running = start_provider(PROVIDER_KEY, sorted(set(MODEL.values())))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, acp_provider: RunningProvider
) -> Iterator[ServerProcess]:
    installed_tools("acp")
    if TEST_SANDBOX == "docker":
        from tests.support.docker import runtime_image_or_skip

        runtime_image_or_skip()
    env = server_env(
        acp_provider,
        UHP_BASES="acp",
        UHP_OPENAI_DEFAULT_MODEL=MODEL["codex-acp"],
        UHP_ANTHROPIC_DEFAULT_MODEL=MODEL["claude-code-acp"],
        # The Oumi door's model connection (the question test) is a provider on loopback.
        UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",
    )
    running = ServerProcess(tmp_path_factory.mktemp("acp-server"), env).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=180
    ) as http:
        yield http


@pytest.fixture(scope="module", params=sorted(AGENTS))
def agent(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def harness(client: httpx.Client, agent: str) -> str:
    body = {**harness_body(agent), "default_model": MODEL[agent]}
    created = client.post("/v1/harnesses", json=body)
    assert created.status_code == 200, created.text
    return str(created.json()["id"])


def task(harness: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"input": text, "metadata": {"harness_id": harness}, **extra}


def test_a_text_turn_streams_the_agents_reply(client: httpx.Client, harness: str) -> None:
    stream = read_stream(
        client, "POST", "/v1/responses", json=task(harness, "SAY hello from acp", stream=True)
    )
    final = check_stream(stream.events)
    assert final["status"] == "completed", final.get("error")
    assert message_text(final) == "hello from acp"
    deltas = [e for e in stream.events if e["type"] == "response.output_text.delta"]
    assert len(deltas) > 1, "text must arrive as real deltas"
    assert final["metadata"]["harness_id"] == harness


def test_a_tool_call_is_an_item_with_its_output(client: httpx.Client, harness: str) -> None:
    result = create(client, task(harness, "RUN echo tool-ran > ran.txt; cat ran.txt\nSAY done"))
    assert result["status"] == "completed", result.get("error")
    calls = [i for i in result["output"] if i["type"] == "function_call"]
    outputs = [i for i in result["output"] if i["type"] == "function_call_output"]
    assert calls and outputs
    assert "echo tool-ran" in calls[0]["arguments"]
    assert outputs[0]["call_id"] == calls[0]["call_id"]
    assert "tool-ran" in outputs[0]["output"]
    assert message_text(result).endswith("done")


def test_a_second_task_resumes_the_agents_conversation(client: httpx.Client, harness: str) -> None:
    first = create(client, task(harness, "REMEMBER tangerine\nSAY noted"))
    assert first["status"] == "completed", first.get("error")
    second = create(
        client,
        {**task(harness, "RECALL"), "previous_response_id": first["id"]},
    )
    assert second["status"] == "completed", second.get("error")
    assert second["metadata"]["session_id"] == first["metadata"]["session_id"]
    assert "tangerine" in message_text(second)
    assert "resume" not in message_text(second).lower()  # no "could not be resumed" notice


def test_a_cancelled_turn_stops_the_agent(
    client: httpx.Client, server: ServerProcess, harness: str
) -> None:
    sleeping = f"sleep 60.{uuid.uuid4().int % 10**6:06d}"  # this test's own, to look for
    command = f"touch cancel-me && {sleeping}"
    started = create(client, task(harness, f"RUN {command}\nSAY too late", background=True))
    # Until the command runs: its file, not its item (claude-code-acp reports a Bash call
    # only once it has ended, when the client offers no ACP terminals).
    session = server.data_dir / "sessions" / started["metadata"]["session_id"]
    marker = session / "workspace" / "cancel-me"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the command never ran"
    begun = time.monotonic()
    cancelled = client.post(f"/v1/responses/{started['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    final = wait_terminal(client, started["id"], timeout=30)
    assert final["status"] == "cancelled"
    assert time.monotonic() - begun < 30
    assert "too late" not in message_text(final)
    deadline = time.monotonic() + 10  # and the command with it: nothing left running it
    while processes_naming(sleeping) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(sleeping) == []


def test_the_step_budget_stops_the_turn(client: httpx.Client, harness: str) -> None:
    result = create(client, task(harness, "LOOP", max_step=2))
    assert result["status"] == "incomplete", result.get("error")
    assert result["incomplete_details"] == {"reason": "max_step", "max_step": 2}
    assert len([i for i in result["output"] if i["type"] == "function_call"]) == 2


def test_a_file_the_agent_writes_is_an_artifact(client: httpx.Client, harness: str) -> None:
    result = create(client, task(harness, "RUN echo acp-artifact > made.txt\nSAY saved"))
    assert result["status"] == "completed", result.get("error")
    listed = client.get(f"/v1/sessions/{result['metadata']['session_id']}/files").json()
    (made,) = [f for f in listed["files"] if f["filename"] == "made.txt"]
    assert made["bytes"] == len("acp-artifact\n")


def test_a_store_false_turn_leaves_nothing_in_the_agent_home(
    client: httpx.Client, server: ServerProcess, harness: str
) -> None:
    """The agent's conversation files (the paths its harness names) of an unkept turn are put
    back as they were; the kept conversation before it stays."""
    tag = uuid.uuid4().hex[:12]
    first = create(client, task(harness, f"REMEMBER kept{tag}"))
    assert first["status"] == "completed", first.get("error")
    unkept = create(
        client,
        {
            **task(harness, f"unkept-prompt-{tag}\nSAY unkept-reply-{tag}", store=False),
            "previous_response_id": first["id"],
        },
    )
    assert unkept["status"] == "completed", unkept.get("error")
    after = create(client, {**task(harness, "SAY after"), "previous_response_id": unkept["id"]})
    assert after["status"] == "completed", after.get("error")
    home = server.data_dir / "sessions" / first["metadata"]["session_id"] / "home"
    left = files_holding(home, f"kept{tag}", f"unkept-prompt-{tag}", f"unkept-reply-{tag}")
    assert left[f"kept{tag}"], "the kept conversation stays where the agent keeps it"
    assert left[f"unkept-prompt-{tag}"] == [] and left[f"unkept-reply-{tag}"] == [], left


def test_a_question_pauses_the_turn_until_the_user_answers(
    server: ServerProcess, acp_provider: RunningProvider, harness: str, agent: str
) -> None:
    """Through the Oumi door, whose tasks take questions: the agent calls the server's
    question tool (an MCP server the agent takes over ACP), the turn waits as
    input_required, and the answer reaches the model."""
    endpoint = f"{server.url}/oumi/harnesses/{harness}"
    http = httpx.Client(headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60)
    connection = {"base_url": acp_provider.base_url, "model": MODEL[agent], "api_key": PROVIDER_KEY}
    # Claude Code defers MCP tools (listing none): its model calls the tool by its full name.
    tool = "mcp__uhp-user__ask_user" if agent == "claude-code-acp" else "ask_user"
    question = json.dumps({"question": "Which colour, teal or red?"})
    body: dict[str, Any] = {
        "protocol_version": "1",
        "session_id": "ses_" + uuid.uuid4().hex,
        "invocation_id": uuid.uuid4().hex,
        "session_action": "start",
        "input_messages": [
            {"role": "user", "content": f"TOOL {tool} {question}\nSAY colour is {{output}}"}
        ],
        "model_connection": connection,
    }

    invocation = {"invocation_id": str(body["invocation_id"])}

    def wait(until: tuple[str, ...]) -> dict[str, Any]:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            status = http.get(f"{endpoint}/get_status", params=invocation).json()
            if status["status"] in until:
                return dict(status)
            time.sleep(0.3)
        raise AssertionError(f"the invocation stayed {status['status']}")

    assert http.post(f"{endpoint}/submit", json=body).status_code == 202
    assert wait(("input_required", "completed", "failed"))["status"] == "input_required"
    paused = http.get(f"{endpoint}/collect_output", params=invocation).json()
    (call,) = paused["messages"][-1]["tool_calls"]
    assert json.loads(call["function"]["arguments"])["question"] == "Which colour, teal or red?"
    resume = {
        **body,
        "session_action": "resume",
        "input_messages": [{"role": "tool", "tool_call_id": call["id"], "content": "teal-4471"}],
    }
    assert http.post(f"{endpoint}/submit", json=resume).status_code in (200, 202)
    status = wait(("completed", "failed"))
    assert status["status"] == "completed", status
    output = http.get(f"{endpoint}/collect_output", params=invocation).json()
    # The tool's result as the agent hands it to its model (Codex: MCP content blocks as JSON).
    reply = output["messages"][-1]["content"]
    assert reply.startswith("colour is ") and "teal-4471" in reply


def test_the_agent_gets_the_gateway_and_its_token_only(
    client: httpx.Client, harness: str, tmp_path: Path
) -> None:
    result = create(client, task(harness, "RUN env | sort\nSAY {output}"))
    assert result["status"] == "completed", result.get("error")
    seen = "".join(
        i.get("output", "") for i in result["output"] if i["type"] == "function_call_output"
    )
    assert "sk-scripted-provider-secret" not in seen
    assert "server-secret-do-not-leak" not in seen
    assert "/gateway/" in seen  # the base URL it was given is the gateway's
