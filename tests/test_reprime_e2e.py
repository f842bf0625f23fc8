"""Re-priming end to end (Memories §9.1, "at session start and after the conversation is
compacted"): a real server with the chapter served, Claude Code (whose CLI honours `/compact`
on its stream-json input and reports the compaction) in the sandbox under test, the scripted
model provider. The turn after the compaction places a block read afresh from the memory
and says what it cost; the turns before and after it carry the block they were given.

Codex reports its compaction too (tests/test_reprime_live.py), but compacts on its own only
past a share of its context window no scripted turn fills; the engine's part is the same for
every base (tests/test_reprime_fast.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, installed_tools, server_env
from tests.scripted_provider import RunningProvider
from tests.support import passes
from tests.support.server import ServerProcess
from tests.test_tasks_e2e import create

pytestmark = [pytest.mark.slow, passes.same_on_every_base]

FIRST = "Ship on Tuesdays."
LATER = "Freeze the release branch on Mondays."


@pytest.fixture
def client(tmp_path: Path, provider: RunningProvider) -> Iterator[httpx.Client]:
    installed_tools("claude-code")
    env = server_env(provider, UHP_MEMORIES="preview", UHP_BASES="claude-code")
    server = ServerProcess(tmp_path, env).start()
    try:
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=180
        ) as http:
            yield http
    finally:
        server.stop()


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return dict(response.json())


def _prime(client: httpx.Client, memory_id: str, content: str) -> None:
    body = {"content": content, "attributes": {"prime": True}}
    _ok(client.post(f"/v1/memories/{memory_id}/records", json=body))


def _turn(client: httpx.Client, text: str, harness: str, previous: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"input": text, "metadata": {"harness_id": harness}}
    if previous is not None:
        body["previous_response_id"] = previous
    response = create(client, body)
    assert response["status"] == "completed", response
    return response


def _tokens(response: dict[str, Any]) -> dict[str, int] | None:
    said = response["metadata"].get("memory_priming_tokens")
    return json.loads(said) if said is not None else None


def _last_system(provider: RunningProvider) -> str:
    """The system prompt of the last model call Claude Code made."""
    calls = [r["body"] for r in provider.requests() if r["path"] == "/v1/messages"]
    return json.dumps(calls[-1].get("system"))


def test_the_turn_after_claude_code_compacts_is_primed_afresh(
    client: httpx.Client, provider: RunningProvider
) -> None:
    harness = _ok(client.post("/v1/harnesses", json={"base": "claude-code", "name": "A"}))["id"]
    notes = _ok(client.post("/v1/memories", json={"name": "Notes"}))["id"]
    grant = {"principal": f"member:{harness}", "privileges": ["read", "write"]}
    _ok(client.post(f"/v1/memories/{notes}/grants", json=grant))
    body = {"default_memory_id": notes, "observe": False}
    _ok(client.put(f"/v1/harnesses/{harness}/memories", json=body))
    _prime(client, notes, FIRST)

    first = _turn(client, "SAY one", harness, None)
    first_tokens = _tokens(first)
    assert first_tokens is not None and first_tokens[notes] > 0
    assert FIRST in _last_system(provider) and LATER not in _last_system(provider)

    _prime(client, notes, LATER)
    compacted = _turn(client, "/compact", harness, first["id"])
    assert _tokens(compacted) is None  # started with the session's block

    provider.reset()
    after = _turn(client, "SAY three", harness, compacted["id"])
    after_tokens = _tokens(after)
    assert after_tokens is not None and after_tokens[notes] > first_tokens[notes]
    assert FIRST in _last_system(provider) and LATER in _last_system(provider)

    _prime(client, notes, "Written after the re-priming.")
    later = _turn(client, "SAY four", harness, after["id"])
    assert _tokens(later) is None
    assert "Written after the re-priming." not in _last_system(provider)
    assert LATER in _last_system(provider)
