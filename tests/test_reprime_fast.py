"""Re-priming (Memories §9.1, "at session start and after the conversation is compacted"), in
process on the fake base: a turn whose CLI reports a compaction leaves its session marked, and
the session's next turn places a priming block read afresh from the providers, says what it
cost, and keeps it for the turns after it. A session whose CLI never compacts keeps its first
block, whatever was written since ("priming is not repeated every turn")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases import events as ev
from storage import agent_memories as store
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import answer
from tests.support.in_process import InProcess, in_process

COMPACTING = "Compact now."  # the fake CLI compacts its conversation during this turn


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, memories="preview"
    ) as running:
        running.base.script(COMPACTING, [ev.ConversationCompacted(), *answer("compacted")])
        yield running


async def _agent_with_notes(server: InProcess) -> tuple[str, str]:
    """A harness whose agent reads and writes its default memory `Notes`, which holds one
    record marked for priming."""
    made = await server.client.post("/v1/harnesses", json={"base": "fake", "name": "Agent"})
    assert made.status_code == 200, made.text
    harness = str(made.json()["id"])
    created = await server.client.post("/v1/memories", json={"name": "Notes"})
    assert created.status_code == 200, created.text
    notes = str(created.json()["id"])
    grant = {"principal": f"member:{harness}", "privileges": ["read", "write"]}
    granted = await server.client.post(f"/v1/memories/{notes}/grants", json=grant)
    assert granted.status_code == 200, granted.text
    put = await server.client.put(
        f"/v1/harnesses/{harness}/memories", json={"default_memory_id": notes}
    )
    assert put.status_code == 200, put.text
    await _prime(server, notes, "Ship on Tuesdays.")
    return harness, notes


async def _prime(server: InProcess, memory_id: str, content: str) -> None:
    written = await server.client.post(
        f"/v1/memories/{memory_id}/records",
        json={"content": content, "attributes": {"prime": True}},
    )
    assert written.status_code == 200, written.text


async def _turn(
    server: InProcess, text: str, harness: str, previous: str | None, **more: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"harness_id": harness}, **more}
    if previous is not None:
        body["previous_response_id"] = previous
    answered: httpx.Response = await server.submit(text, **body)
    assert answered.status_code == 200, answered.text
    response = answered.json()
    assert response["status"] == "completed", response
    return dict(response)


def _tokens(response: dict[str, Any]) -> dict[str, int] | None:
    said = response["metadata"].get("memory_priming_tokens")
    return json.loads(said) if said is not None else None


async def test_the_turn_after_a_compaction_is_primed_afresh_and_keeps_it(
    server: InProcess,
) -> None:
    harness, notes = await _agent_with_notes(server)
    first = await _turn(server, "What ships when?", harness, None)
    placed = server.base.specs[-1].system_prompt
    assert "Ship on Tuesdays." in placed
    first_tokens = _tokens(first)
    assert first_tokens is not None and first_tokens[notes] > 0

    await _prime(server, notes, "Freeze the release branch on Mondays.")
    compacting = await _turn(server, COMPACTING, harness, first["id"])
    # The turn that compacts was started with the session's block: it is not re-primed itself.
    assert server.base.specs[-1].system_prompt == placed
    assert _tokens(compacting) is None
    session_id = first["metadata"]["session_id"]
    kept = server.ctx.db.run(store.session_memory, session_id)
    assert kept is not None and kept.reprime

    after = await _turn(server, "And now?", harness, compacting["id"])
    reprimed = server.base.specs[-1].system_prompt
    assert "Freeze the release branch on Mondays." in reprimed and "Ship on Tuesdays." in reprimed
    after_tokens = _tokens(after)
    assert after_tokens is not None and after_tokens[notes] > first_tokens[notes]
    kept = server.ctx.db.run(store.session_memory, session_id)
    assert kept is not None and not kept.reprime and kept.primer in reprimed

    # The turns after it carry the new block unchanged, and say nothing of its cost.
    await _prime(server, notes, "Written after the re-priming.")
    later = await _turn(server, "Later?", harness, after["id"])
    assert server.base.specs[-1].system_prompt == reprimed
    assert _tokens(later) is None and later["metadata"]["memory"] == notes


async def test_without_a_compaction_the_session_keeps_its_first_block(server: InProcess) -> None:
    harness, notes = await _agent_with_notes(server)
    first = await _turn(server, "What ships when?", harness, None)
    placed = server.base.specs[-1].system_prompt
    await _prime(server, notes, "Freeze the release branch on Mondays.")
    previous = first["id"]
    for text in ("Again?", "And again?"):
        turn = await _turn(server, text, harness, previous)
        assert server.base.specs[-1].system_prompt == placed
        assert "Freeze the release branch" not in placed and _tokens(turn) is None
        previous = turn["id"]


async def test_a_compaction_in_a_session_without_memories_changes_nothing(
    server: InProcess,
) -> None:
    made = await server.client.post("/v1/harnesses", json={"base": "fake", "name": "Plain"})
    harness = str(made.json()["id"])
    compacting = await _turn(server, COMPACTING, harness, None)
    session_id = compacting["metadata"]["session_id"]
    assert server.ctx.db.run(store.session_memory, session_id) is None
    after = await _turn(server, "And now?", harness, compacting["id"])
    assert "memory_priming_tokens" not in after["metadata"]
    assert [item["type"] for item in compacting["output"]] == ["message"]  # nothing shown


async def test_a_compaction_in_an_unkept_turn_is_undone_with_it(server: InProcess) -> None:
    """A `store: false` turn's conversation goes back to what it was when it ends, its
    compaction included: the session keeps its block."""
    harness, notes = await _agent_with_notes(server)
    first = await _turn(server, "What ships when?", harness, None)
    placed = server.base.specs[-1].system_prompt
    await _prime(server, notes, "Freeze the release branch on Mondays.")
    await _turn(server, COMPACTING, harness, first["id"], store=False)
    kept = server.ctx.db.run(store.session_memory, first["metadata"]["session_id"])
    assert kept is not None and not kept.reprime
    after = await _turn(server, "And now?", harness, first["id"])
    assert server.base.specs[-1].system_prompt == placed and _tokens(after) is None
