"""The `acp` base's configuration (`uhpserver_baseConfig`), in process: what a harness may
name, what is refused and how, secrets never given back, and the turn it makes (argv,
environment, prompt) without an agent running. End to end with real agents:
tests/test_acp_e2e.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from harness_bases import events as ev
from harness_bases.acp_generic import AcpGenericBase
from harness_bases.acp_generic.base import prompt_with_preface
from harness_bases.acp_generic.parser import GenericAcpParser
from harness_bases.base import McpServerSpec, SandboxPaths, TurnSpec
from harness_bases.codex import CodexBase
from storage.harnesses import get_harness
from tests.support.acp_agents import AGENTS
from tests.support.app_context import app_context
from tests.support.harness_api import AUTH, KEY, create, other_principal, principal_id, refused
from tests.support.schema import validate
from uhp_server.app import create_app
from uhp_server.harnesses.base_config import resolve_secrets, wire_backends
from uhp_server.settings import Settings

FIELD = "uhpserver_baseConfig"
AGENT: dict[str, Any] = {
    "command": ["my-agent", "--acp", "--model", "${UHP_MODEL}"],
    "env": {"MY_AGENT_API_KEY": "sk-agent-secret-1", "MY_AGENT_MODE": "quiet"},
    "model_access": {
        "wire": "anthropic",
        "base_url_env": "ANTHROPIC_BASE_URL",
        "token_env": "ANTHROPIC_AUTH_TOKEN",
    },
}


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path / "data", api_key=KEY)
    app = create_app(settings, bases={"codex": CodexBase(), "acp": AcpGenericBase()})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def acp_harness(http: TestClient, agent: dict[str, Any] | None = None) -> dict[str, Any]:
    return create(http, {"name": "mine", "base": "acp", FIELD: agent or AGENT})


def test_a_harness_names_its_agent_and_gets_it_back_without_its_secrets(
    http: TestClient,
) -> None:
    harness = acp_harness(http)
    validate("Harness", harness)
    assert (harness["base"], harness["baseLabel"]) == ("acp", "ACP agent")
    assert harness["enforcement"]["disabledTools"] == "instruction"
    config = harness[FIELD]
    assert config["command"] == AGENT["command"]
    assert config["model_access"] == AGENT["model_access"]
    assert config["env"]["MY_AGENT_MODE"] == "quiet"  # not a credential: shown
    assert config["env"]["MY_AGENT_API_KEY"].startswith("uhp-secret:")
    assert "sk-agent-secret-1" not in json.dumps(harness)
    url = f"/v1/harnesses/{harness['id']}"
    assert http.get(url, headers=AUTH).json()[FIELD] == config

    # GET → PUT keeps the reference; the turn still gets the value.
    again = http.put(url, json={**harness, "name": "renamed"}, headers=AUTH)
    assert again.status_code == 200, again.text
    assert again.json()[FIELD] == config
    db = app_context(http).db
    row = db.run(get_harness, principal_id(http), harness["id"])
    assert row is not None
    resolved, secrets = db.run(resolve_secrets, row.principal_id, row.config[FIELD])
    assert resolved["env"]["MY_AGENT_API_KEY"] == "sk-agent-secret-1"
    assert secrets == ["sk-agent-secret-1"]


def test_a_reference_is_good_only_for_its_principal_and_never_for_an_mcp_credential(
    http: TestClient,
) -> None:
    mine = acp_harness(http)
    reference = mine[FIELD]["env"]["MY_AGENT_API_KEY"]
    body = {"base": "acp", FIELD: {**AGENT, "env": {"MY_AGENT_API_KEY": reference}}}
    theirs = http.post("/v1/harnesses", json=body, headers=other_principal(http))
    refused(theirs, f"{FIELD}.env.MY_AGENT_API_KEY")
    mcp = create(
        http,
        {
            "base": "codex",
            "mcp_servers": [{"name": "v", "url": "https://mcp.example.com/", "auth": "tok-9"}],
        },
    )
    moved = {**AGENT, "env": {"MY_AGENT_API_KEY": mcp["mcpServers"][0]["auth"]}}
    response = http.post("/v1/harnesses", json={"base": "acp", FIELD: moved}, headers=AUTH)
    refused(response, f"{FIELD}.env.MY_AGENT_API_KEY")


def _with(**changes: Any) -> dict[str, Any]:
    return {**AGENT, **changes}


def _access(**changes: Any) -> dict[str, Any]:
    return _with(model_access={**AGENT["model_access"], **changes})


@pytest.mark.parametrize(
    ("config", "param", "said"),
    [
        ("claude-code-acp", "", "Must be an object"),
        ({"model_access": AGENT["model_access"]}, "command", "Required"),
        (_with(command=[]), "command", "Required"),
        (_with(command="my-agent --acp"), "command", "array"),
        (_with(command=["../bin/agent"]), "command[0]", "bare name"),
        (_with(command=["my agent"]), "command[0]", "bare name"),
        (_with(command=["/opt/../etc/agent"]), "command[0]", ". or .."),
        (_with(command=["my-agent", "line\nbreak"]), "command[1]", "control characters"),
        (_with(command=["my-agent", "${UHP_TOKEN}"]), "command[1]", "Unknown placeholder"),
        (_with(command=["my-agent", 3]), "command[1]", "string"),
        (_access(wire="smoke-signals"), "model_access.wire", "Unknown wire 'smoke-signals'"),
        (_with(model_access=None), "model_access", "Required"),
        (_access(token_env=None), "model_access.token_env", "Required"),
        (_access(token_env="ANTHROPIC_BASE_URL"), "model_access", "different"),
        (_access(token_env="UHP_TOKEN"), "model_access.token_env", "reserved"),
        (_access(region="eu"), "model_access.region", "Unknown field"),
        (_with(env={"PATH": "/tmp"}), "env.PATH", "reserved"),
        (_with(env={"UHP_GATEWAY_TOKEN": "x"}), "env.UHP_GATEWAY_TOKEN", "reserved"),
        (_with(env={"1BAD": "x"}), "env.1BAD", "name"),
        (_with(env={"ANTHROPIC_AUTH_TOKEN": "x"}), "env.ANTHROPIC_AUTH_TOKEN", "model_access"),
        (_with(env={"A": 1}), "env.A", "string"),
        (_with(env=["A=1"]), "env", "object"),
        (_with(conversation_paths=["../elsewhere"]), "conversation_paths[0]", "relative"),
        (_with(argv=["x"]), "argv", "Unknown field"),
    ],
)
def test_a_wrong_field_is_refused_by_name(
    http: TestClient, config: Any, param: str, said: str
) -> None:
    response = http.post("/v1/harnesses", json={"base": "acp", FIELD: config}, headers=AUTH)
    error = refused(response, f"{FIELD}.{param}" if param else FIELD)
    assert said in error["message"]
    assert "sk-agent-secret-1" not in response.text


def test_an_unknown_wire_lists_the_ones_there_are(http: TestClient) -> None:
    response = http.post(
        "/v1/harnesses", json={"base": "acp", FIELD: _access(wire="x")}, headers=AUTH
    )
    message = refused(response, f"{FIELD}.model_access.wire")["message"]
    assert all(wire in message for wire in ("responses", "chat", "anthropic", "gemini"))


def test_a_base_that_takes_no_configuration_refuses_one(http: TestClient) -> None:
    response = http.post("/v1/harnesses", json={"base": "codex", FIELD: AGENT}, headers=AUTH)
    assert "takes no configuration" in refused(response, FIELD)["message"]


def test_a_task_on_an_acp_harness_without_an_agent_is_refused_with_the_reason(
    http: TestClient,
) -> None:
    harness = create(http, {"name": "empty", "base": "acp"})
    assert FIELD not in harness
    response = http.post(
        "/v1/responses",
        json={"input": "SAY hi", "metadata": {"harness_id": harness["id"]}},
        headers=AUTH,
    )
    error = refused(response, f"{FIELD}.command", 422, "uhpserver_harness_not_runnable")
    assert "names no agent" in error["message"]


def test_the_test_agents_configurations_are_valid(http: TestClient) -> None:
    for name, agent in AGENTS.items():
        harness = acp_harness(http, agent)
        assert harness[FIELD]["command"] == agent["command"], name


# -- the turn a harness's agent makes ------------------------------------------------------


def _spec(tmp_path: Path, **kw: Any) -> TurnSpec:
    (tmp_path / "home").mkdir(exist_ok=True)
    return TurnSpec(
        prompt="SAY hi",
        model="claude-test",
        gateway_url="http://127.0.0.1:8080/gateway/anthropic",
        gateway_token="turn-token-1",
        host_workspace=tmp_path,
        host_home=tmp_path / "home",
        host_tools=tmp_path,
        paths=SandboxPaths(),
        **kw,
    )


def test_the_agent_starts_with_the_gateway_its_token_and_its_own_environment_only(
    tmp_path: Path,
) -> None:
    stored = {**AGENT, "env": {"MY_AGENT_API_KEY": "sk-agent-secret-1", "WHERE": "${UHP_HOME}/x"}}
    stored["model_access"] = {**AGENT["model_access"], "model_env": "ANTHROPIC_MODEL"}
    base = AcpGenericBase().for_harness(stored, wire_backends())
    assert (base.wire, base.backend) == ("anthropic", "anthropic")
    assert AcpGenericBase.wire == "chat"  # the registered base is left as it was
    invocation = base.prepare(_spec(tmp_path))
    assert invocation.argv == ["my-agent", "--acp", "--model", "claude-test"]
    assert invocation.cwd == "/workspace"
    env = invocation.env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080/gateway/anthropic"
    assert env["ANTHROPIC_AUTH_TOKEN"] == "turn-token-1"
    assert env["ANTHROPIC_MODEL"] == "claude-test"
    assert env["MY_AGENT_API_KEY"] == "sk-agent-secret-1"
    assert env["WHERE"] == "/home/agent/x"
    assert env["HOME"] == "/home/agent"
    assert env["PATH"].startswith("/opt/uhp-tools/acp-agents/bin:/opt/uhp-tools/node/")
    assert set(env) == {
        "PATH",
        "HOME",
        "LANG",
        "TERM",
        "MY_AGENT_API_KEY",
        "WHERE",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
    }
    assert "turn-token-1" not in " ".join(invocation.argv)


def test_what_acp_has_no_field_for_goes_before_the_prompt(tmp_path: Path) -> None:
    spec = _spec(tmp_path, system_prompt="Answer in French.", disabled_tools=("WebFetch",))
    prompt = prompt_with_preface(spec)
    assert prompt.endswith("\n\nSAY hi")
    assert "Answer in French." in prompt and "WebFetch" in prompt
    assert prompt_with_preface(_spec(tmp_path)) == "SAY hi"


def test_mcp_servers_the_agent_cannot_take_are_left_out_with_a_notice(tmp_path: Path) -> None:
    base = AcpGenericBase().for_harness(AGENT, wire_backends())
    server = McpServerSpec("vault", "http://127.0.0.1:8080/gateway/mcp/vault", "turn-token-1")
    spec = _spec(tmp_path, mcp_servers=(server,))
    offered, notices = base.offered_mcp_servers(spec, {"mcpCapabilities": {"http": True}})
    assert [s["name"] for s in offered] == ["vault"] and notices == []
    offered, notices = base.offered_mcp_servers(spec, {})
    assert offered == []
    assert notices == [
        ev.Notice(
            "MCP server 'vault' is left out: this agent does not take MCP servers over HTTP "
            "through ACP."
        )
    ]


def test_the_registered_base_runs_no_agent_until_a_harness_names_one() -> None:
    from harness_bases.base import BaseConfigError

    with pytest.raises(BaseConfigError) as raised:
        AcpGenericBase().for_harness(None, wire_backends())
    assert raised.value.param == "command"


def test_a_command_s_output_is_taken_from_where_the_agent_puts_it() -> None:
    # codex-acp reports an exec as Codex's own event (no `output`, no content): its output,
    # and its exit code, rather than the event as JSON.
    parser = GenericAcpParser()
    ran = {"call_id": "c1", "aggregated_output": "door-check-output\n", "exit_code": 0}
    update = {"rawOutput": {**ran, "stdout": "door-check-output\n"}, "status": "completed"}
    assert parser.tool_result(update) == ("door-check-output\n", True)
    streamed = {**ran, "aggregated_output": "", "formatted_output": "PATH=/usr/bin\n"}
    assert parser.tool_result({"rawOutput": streamed, "status": "completed"}) == (
        "PATH=/usr/bin\n",
        True,
    )
    failed = {"rawOutput": {**ran, "exit_code": 2}, "status": "completed"}
    assert parser.tool_result(failed) == ("door-check-output\n", False)
    # An agent giving `output` itself, or nothing known, is read as every ACP agent is.
    said = {"rawOutput": {"output": "plain", "stdout": "x"}, "status": "completed"}
    assert parser.tool_result(said) == ("plain", True)
    other = {"rawOutput": {"answer": 42}, "status": "completed"}
    assert parser.tool_result(other) == ('{"answer": 42}', True)


def test_a_command_s_arguments_leave_out_what_says_which_run_it_was() -> None:
    # codex-acp's raw input is Codex's exec event: the same call differs run to run only there.
    parser = GenericAcpParser()
    event = {"call_id": "call_s0", "process_id": "66861", "turn_id": "01a2", "cwd": "/workspace"}
    raw = {**event, "started_at_ms": 1, "command": ["/bin/sh", "-lc", "echo hi"], "source": "x"}
    assert parser.tool_input(raw) == {"command": ["/bin/sh", "-lc", "echo hi"], "cwd": "/workspace"}
    assert parser.tool_input({"call_id": "kept", "path": "a.txt"}) == {
        "call_id": "kept",
        "path": "a.txt",
    }
