"""Harness management against a real server and the real CLI of the base under test: skills
reach the agent whole, MCP tools are called through the gateway's proxy on a real MCP server
(the `mcp` package), and a deleted harness leaves its history readable."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases.base import SandboxPaths
from tests.conftest import API_KEY, TEST_BASE, server_env
from tests.support.mcp_server import ANSWER_PREFIX, RunningMcpServer
from tests.support.server import ServerProcess, free_port
from tests.support.written import files_written
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow

MCP_SECRET = "real-mcp-secret-e2e-93f1"
SKILL_MD = (
    "---\nname: vault-manual\ndescription: How to read codes from the vault; use it for any "
    "vault question.\n---\nCodes are explained in references/codes.md.\n"
)
CODES = "Code 7 means: the vault is sealed. Ünïcödé kept.\n"
LOGO = os.urandom(2048) + b"\x00\xff\xfe"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, provider: Any, base_installed: Path
) -> Iterator[ServerProcess]:
    # The test's MCP servers listen on loopback: private addresses must be allowed here.
    env = server_env(provider, UHP_MCP_ALLOW_PRIVATE_HOSTS="true")
    running = ServerProcess(tmp_path_factory.mktemp("harness-mgmt"), env).start()
    yield running
    running.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as http:
        yield http


@pytest.fixture
def mcp_servers() -> Iterator[tuple[RunningMcpServer, RunningMcpServer]]:
    enabled, disabled = RunningMcpServer().start(), RunningMcpServer().start()
    yield enabled, disabled
    enabled.stop()
    disabled.stop()


def new_harness(client: httpx.Client, **config: Any) -> dict[str, Any]:
    response = client.post("/v1/harnesses", json={"base": TEST_BASE, **config})
    assert response.status_code == 200, response.text
    return response.json()


def run(client: httpx.Client, harness: dict[str, Any], prompt: str, **extra: Any) -> dict:
    return create(client, {"input": prompt, "metadata": {"harness_id": harness["id"]}, **extra})


def session_dir(server: ServerProcess, response: dict[str, Any]) -> Path:
    return server.data_dir / "sessions" / response["metadata"]["session_id"]


def bodies_text(provider: Any) -> str:
    return json.dumps([r.get("body") for r in provider.requests()])


def test_a_cli_calls_a_tool_on_a_real_mcp_server_through_the_gateway(
    client: httpx.Client, server: ServerProcess, mcp_servers: Any
) -> None:
    vault, off = mcp_servers
    harness = new_harness(
        client,
        mcp_servers=[
            {"name": "vault", "url": vault.url, "auth": MCP_SECRET},
            {"name": "off", "url": off.url, "enabled": False},
        ],
    )
    response = run(client, harness, 'TOOL mcp__vault__lookup {"code": "e2e-7"}\nSAY got {output}')
    assert response["status"] == "completed", response
    assert ANSWER_PREFIX + "e2e-7" in message_text(response)
    calls = [item for item in response["output"] if item["type"] == "function_call"]
    assert len(calls) == 1  # named by each base its own way (Codex: `vault.lookup`)
    assert "vault" in calls[0]["name"] and "lookup" in calls[0]["name"]
    assert json.loads(calls[0]["arguments"]) == {"code": "e2e-7"}
    reached = vault.requests
    assert any(r.method == "POST" for r in reached)
    assert all(r.headers.get("authorization") == f"Bearer {MCP_SECRET}" for r in reached)
    assert off.requests == []  # disabled: never contacted, not even probed
    # Neither the MCP server's credential nor its address was written where the agent works.
    for path, data in files_written(session_dir(server, response)):
        assert MCP_SECRET.encode() not in data, path
        assert f":{vault.port}/".encode() not in data, path


def test_an_unreachable_mcp_server_is_a_visible_notice_not_a_failure(
    client: httpx.Client,
) -> None:
    ghost = f"http://127.0.0.1:{free_port()}/mcp"
    harness = new_harness(client, mcp_servers=[{"name": "ghost", "url": ghost}])
    response = run(client, harness, "SAY still working")
    assert response["status"] == "completed"
    text = message_text(response)
    assert "MCP server 'ghost' could not be reached; this turn runs without its tools." in text
    assert "still working" in text
    assert "127.0.0.1" not in text


def test_skill_folders_reach_the_agent_whole(
    client: httpx.Client, server: ServerProcess, provider: Any
) -> None:
    files = [
        {"path": "SKILL.md", "content": SKILL_MD},
        {"path": "references/codes.md", "content": CODES},
        {"path": "assets/logo.bin", "content_b64": base64.b64encode(LOGO).decode()},
    ]
    harness = new_harness(
        client,
        skills=[
            {"name": "vault-manual", "files": files},
            {"name": "workspace-hygiene", "enabled": False},
        ],
    )
    provider.reset()
    first = run(client, harness, "SAY ready")
    assert first["status"] == "completed"
    told = bodies_text(provider)
    # The agent is told of each enabled skill; the suppressed built-in is not there.
    assert "vault-manual" in told and "uhp-artifacts" in told
    assert "workspace-hygiene" not in told
    if TEST_BASE == "codex":  # Codex's developer instructions name every folder
        assert f"{SandboxPaths().home}/.codex/skills/vault-manual/SKILL.md" in told

    # The whole folder is on disk in the session's home, byte for byte.
    home = session_dir(server, first) / "home"
    found = [p.parent for p in home.rglob("SKILL.md") if p.parent.name == "vault-manual"]
    assert len(found) == 1
    on_disk = {
        p.relative_to(found[0]).as_posix(): p.read_bytes()
        for p in found[0].rglob("*")
        if p.is_file()
    }
    assert on_disk == {
        "SKILL.md": SKILL_MD.encode(),
        "references/codes.md": CODES.encode(),
        "assets/logo.bin": LOGO,
    }
    folder = f"{SandboxPaths().home}/{found[0].relative_to(home).as_posix()}"

    # And the agent can read it there.
    second = run(
        client,
        harness,
        f"RUN cat {folder}/references/codes.md\nSAY {{output}}",
        previous_response_id=first["id"],
    )
    assert CODES.strip() in message_text(second)
    third = run(
        client,
        harness,
        f"RUN sha256sum {folder}/assets/logo.bin\nSAY {{output}}",
        previous_response_id=second["id"],
    )
    assert hashlib.sha256(LOGO).hexdigest() in message_text(third)


def test_a_deleted_harness_keeps_its_sessions_readable(client: httpx.Client) -> None:
    harness = new_harness(client, name="short-lived")
    done = run(client, harness, "SAY remember me")
    assert client.delete(f"/v1/harnesses/{harness['id']}").json()["deleted"] is True
    assert client.get(f"/v1/harnesses/{harness['id']}").status_code == 404
    again = client.get(f"/v1/responses/{done['id']}")
    assert again.status_code == 200
    assert message_text(again.json()) == message_text(done) == "remember me"
    assert client.get(f"/v1/responses/{done['id']}/input_items").status_code == 200
    continued = client.post(
        "/v1/responses", json={"input": "SAY more", "previous_response_id": done["id"]}
    )
    assert continued.status_code == 404
    assert continued.json()["error"]["code"] == "harness_not_found"
