"""A paused turn carried on elsewhere, in process and without a second replica: the runner's
side of a request to park (engine/replicas/answer_relay.py), and the AgentOS door finding the
response that carries its run on (tests/test_replicas_park.py runs both across two replicas)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from storage import relayed_questions
from storage import responses as response_store
from storage.db import Database
from storage.tables import EventRow, IdempotencyRow, ResponseRow
from uhp_server.doors.agentos.invocations import RUN_ID_METADATA, AgentosRuns
from uhp_server.engine.replicas.answer_relay import AnswerRelay
from uhp_server.engine.requests import Question
from uhp_server.engine.turns.run import Run


class _RunnersDatabase:
    """Stands for the database as the runner's `deliver` meets it: no relayed answers, and a
    request to park the calls the asker saw, taken while `meanwhile` happens on the runner's
    replica. Records the questions posted again."""

    def __init__(self, requested: list[str], meanwhile: Any) -> None:
        self.requested = requested
        self.meanwhile = meanwhile
        self.posted: list[str] = []
        self.taken = False

    async def write(self, fn: Any, *args: Any) -> Any:
        if fn is relayed_questions.take_answers:
            return {}
        if fn is relayed_questions.post:
            self.posted.append(args[1])
            return None
        assert fn is relayed_questions.take_park_request
        self.taken = True
        self.meanwhile()
        return self.requested


def _asking(*call_ids: str) -> Run:
    """A live turn waiting on these calls' questions (no plan, log or builder: the relay
    reads none of them)."""
    loop = asyncio.get_running_loop()
    return Run(
        response_id="resp_1",
        principal_id="prin_1",
        session_id="sess_1",
        plan=None,  # type: ignore[arg-type]  # the relay reads none of them
        log=None,  # type: ignore[arg-type]  # the relay reads none of them
        builder=None,  # type: ignore[arg-type]  # the relay reads none of them
        asking=[Question(call, "ask_user", "{}", "Which?", ()) for call in call_ids],
        answer_waiters={call: loop.create_future() for call in call_ids},
    )


@pytest.mark.parametrize("meanwhile", ["nothing", "answered here", "asked again"])
async def test_the_runner_parks_only_a_turn_still_waiting_on_exactly_the_calls_asked(
    meanwhile: str,
) -> None:
    run = _asking("call_1")

    def happening() -> None:
        if meanwhile == "answered here":
            run.answer_waiters["call_1"].set_result("given here")
        elif meanwhile == "asked again":  # a second question, which the asker never saw
            run.asking.append(Question("call_2", "ask_user", "{}", "And?", ()))
            run.answer_waiters["call_2"] = asyncio.get_running_loop().create_future()

    database = _RunnersDatabase(["call_1"], happening)
    relay = AnswerRelay(database, "a")  # type: ignore[arg-type]  # the database's stand-in
    relay.runs = SimpleNamespace(get=lambda response_id: run)
    await relay.deliver("resp_1")
    assert run.parking is (meanwhile == "nothing")
    # The take removed the questions' rows: those still waiting are shown again.
    assert database.posted == (["call_1", "call_2"] if meanwhile == "asked again" else [])


def _response(db: Database, response_id: str, previous: str | None, at: int, run_id: str) -> None:
    """A response of run `run_id`, as the door creates them (its id in the metadata)."""
    db.run(
        response_store.insert_response,
        ResponseRow(
            id=response_id,
            principal_id="agentos",
            session_id="sess_1",
            previous_response_id=previous,
            status="incomplete",
            created_at=at,
        ),
    )
    created = {
        "type": "response.created",
        "sequence_number": 0,
        "response": {"id": response_id, "metadata": {RUN_ID_METADATA: run_id}},
    }
    db.run(lambda tx: tx.orm.add(EventRow(response_id=response_id, seq=0, data=created)))


async def test_the_agentos_door_follows_its_run_past_a_later_run_of_the_same_session(
    tmp_path: Path,
) -> None:
    # Run r1 parked in resp_p; a later run r2 of the same AgentOS session followed it; then
    # r1 was resumed on another replica, carried on in resp_c1 and parked again, and carried
    # on once more in resp_c2. A resume of r1 must answer resp_c2's question.
    db = Database(tmp_path / "uhp.sqlite3")
    try:
        _response(db, "resp_p", None, 1, "r1")
        _response(db, "resp_r2", "resp_p", 2, "r2")
        _response(db, "resp_c1", "resp_p", 3, "r1")
        _response(db, "resp_c2", "resp_c1", 4, "r1")

        async def successors(principal_id: str, response_id: str) -> Any:
            return db.run(response_store.successors, principal_id, response_id)

        engine = SimpleNamespace(successors=successors)
        door = AgentosRuns(engine)  # type: ignore[arg-type]  # the engine's stand-in
        assert await door._carried_on("agentos", "resp_p", "r1") == "resp_c2"
        assert await door._carried_on("agentos", "resp_p", "r2") == "resp_r2"
        assert await door._carried_on("someone_else", "resp_p", "r1") == "resp_p"
    finally:
        db.close()


async def test_a_turn_already_parking_leaves_a_request_to_park_to_its_end() -> None:
    # (Its own park withdraws the questions; the asker then carries it on once it has ended.)
    run = _asking("call_1")
    run.park()
    database = _RunnersDatabase(["call_1"], lambda: None)
    relay = AnswerRelay(database, "a")  # type: ignore[arg-type]  # the database's stand-in
    relay.runs = SimpleNamespace(get=lambda response_id: run)
    await relay.deliver("resp_1")
    assert (database.taken, database.posted) == (False, [])


def test_a_deleted_new_turn_no_longer_stands_for_the_response_it_carried_on(
    tmp_path: Path,
) -> None:
    db = Database(tmp_path / "uhp.sqlite3")
    try:
        _response(db, "resp_p", None, 1, "r1")
        _response(db, "resp_c1", "resp_p", 2, "r1")
        for key in (response_store.CARRY_ON_KEY + "resp_p", "a client's own key"):
            record = IdempotencyRow(
                principal_id="agentos",
                key=key,
                fingerprint=key,
                response_id="resp_c1",
                created_at=1,
            )
            db.run(response_store.put_idempotency, record)
        db.run(response_store.delete_response, "resp_c1")
        assert db.run(response_store.get_idempotency, "agentos", "uhp-carry-on:resp_p") is None
        assert db.run(response_store.get_idempotency, "agentos", "a client's own key") is not None
    finally:
        db.close()
