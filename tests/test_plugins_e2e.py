"""Plugins against a real server and the real CLI of the base under test (Plugins §6, issue
26 §3): an Agent Plugins 1.0.0 package installed on a harness gives the agent its stdio MCP
server (started inside the sandbox, `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` expanded), its
remote MCP server (through the gateway's MCP proxy) and its skill, in the form the base's CLI
takes them. A base that cannot take a plugin fails here: nothing is skipped for it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases.base import SandboxPaths
from tests.conftest import API_KEY, TEST_BASE, server_env
from tests.support import plugins
from tests.support.base_under_test import BASE
from tests.support.mcp_server import ANSWER_PREFIX as VAULT_PREFIX
from tests.support.mcp_server import RunningMcpServer
from tests.support.server import ServerProcess
from tests.support.stdio_mcp_server import ANSWER_PREFIX as STAMP_PREFIX
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow

PLUGIN = "e2e-plugin"
SKILL = "e2e-manual"
DESCRIPTION = "How to read the codes of the e2e plugin; use it for any code question."
SKILL_BODY = "Every code is explained in references/codes.md.\n"
CODES = "Code 41 means: the plugin's skill was read. Ünïcödé kept.\n"
VAULT_HEADER = "plugin-header-e2e-5b2"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, provider: Any, base_installed: Path
) -> Iterator[ServerProcess]:
    # The plugin's remote MCP server listens on loopback: private addresses allowed here.
    env = server_env(provider, UHP_MCP_ALLOW_PRIVATE_HOSTS="true")
    running = ServerProcess(tmp_path_factory.mktemp("plugins-e2e"), env).start()
    yield running
    running.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=180) as http:
        yield http


@pytest.fixture
def vault() -> Iterator[RunningMcpServer]:
    running = RunningMcpServer().start()
    yield running
    running.stop()


def package(vault_url: str, stdio: bool = True, remote: bool = True) -> list[dict[str, Any]]:
    """The plugin: a stdio server shipped in the package, a remote one (each unless left out),
    and a skill with a reference file."""
    servers: dict[str, Any] = {}
    if stdio:
        servers["stamp"] = plugins.stdio_server(
            args=["--data", "${PLUGIN_DATA}/x"], env={"STAMP_ROOT": "${PLUGIN_ROOT}"}
        )
    if remote:
        servers["vault"] = {
            "type": "streamable-http",
            "url": vault_url,
            "headers": {"X-E2E": VAULT_HEADER},
        }
    return [
        plugins.text("plugin.json", plugins.manifest(PLUGIN, version="1.0.0")),
        *([plugins.text("mcp.json", plugins.mcp_config(**servers))] if servers else []),
        plugins.text(f"skills/{SKILL}/SKILL.md", plugins.skill_md(SKILL, DESCRIPTION, SKILL_BODY)),
        plugins.text(f"skills/{SKILL}/references/codes.md", CODES),
        *(plugins.stamp_files() if stdio else ()),
    ]


def refused_for_the_base(
    client: httpx.Client, files: list[dict[str, Any]], server: str, transport: str
) -> None:
    """A plugin whose MCP server the base cannot run is refused when it is configured, naming
    the server (Plugins §6), never dropped in the dark at run time."""
    answer = client.post("/v1/harnesses", json=BASE.harness(plugins=[{"files": files}]))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "unsupported_transport", error
    assert (error["detail"]["server"], error["detail"]["transport"]) == (server, transport)


def resting_package() -> list[dict[str, Any]]:
    """A disabled plugin: installed, and nothing of it reaches the agent."""
    return plugins.package("resting-plugin", skills=("resting-skill",))


def bodies_text(provider: Any) -> str:
    return json.dumps([r.get("body") for r in provider.requests()], ensure_ascii=False)


def skill_dir(told: str, host_home: Path) -> str:
    """Where the agent finds the plugin's skill, as the sandbox sees it: the folder of the
    SKILL.md path the base put in front of the model (its instructions or skill listing);
    for a CLI that loads skills by name (a skill tool) and so names no path, the folder the
    base wrote into the agent home for its CLI (the package's own copy, under `.uhp/`, last)."""
    announced = re.findall(r"(/[^\s\"'<>()\\]*/" + SKILL + r")/SKILL\.md", told)
    if announced:
        return sorted(announced)[0]
    written = sorted(
        (
            folder.relative_to(host_home).as_posix()
            for folder in host_home.rglob(SKILL)
            if (folder / "SKILL.md").is_file()
        ),
        key=lambda relative: (relative.startswith(".uhp/"), relative),
    )
    assert written, f"skill {SKILL!r} is nowhere in the agent home"
    return f"{SandboxPaths().home}/{written[0]}"


def call_outputs(response: dict[str, Any]) -> dict[str, str]:
    """Each tool call's name, with the output that came back to it."""
    outputs = {
        item["call_id"]: item["output"]
        for item in response["output"]
        if item["type"] == "function_call_output"
    }
    return {
        item["name"]: str(outputs.get(item["call_id"], ""))
        for item in response["output"]
        if item["type"] == "function_call"
    }


def tool_text(output: str) -> str:
    """An MCP tool's text as a base reports it: plain, or inside the JSON some CLIs wrap it
    in (`{"result": …}`, a list of content parts, `{"content": [...]}`)."""
    try:
        value = json.loads(output)
    except ValueError:
        return output
    if isinstance(value, dict) and isinstance(value.get("result"), str):
        return value["result"]
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        value = value["content"]
    if isinstance(value, list):
        return "\n".join(p.get("text", "") for p in value if isinstance(p, dict))
    return output


def stamp_facts(output: str) -> dict[str, Any]:
    """What the stamp server said about the process it ran as (tests/support/stdio_mcp_server)."""
    text = tool_text(output)
    start = text.index(f"{STAMP_PREFIX}plug-e2e ") + len(f"{STAMP_PREFIX}plug-e2e ")
    facts, _ = json.JSONDecoder().raw_decode(text[start:])
    assert isinstance(facts, dict)
    return facts


def named(calls: dict[str, str], tool: str) -> str:
    """The output of the one call of `tool`, whatever the base's prefix for its server."""
    (name,) = [n for n in calls if n.endswith(tool)]
    return calls[name]


def test_the_agent_calls_a_plugin_s_mcp_tools_and_reads_its_skill(
    client: httpx.Client, server: ServerProcess, provider: Any, vault: RunningMcpServer
) -> None:
    # What the base runs of the plugin, as it declares: a plugin's stdio server, its remote
    # (HTTP) one; what it cannot run is refused, and the rest of the plugin works without it.
    stdio, remote = BASE.starts_stdio_servers, BASE.speaks_mcp
    if not stdio:
        refused_for_the_base(client, package(vault.url), "stamp", "stdio")
    if not remote:
        refused_for_the_base(client, package(vault.url, stdio=False), "vault", "http")
    runs = package(vault.url, stdio=stdio, remote=remote)
    body = BASE.harness(plugins=[{"files": runs}, {"files": resting_package(), "enabled": False}])
    answer = client.post("/v1/harnesses", json=body)
    assert answer.status_code == 200, f"{TEST_BASE} cannot take the plugin: {answer.text}"
    harness = answer.json()
    assert [p["enabled"] for p in harness["plugins"]] == [True, False]
    metadata = {"harness_id": harness["id"]}

    # The agent is told of the plugin's skill, and not of the disabled plugin's.
    provider.reset()
    first = create(client, {"input": "SAY ready", "metadata": metadata})
    assert first["status"] == "completed", first
    told = bodies_text(provider)
    assert SKILL in told and DESCRIPTION in told
    assert "resting-skill" not in told
    folder = skill_dir(
        told, server.data_dir / "sessions" / first["metadata"]["session_id"] / "home"
    )

    # One turn: the plugin's stdio tool, its remote tool (those the base runs), and its
    # skill's files read where the agent finds them.
    tools = [
        *(['TOOL mcp__stamp__stamp {"word": "plug-e2e"}'] if stdio else []),
        *(['TOOL mcp__vault__lookup {"code": "plug-7"}'] if remote else []),
    ]
    reading = f"RUN cat {folder}/SKILL.md {folder}/references/codes.md"
    prompt = "\n".join([*tools, reading, "SAY {outputs}"])
    second = create(
        client, {"input": prompt, "metadata": metadata, "previous_response_id": first["id"]}
    )
    assert second["status"] == "completed", second
    calls = call_outputs(second)
    assert len(calls) == len(tools) + 1, calls
    text = message_text(second)
    # The skill's files were read, byte for byte as the package holds them.
    assert SKILL_BODY.strip() in text and CODES.strip() in text
    if remote:
        # The remote server answered through the gateway's proxy, with the plugin's header.
        assert VAULT_PREFIX + "plug-7" in tool_text(named(calls, "lookup"))
        assert VAULT_PREFIX + "plug-7" in text
        posted = [r for r in vault.requests if r.method == "POST"]
        assert posted and all(r.headers.get("x-e2e") == VAULT_HEADER for r in posted)
    if stdio:
        stdio_server_ran_as_the_plugin(client, second, metadata)


def stdio_server_ran_as_the_plugin(
    client: httpx.Client, second: dict[str, Any], metadata: dict[str, str]
) -> None:
    """The stdio server ran inside the sandbox as the plugin's process: the real answer, its
    PLUGIN_ROOT and PLUGIN_DATA set and expanded into its arguments, none of the CLI's
    credentials in its environment; and its data outlives the turn."""
    calls = call_outputs(second)
    facts = stamp_facts(named(calls, "stamp"))
    home = SandboxPaths().home
    assert facts["root"] == f"{home}/.uhp/plugins/{PLUGIN}"
    assert facts["data"] == f"{home}/.uhp/plugin-data/{PLUGIN}"
    assert facts["argv"] == ["--data", f"{facts['data']}/x"]
    assert facts["cwd"] == facts["root"]
    assert facts["count"] == 1
    assert "STAMP_ROOT" in facts["env"]
    assert not [name for name in facts["env"] if name.startswith(("UHP_", "OPENAI", "ANTHROPIC"))]
    assert f"{STAMP_PREFIX}plug-e2e" in message_text(second)

    # PLUGIN_DATA lives as long as the session: the next turn's server counts on.
    third = create(
        client,
        {
            "input": 'TOOL mcp__stamp__stamp {"word": "plug-e2e"}\nSAY {result}',
            "metadata": metadata,
            "previous_response_id": second["id"],
        },
    )
    assert third["status"] == "completed", third
    assert stamp_facts(named(call_outputs(third), "stamp"))["count"] == 2
