"""Submitting a task is one unit of work (engine/tasks/acceptance.py, storage/acceptance.py): a
failure halfway leaves nothing behind, and the database decides who wins a session or an
Idempotency-Key."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage import door_sessions
from storage import sessions as session_store
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fake_engine import CONNECTION, StandInEngine
from tests.support.fakes import Hang, TextDelta, answer
from tests.support.in_process import InProcess, in_process
from uhp_server.engine.requests import EngineTask, SessionKey
from uhp_server.engine.tasks import intake
from uhp_server.errors import ApiError
from uhp_server.ids import new_id


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


async def _first_turn(server: InProcess) -> dict:
    server.base.script("one", answer("first"))
    first = await server.submit("one")
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "completed"
    return first.json()


async def test_a_failure_halfway_through_submit_leaves_no_busy_session_and_no_key(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _first_turn(server)
    session_id = first["metadata"]["session_id"]

    # The response row fails in the database, after the session's claim (SQLite's statements
    # run in that order; PostgreSQL's one statement fails whole): its id is taken.
    def taken_response_id(prefix: str) -> str:
        return first["id"] if prefix == "response" else new_id(prefix)

    monkeypatch.setattr(intake, "new_id", taken_response_id)
    retry = {"headers": {"Idempotency-Key": "k-1"}, "previous_response_id": first["id"]}
    failed = await server.submit("two", **retry)
    assert failed.status_code == 500
    monkeypatch.undo()

    session = await server.client.get(f"/v1/sessions/{session_id}")
    assert session.status_code == 200
    assert session.json()["status"] != "in_progress"  # not left busy
    # The key points at nothing, so the retry runs the task now, in the same session.
    server.base.script("two", answer("second"))
    again = await server.submit("two", **retry)
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "completed"
    assert again.json()["metadata"]["session_id"] == session_id
    turns = (await server.client.get(f"/v1/sessions/{session_id}/turns")).json()["turns"]
    assert len(turns) == 2


async def test_two_submits_to_one_session_at_once_one_wins_the_other_is_busy(
    server: InProcess,
) -> None:
    first = await _first_turn(server)
    server.base.script("race", [TextDelta("m", "working"), Hang()])
    both = await asyncio.gather(
        *(
            server.submit("race", previous_response_id=first["id"], background=True)
            for _ in range(2)
        )
    )
    codes = sorted(r.status_code for r in both)
    assert codes == [200, 409], [r.text for r in both]
    busy = next(r for r in both if r.status_code == 409).json()["error"]
    assert busy["code"] == "session_busy"
    winner = next(r for r in both if r.status_code == 200).json()["id"]
    await server.client.post(f"/v1/responses/{winner}/cancel")


async def test_two_submits_with_one_idempotency_key_at_once_get_one_response(
    server: InProcess,
) -> None:
    server.base.script("same", answer("once"))
    headers = {"Idempotency-Key": "k-same"}
    both = await asyncio.gather(*(server.submit("same", headers=headers) for _ in range(2)))
    assert [r.status_code for r in both] == [200, 200], [r.text for r in both]
    assert both[0].json()["id"] == both[1].json()["id"]
    assert len(server.base.turns) == 1


async def test_two_requests_opening_one_door_session_at_once_start_one_turn(
    tmp_path: Path,
) -> None:
    # Both find the key bound to nothing, and both accept at once (beside the writer on
    # PostgreSQL): the second is told the session is busy, never a 500, never a second turn.
    engine = StandInEngine(tmp_path, max_turns=4, keep_seconds=30)
    try:

        def opening(text: str, key: SessionKey) -> EngineTask:
            principal = engine.principal_id
            return EngineTask(principal, None, text, model_connection=CONNECTION, session=key)

        await engine.engine.start(opening("SAY warm", SessionKey("oumi", "warm-up")))
        for attempt in range(5):
            key = SessionKey("oumi-harness", f"row-{attempt}")
            results = await asyncio.gather(
                engine.engine.start(opening("WAIT a", key)),
                engine.engine.start(opening("WAIT b", key)),
                return_exceptions=True,
            )
            accepted = [r for r in results if not isinstance(r, BaseException)]
            refused = [r for r in results if isinstance(r, BaseException)]
            assert len(accepted) == 1, results
            assert [(r.status, r.code) for r in refused if isinstance(r, ApiError)] == [
                (409, "session_busy")
            ], refused
            await engine.engine.cancel(engine.principal_id, accepted[0].response_id)
    finally:
        await engine.close()


async def test_two_requests_moving_a_door_key_off_its_expired_session_start_one_turn(
    tmp_path: Path,
) -> None:
    # The key's session can no longer be continued: each request makes a new session and moves
    # the key to it, from the old one. The database lets one move it; the other is busy.
    engine = StandInEngine(tmp_path, max_turns=4, keep_seconds=30)
    try:
        key = SessionKey("oumi-harness", "row-0")
        task = EngineTask(
            engine.principal_id, None, "SAY first", model_connection=CONNECTION, session=key
        )
        first = await engine.engine.start(task)
        first_run = engine.runs.get(first.response_id)
        assert first_run is not None
        await first_run.log.wait_finished()
        old_session = first_run.session_id
        held = engine.db.run(session_store.get_session, engine.principal_id, old_session)
        assert held is not None and held.active_response_id is None
        engine.settings.session_retention_days = 0  # every idle session has expired

        def moving(text: str) -> EngineTask:
            return EngineTask(
                engine.principal_id, None, text, model_connection=CONNECTION, session=key
            )

        results = await asyncio.gather(
            engine.engine.start(moving("WAIT a")),
            engine.engine.start(moving("WAIT b")),
            return_exceptions=True,
        )
        accepted = [r for r in results if not isinstance(r, BaseException)]
        refused = [r for r in results if isinstance(r, ApiError)]
        assert len(accepted) == 1 and [(r.status, r.code) for r in refused] == [
            (409, "session_busy")
        ], results
        run = engine.runs.get(accepted[0].response_id)
        assert run is not None and run.session_id != old_session
        bound = engine.db.run(
            door_sessions.find, engine.principal_id, held.harness_id, key.door, key.external_id
        )
        assert bound == run.session_id  # the key moved to the new session
        await engine.engine.cancel(engine.principal_id, accepted[0].response_id)
    finally:
        await engine.close()
