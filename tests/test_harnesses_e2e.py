"""Harness and model discovery against a running server: `available` is computed from what
the upstream really serves, never asserted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases import registry
from harness_bases.plugin_launcher import KEPT
from tests.conftest import (
    DEFAULT_MODEL,
    MODELS,
    TEST_BASE,
    TEST_PROVIDER,
    provider_under_test,
    server_env,
)
from tests.support import passes
from tests.support.base_under_test import BASE
from tests.support.plugins import package, stamp_files, stdio_server
from tests.support.schema import validate
from tests.support.server import ServerProcess, free_port
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow


@passes.same_on_every_base
def test_every_principal_sees_a_default_harness_per_base(
    client: httpx.Client, server: ServerProcess
) -> None:
    listing = client.get("/v1/harnesses").json()
    harnesses = listing["harnesses"]
    # Other tests may have created harnesses for this principal; its default is among them.
    assert TEST_BASE in {h["base"] for h in harnesses}
    enforcement = registry()[TEST_BASE].enforcement
    for harness in harnesses:
        validate("Harness", harness)
        assert harness["enforcement"] == {
            "disabledTools": enforcement.disabled_tools,
            "maxStep": enforcement.max_step,
            "timeoutSeconds": enforcement.timeout,
        }
        assert client.get(f"/v1/harnesses/{harness['id']}").json() == harness
    fresh = server.create_key(f"fresh-{time.time_ns()}")
    theirs = httpx.get(
        f"{server.url}/v1/harnesses", headers={"Authorization": f"Bearer {fresh}"}
    ).json()["harnesses"]
    assert [h["base"] for h in theirs] == [TEST_BASE]
    assert theirs[0]["id"] != harnesses[0]["id"]


def test_models_are_what_the_upstream_lists(client: httpx.Client) -> None:
    catalog = client.get("/v1/models").json()
    backend = catalog["backends"][provider_under_test()]
    assert backend["default"] == DEFAULT_MODEL
    listed = {m["id"]: m for m in backend["models"]}
    assert set(listed) == set(MODELS)
    for model in listed.values():
        validate("Model", model)
        assert model["available"] is True
    assert listed[DEFAULT_MODEL]["default"] is True
    harness = client.get("/v1/harnesses").json()["harnesses"][0]
    models = client.get(f"/v1/harnesses/{harness['id']}/models").json()
    assert models["harness_id"] == harness["id"]
    assert models["default"] == models["fallback"] == DEFAULT_MODEL
    # Every provider's models; a model another provider also serves is listed qualified.
    available = {m["id"] for m in models["models"] if m["available"]}
    assert {m for m in available if "/" not in m} == set(listed)
    assert all(m.split("/")[0] in catalog["backends"] for m in available if "/" in m)


def test_an_unreachable_upstream_makes_models_unavailable_and_tasks_refused(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    env = server_env(provider, OPENAI_BASE_URL=f"{dead}/v1", ANTHROPIC_BASE_URL=dead)
    server = ServerProcess(tmp_path, env).start()
    try:
        headers = {"Authorization": f"Bearer {env['UHP_API_KEY']}"}
        catalog = httpx.get(f"{server.url}/v1/models", headers=headers).json()
        backend = provider_under_test()
        models = catalog["backends"][backend]["models"]
        # Every model the provider is configured with — its default, and its static list when
        # it has one (the Chat-only provider) — is listed, and none is available.
        configured = MODELS if TEST_PROVIDER == "chat" else [DEFAULT_MODEL]
        assert models == [
            {
                "id": name,
                "label": name,
                "backend": backend,
                "available": False,
                "default": name == DEFAULT_MODEL,
            }
            for name in configured
        ]
        answer = httpx.post(f"{server.url}/v1/responses", headers=headers, json={"input": "SAY x"})
        assert answer.status_code == 422
        assert answer.json()["error"]["code"] == "model_unavailable"
    finally:
        server.stop()


@passes.same_on_every_base
def test_first_start_prints_a_key_once_and_it_works(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    env = server_env(provider)
    del env["UHP_API_KEY"]
    first = ServerProcess(tmp_path, env).start()
    try:
        log = first.log()
        keys = [word for word in log.split() if word.startswith("uhp_sk_")]
        assert len(keys) == 1
        answer = httpx.get(
            f"{first.url}/v1/harnesses", headers={"Authorization": f"Bearer {keys[0]}"}
        )
        assert answer.status_code == 200
    finally:
        first.stop()
    second = ServerProcess(tmp_path, env).start()
    try:
        assert "uhp_sk_" not in second.log().replace(log, "")
    finally:
        second.stop()


@passes.same_on_every_base
def test_sessions_expire_after_the_retention_setting(
    tmp_path: Path, provider: Any, base_installed: Path
) -> None:
    env = server_env(provider, UHP_SESSION_RETENTION_DAYS=str(2 / 86400))  # two seconds
    server = ServerProcess(tmp_path, env).start()
    try:
        with httpx.Client(
            base_url=server.url,
            timeout=60,
            headers={"Authorization": f"Bearer {env['UHP_API_KEY']}"},
        ) as client:
            first = create(client, {"input": "SAY soon gone"})
            time.sleep(3)
            answer = client.post(
                "/v1/responses", json={"input": "SAY x", "previous_response_id": first["id"]}
            )
            assert answer.status_code == 404
            assert answer.json()["error"]["code"] == "session_expired"
    finally:
        server.stop()


# The command's own logic: each base's installer is tested in its own file
# (tests/test_<base>_base.py, "installed version and install is idempotent").
@passes.same_on_every_base
def test_bases_install_is_idempotent_and_verifies_the_binary(base_installed: Path) -> None:
    env = {"UHP_TOOLS_DIR": str(base_installed), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    base = registry()[TEST_BASE]
    out = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", "bases", "install", TEST_BASE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert f"{TEST_BASE}: {base.cli_version}" in out.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", "bases", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    v = base.cli_version
    assert f"{TEST_BASE} pinned={v} installed={v}" in listed


def test_a_plugins_stdio_server_runs_in_the_sandbox_where_the_base_starts_one(
    client: httpx.Client,
) -> None:
    """A base that starts stdio MCP servers (`stdio_mcp`) runs a plugin's through the
    launcher, inside the sandbox, and the agent calls its tool; any other base refuses the
    plugin at configuration time rather than dropping its server at run time."""
    files = package(servers={"stamp": stdio_server(args=["--x"])}, extra=stamp_files())
    made = client.post("/v1/harnesses", json=BASE.harness(plugins=[{"files": files}]))
    if not BASE.starts_stdio_servers:
        assert made.status_code == 422, made.text
        assert made.json()["error"]["code"] == "unsupported_transport"
        return
    assert made.status_code == 200, made.text
    # The tool's full MCP name: Claude Code defers MCP tools behind its ToolSearch, and over a
    # Chat Completions provider a deferred tool is not listed, only callable by that name.
    directives = 'TOOL mcp__stamp__stamp {"word": "hello"}\nSAY {result}'
    done = create(client, {"input": directives, "metadata": {"harness_id": made.json()["id"]}})
    word, _, facts_text = message_text(done).partition(" {")
    assert done["status"] == "completed" and word == "stamped hello"
    facts = json.loads("{" + facts_text)
    assert facts["argv"] == ["--x"] and facts["count"] == 1
    assert facts["root"] == facts["cwd"] and facts["root"].endswith("/.uhp/plugins/demo-plugin")
    # What a plugin's process is owed, and nothing of the CLI's credentials.
    assert {"PLUGIN_ROOT", "PLUGIN_DATA"} <= set(facts["env"])
    assert set(facts["env"]) <= {*KEPT, "PLUGIN_ROOT", "PLUGIN_DATA"}
