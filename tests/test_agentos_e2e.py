"""A harness as an AgentOS agent, with the platform played by a stand-in: its holds endpoint
and its model gateway (the scripted provider, Chat Completions only, refusing any call
without the current invocation's run token). A real server with UHP_AGENTOS_PRINCIPAL set
runs the real CLI. Runs on every base (UHP_TEST_BASE)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml

from tests.conftest import DEFAULT_MODEL, TEST_BASE, server_env
from tests.scripted_provider import RunningProvider, start_provider
from tests.support import passes
from tests.support.agentos_platform import RUN_TOKEN_HEADER, AgentosPlatform
from tests.support.base_under_test import BASE
from tests.support.server import ServerProcess
from tests.support.written import everything_written

pytestmark = pytest.mark.slow
GATEWAY_KEY = "sk-agentos-gateway-ignored"
PLATFORM_MODEL = "platform/agent-model"
DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "agentos" / "agentos.yaml"
# The question tool as the CLI names it to its model (the scripted provider matches a prefixed
# name by its suffix, but Claude Code defers MCP tools, listing none).
ASK_TOOL = {"claude-code": "mcp__uhp-user__ask_user"}.get(TEST_BASE, "ask_user")
# Gemini CLI asks through its own ask_user (a list of questions); the others through ours.
ASK_ARGUMENTS = (
    '{"questions": [{"question": "Which colour?", "header": "Colour", "type": "text"}]}'
    if TEST_BASE == "gemini-cli"
    else '{"question": "Which colour?"}'
)
KEEP_SECONDS = 4  # a question waits this long with its process, then the turn is parked
OUTPUT_SCHEMA = yaml.safe_load(DEPLOY.read_text())["capabilities"]["run"]["output"]


@pytest.fixture(scope="module")
def gateway() -> Iterator[RunningProvider]:
    with start_provider(
        GATEWAY_KEY,
        [PLATFORM_MODEL, DEFAULT_MODEL],
        chat_only=True,
        required_headers={RUN_TOKEN_HEADER: "tok_none_yet"},
    ) as running:
        yield running


@pytest.fixture(scope="module")
def platform(gateway: RunningProvider) -> Iterator[AgentosPlatform]:
    with AgentosPlatform(gateway) as running:
        yield running


@pytest.fixture(scope="module")
def agent(
    tmp_path_factory: pytest.TempPathFactory,
    provider: RunningProvider,
    base_installed: Path,
) -> Iterator[ServerProcess]:
    env = server_env(
        provider,
        UHP_AGENTOS_PRINCIPAL="agentos",
        UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS="true",  # the stand-in is on loopback
        UHP_PAUSED_TURN_KEEP_SECONDS=str(KEEP_SECONDS),
    )
    running = ServerProcess(tmp_path_factory.mktemp("agentos"), env).start()
    yield running
    running.stop()


def invoke(agent: ServerProcess, platform: AgentosPlatform, body: dict[str, Any]) -> Any:
    """One invocation, answered; then its token stops working, as on the platform."""
    try:
        answer = httpx.post(f"{agent.url}/invoke", json=body, timeout=180)
    finally:
        platform.answered()
    assert answer.status_code == 200, answer.text
    return answer.json()


def completed_output(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["status"] == "completed", answer
    jsonschema.validate(answer["output"], OUTPUT_SCHEMA)
    return answer["output"]


def model_calls(gateway: RunningProvider) -> list[dict[str, Any]]:
    return [r for r in gateway.requests() if r["path"] == "/v1/chat/completions"]


def agent_sessions(agent: ServerProcess) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {agent.create_key('agentos')}"}
    return httpx.get(f"{agent.url}/v1/sessions?limit=100", headers=headers).json()["sessions"]


@passes.same_on_every_base
def test_the_doors_are_off_unless_a_principal_is_named(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/health").status_code == 404
    assert httpx.post(f"{server.url}/invoke", json={}).status_code == 404


def test_health_and_a_run_through_the_platform_gateway(
    agent: ServerProcess, platform: AgentosPlatform, gateway: RunningProvider
) -> None:
    assert httpx.get(f"{agent.url}/health").status_code == 200
    gateway.reset()
    body = platform.invoke_body(
        "r_start",
        "RUN echo made > made.txt\nSAY wrote it",
        models={"reader": PLATFORM_MODEL, "writer": "other"},  # no `agent`: the first entry
    )
    token = body["context"]["token"]
    output = completed_output(invoke(agent, platform, body))
    assert output["text"] == "wrote it" and output["status"] == "completed"
    assert [f["filename"] for f in output["files"]] == ["made.txt"]
    headers = {"Authorization": f"Bearer {agent.create_key('agentos')}"}
    # The contract's output is read outside this server: every download link is absolute.
    link = output["files"][0]["download_url"]
    assert link.startswith(agent.url + "/"), link
    assert httpx.get(link, headers=headers).content.strip() == b"made"
    calls = model_calls(gateway)
    assert len(calls) >= 2
    for call in calls:
        assert call["headers"][RUN_TOKEN_HEADER] == token
        assert call["body"]["model"] == PLATFORM_MODEL
    # An ordinary session of the principal (readable over UHP with its own key).
    session = httpx.get(f"{agent.url}/v1/sessions/{output['session_id']}", headers=headers)
    assert session.status_code == 200
    # The same start repeated (same run_id) runs nothing again.
    before = len(model_calls(gateway))
    again = completed_output(invoke(agent, platform, platform.invoke_body("r_start", "x")))
    assert again["session_id"] == output["session_id"]
    assert len(model_calls(gateway)) == before


@passes.same_on_every_base
def test_runs_of_one_session_continue_one_uhp_session(
    agent: ServerProcess, platform: AgentosPlatform, gateway: RunningProvider
) -> None:
    first = invoke(
        agent, platform, platform.invoke_body("r_s1", "REMEMBER fig\nSAY ok", session_id="s_1")
    )
    second = invoke(agent, platform, platform.invoke_body("r_s2", "RECALL", session_id="s_1"))
    gateway.reset()
    no_models = platform.invoke_body("r_s3", "SAY other", session_id="s_2", models={})
    other = invoke(agent, platform, no_models)
    assert {c["body"]["model"] for c in model_calls(gateway)} == {DEFAULT_MODEL}  # the harness's
    assert completed_output(second)["text"] == "you said fig"
    session = completed_output(first)["session_id"]
    assert completed_output(second)["session_id"] == session
    assert completed_output(other)["session_id"] != session


@pytest.mark.parametrize("decided_after", [0, KEEP_SECONDS + 2], ids=["live", "parked"])
def test_a_question_opens_a_hold_and_the_resume_goes_on(
    agent: ServerProcess, platform: AgentosPlatform, gateway: RunningProvider, decided_after: int
) -> None:
    gateway.reset()
    prompt = BASE.asking(f"TOOL {ASK_TOOL} {ASK_ARGUMENTS}", "Which colour?", "SAY picked {output}")
    holds_before = len(platform.holds)
    run_id = f"r_ask_{decided_after}"
    suspended = invoke(agent, platform, platform.invoke_body(run_id, prompt))
    assert suspended["status"] == "suspended", suspended
    hold = platform.holds[-1]
    assert len(platform.holds) == holds_before + 1
    assert suspended["hold_id"] == hold["id"] and hold["intent"] == "Which colour?"
    # A repeated attempt of the same invocation gets the same hold; nothing runs or asks again.
    repeat = platform.invoke_body(run_id, prompt)
    repeat["invocation"]["attempt"] = 2
    assert invoke(agent, platform, repeat) == suspended
    assert len(platform.holds) == holds_before + 1
    time.sleep(decided_after)  # a person deciding; past KEEP_SECONDS the process is gone
    resume = platform.invoke_body(run_id, prompt, seq=2, resume={"answer": "blue"})
    output = completed_output(invoke(agent, platform, resume))
    calls = len(model_calls(gateway))
    resume_again = platform.invoke_body(run_id, prompt, seq=2, resume={"answer": "blue"})
    resume_again["invocation"]["attempt"] = 2
    assert completed_output(invoke(agent, platform, resume_again)) == output
    assert len(model_calls(gateway)) == calls  # the decision was applied once
    if decided_after or BASE.answered_in_a_new_turn:
        # Parked (or asked in the agent's final text): a new turn resumed the CLI's
        # conversation and told the agent the decision (the scripted model still follows the
        # first prompt's script).
        assert "The user's answer: blue" in json.dumps(model_calls(gateway)[-1]["body"])
    else:
        # The answer is the tool's result (Hermes hands MCP results over as {"result": …}).
        assert output["text"].startswith("picked") and "blue" in output["text"]
    assert len(platform.holds) == holds_before + 1
    # The gateway refuses any other token: the resumed turn's calls carried the new one.
    resumed_token = resume["context"]["token"]
    assert model_calls(gateway)[-1]["headers"][RUN_TOKEN_HEADER] == resumed_token


@passes.same_on_every_base
def test_an_experiment_run_answers_from_recorded_holds_and_opens_none(
    agent: ServerProcess, platform: AgentosPlatform, gateway: RunningProvider
) -> None:
    prompt = f"TOOL {ASK_TOOL} {ASK_ARGUMENTS}\nSAY picked {{output}}"
    recorded = {"intent": "Which colour?", "actions": [], "items": [], "details": {}}
    evaluation = {"recorded_holds": [{**recorded, "decision": "green"}]}
    holds_before, refused_before = len(platform.holds), platform.refused_holds
    body = platform.invoke_body("r_eval", prompt, evaluation=evaluation)
    output = completed_output(invoke(agent, platform, body))
    assert output["text"].startswith("picked") and "green" in output["text"]
    assert (len(platform.holds), platform.refused_holds) == (holds_before, refused_before)


@passes.same_on_every_base
def test_faults_are_200_failed_with_a_valid_code(
    agent: ServerProcess, platform: AgentosPlatform
) -> None:
    code = r"[a-z][a-z0-9_]{0,62}"
    unknown = invoke(agent, platform, platform.invoke_body("r_cap", "SAY x", capability="nope"))
    assert unknown["status"] == "failed" and unknown["error"]["code"] == "unknown_capability"
    unreachable = platform.invoke_body("r_down", "SAY x", llm_base_url="http://127.0.0.1:9/v1")
    down = invoke(agent, platform, unreachable)
    assert down["status"] == "failed", down
    assert re.fullmatch(code, down["error"]["code"]), down
    assert down["error"]["message"]
    # A resume of a run that never started starts nothing: the contract's failed answer.
    sessions_before = len(agent_sessions(agent))
    never = platform.invoke_body("r_never_started", "SAY x", seq=2, resume={"answer": "yes"})
    stray = invoke(agent, platform, never)
    assert stray["status"] == "failed" and stray["error"]["code"] == "unknown_run", stray
    assert len(agent_sessions(agent)) == sessions_before
    for broken in (b"{", b"[]", json.dumps({"capability": "run"}).encode()):
        answer = httpx.post(f"{agent.url}/invoke", content=broken)
        assert answer.status_code == 200 and answer.json()["status"] == "failed"


@passes.same_on_every_base
def test_no_token_or_secret_is_stored_or_logged(
    agent: ServerProcess, platform: AgentosPlatform
) -> None:
    body = platform.invoke_body("r_secret", "SAY quiet")
    token = body["context"]["token"]
    completed_output(invoke(agent, platform, body))
    written = everything_written(agent.data_dir)
    written += agent.log().encode()
    for secret in (token.encode(), b"crm-secret-5b1e"):
        assert secret not in written
