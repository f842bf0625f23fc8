"""Answers that bring a fresh model connection for a turn paused on another replica, on one
PostgreSQL database in process (FakeBase, FakeSandbox; tests/support/replica_pair.py): the
runner parks the turn and the replica given the answer carries it on in a new turn with that
connection, through the Oumi and AgentOS doors and the engine; the requests' races
(docs/scale-out.md §3.5; tests/test_carrying_on.py has the parts that need no second replica)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bench._runs import output_text
from harness_bases.events import TurnFinished
from storage import relayed_questions as relayed
from storage.db import Database
from storage.unit import Tx
from tests.scripted_provider import RunningProvider, start_provider
from tests.support import postgres, waiting
from tests.support.agentos_platform import RUN_TOKEN_HEADER, AgentosPlatform
from tests.support.fakes import Ask, FakeProcess, Pause, answer
from tests.support.in_process import InProcess
from tests.support.replica_pair import (
    LEASE,
    ONLY_ON_POSTGRESQL,
    completed_on,
    finished,
    input_required_on,
    paused_on,
    two_replicas,
)
from uhp_server.engine.requests import EngineTask, QuestionPolicy, ToolAnswer
from uhp_server.engine.turns import questions
from uhp_server.errors import ApiError
from uhp_server.gateway.connection import ModelConnection

# Two replicas on one PostgreSQL database: a turn parks on one and starts on the other through
# the database's notifications. CI runs this beside other passes, where that took past the
# default 5 s (twice); the doors give their callers 30 s.
wait_for = functools.partial(waiting.wait_for, timeout=20)

pytestmark = ONLY_ON_POSTGRESQL


def test_a_request_to_park_and_relayed_answers_exclude_each_other(tmp_path: Path) -> None:
    # Whichever lands first decides: the turn is then either answered or parked, never both
    # (a parked turn's answers would be lost; an answered one would go on in two turns).
    databases = postgres.Databases()
    db = Database(databases.url_for(tmp_path))
    try:
        for first, second in _PARK_AND_ANSWER, _PARK_AND_ANSWER[::-1]:
            response_id = f"resp_{first.__name__}"
            db.run(relayed.post, response_id, "call_1", "{}")
            db.run(relayed.post, response_id, "call_2", "{}")
            assert _given(first, db, response_id) is True
            assert _given(second, db, response_id) is False
            assert _given(first, db, response_id) is False  # nor the same twice
            parked = first is relayed.request_park
            answers = db.run(relayed.take_answers, response_id)
            assert answers == ({} if parked else {"call_1": "blue", "call_2": "blue"})
            taken = db.run(relayed.take_park_request, response_id)
            assert taken == (["call_1", "call_2"] if parked else [])
    finally:
        db.close()
        databases.drop_all()


def test_a_request_to_park_is_withdrawn_only_while_the_runner_has_not_taken_it(
    tmp_path: Path,
) -> None:
    databases = postgres.Databases()
    db = Database(databases.url_for(tmp_path))
    try:
        db.run(relayed.post, "resp_1", "call_1", "{}")
        assert db.run(relayed.request_park, "resp_1", ["call_1"])
        assert db.run(relayed.withdraw_park_request, "resp_1") is True
        assert db.run(relayed.pending, "resp_1") == [("call_1", "{}")]  # the turn still waits
        assert db.run(relayed.take_park_request, "resp_1") == []
        assert db.run(relayed.request_park, "resp_1", ["call_1"])  # asked again, and taken
        assert db.run(relayed.take_park_request, "resp_1") == ["call_1"]
        assert db.run(relayed.withdraw_park_request, "resp_1") is False
    finally:
        db.close()
        databases.drop_all()


def test_writers_of_a_turns_questions_lock_them_in_one_order(tmp_path: Path) -> None:
    # Another writer holds call_1 and will take call_2 next, as every writer does (in the
    # calls' order). Answers given in another order must wait for call_1 holding nothing,
    # not take call_2 first: the two would then wait on each other (a deadlock).
    databases = postgres.Databases()
    url = databases.url_for(tmp_path)
    db = Database(url)
    try:
        db.run(relayed.post, "resp_1", "call_1", "{}")
        db.run(relayed.post, "resp_1", "call_2", "{}")
        with psycopg.connect(make_url(url).render_as_string(hide_password=False)) as other:
            update = "UPDATE relayed_question SET park_requested = TRUE WHERE call_id = %s"
            other.execute(update, ("call_1",))
            answering = ThreadPoolExecutor(1).submit(
                db.run, relayed.record_answers, "resp_1", {"call_2": "blue", "call_1": "blue"}
            )
            time.sleep(0.5)  # the answers reach their first lock meanwhile
            other.execute(update, ("call_2",))  # DeadlockDetected had they taken call_2
            other.commit()
        assert answering.result(timeout=10) is False  # the other writer came first
    finally:
        db.close()
        databases.drop_all()


_PARK_AND_ANSWER = (relayed.request_park, relayed.record_answers)


async def _deaf(response_id: str) -> None:
    """A runner's `deliver` that never hears of anything relayed to it."""


def _given(action: Any, db: Database, response_id: str) -> bool:
    """`action` (one of _PARK_AND_ANSWER) for both calls of the response."""
    if action is relayed.record_answers:
        return bool(db.run(action, response_id, {"call_1": "blue", "call_2": "blue"}))
    return bool(db.run(action, response_id, ["call_1", "call_2"]))


async def test_a_park_request_the_runner_never_takes_is_withdrawn_and_the_turn_still_waits(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(
            stack, tmp_path, provider, model_connection_allow_private_hosts=True
        )
        principal_id, response_id, call_id = await _paused_on_a_seen_on_b(a, b)
        relay = a.cluster.answers
        deliver = relay.deliver

        monkeypatch.setattr(relay, "deliver", _deaf)  # its notifications and renewals lost
        connection = ModelConnection(provider.base_url, "m", "sk-resumed")
        started = time.monotonic()
        with pytest.raises(ApiError) as refused:
            await b.ctx.engine.answer(
                principal_id,
                response_id,
                [ToolAnswer(call_id, "blue")],
                model_connection=connection,
            )
        assert time.monotonic() - started >= LEASE  # it gave the runner a lease to hear of it
        assert (refused.value.status, refused.value.headers) == (503, {"Retry-After": "1"})
        assert not a.run(response_id).parking  # nothing parked it
        assert len(b.base.turns) == 0
        # Withdrawn, not left behind: a runner hearing of it now finds nothing to park, and
        # the turn still takes an answer.
        monkeypatch.setattr(relay, "deliver", deliver)
        await deliver(response_id)
        assert not a.run(response_id).parking
        answered = await b.ctx.engine.answer(
            principal_id, response_id, [ToolAnswer(call_id, "red")]
        )
        assert answered == response_id
        await asyncio.wait_for(b.ctx.runs.peers.wait_finished(response_id), 10)
        final = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert output_text(final) == "answered: red"


async def test_an_answer_for_questions_that_changed_while_it_waited_is_refused_not_a_500(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(
            stack, tmp_path, provider, model_connection_allow_private_hosts=True
        )
        a.base.script("who", answer("me"))
        first = (await a.submit("who")).json()["id"]
        principal_id = a.run(first).principal_id
        a.base.script("ask twice", [Ask("Which colour?"), Ask("Which size?"), TurnFinished()])
        task = EngineTask(principal_id, None, "ask twice", questions=QuestionPolicy.pause())
        response_id = (await a.ctx.engine.start(task)).response_id
        await wait_for(lambda: input_required_on(b, principal_id, response_id))
        call_id = (await b.ctx.engine.state(principal_id, response_id)).questions[0].call_id
        park_elsewhere = b.ctx.runs.peers.park_elsewhere

        async def answered_and_asked_again(response_id: str, call_ids: list[str]) -> bool:
            # Meanwhile, on a: the first question answered there, the next one asked, and
            # the turn parked on it (kept long enough) before b's request landed.
            await a.ctx.engine.answer(principal_id, response_id, [ToolAnswer(call_id, "blue")])
            run = a.run(response_id)
            await wait_for(lambda: bool(run.asking) and run.asking[0].call_id != call_id)
            questions.park(run)
            await wait_for(lambda: finished(run))
            return await park_elsewhere(response_id, call_ids)

        monkeypatch.setattr(b.ctx.runs.peers, "park_elsewhere", answered_and_asked_again)
        connection = ModelConnection(provider.base_url, "m", "sk-resumed")
        with pytest.raises(ApiError, match="not waiting"):
            await b.ctx.engine.answer(
                principal_id, response_id, [ToolAnswer(call_id, "red")], model_connection=connection
            )
        assert len(b.base.turns) == 0


async def test_two_answers_carrying_a_turn_on_at_once_start_one_new_turn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(
            stack, tmp_path, provider, model_connection_allow_private_hosts=True
        )
        principal_id, response_id, call_id = await _paused_on_a_seen_on_b(a, b)
        carrying_on = questions.answers_prompt((), []).splitlines()[0]
        b.base.script(carrying_on, [Pause(0.5), *answer("carried on")])
        connection = ModelConnection(provider.base_url, "m", "sk-resumed")

        async def answering() -> str:
            given = [ToolAnswer(call_id, "blue")]
            return await b.ctx.engine.answer(
                principal_id, response_id, given, model_connection=connection
            )

        # (A door's retry racing its first attempt, or two replicas given the same resume.)
        first, second = await asyncio.gather(answering(), answering())
        assert first == second != response_id
        await wait_for(completed_on(b, first))
        assert len(b.base.turns) == 1


async def _paused_on_a_seen_on_b(a: InProcess, b: InProcess) -> tuple[str, str, str]:
    """A turn paused on a, read as waiting on b: its principal, response and call ids."""
    principal_id, response_id = await paused_on(a)
    await wait_for(lambda: input_required_on(b, principal_id, response_id))
    call_id = (await b.ctx.engine.state(principal_id, response_id)).questions[0].call_id
    return principal_id, response_id, call_id


async def test_an_oumi_resume_on_one_replica_carries_the_turn_paused_on_the_other_on_with_its_key(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(
            stack, tmp_path, provider, model_connection_allow_private_hosts=True
        )
        a.base.script("who", answer("me"))
        harness_id = (await a.submit("who")).json()["metadata"]["harness_id"]
        a.base.script("ask", [Ask("Which city?"), TurnFinished()])
        connection = {"base_url": provider.base_url, "model": "m", "api_key": "sk-first"}
        start = {
            "protocol_version": "1",
            "session_id": "ses_replicas",
            "invocation_id": "inv_replicas",
            "session_action": "start",
            "input_messages": [{"role": "user", "content": "ask"}],
            "model_connection": connection,
        }
        door = f"/oumi/harnesses/{harness_id}"
        assert (await a.client.post(f"{door}/submit", json=start)).status_code == 202
        params = {"invocation_id": "inv_replicas"}

        async def input_required_on_b() -> bool:
            status = (await b.client.get(f"{door}/get_status", params=params)).json()
            return bool(status["status"] == "input_required")

        await wait_for(input_required_on_b)
        paused = (await b.client.get(f"{door}/collect_output", params=params)).json()
        (call,) = paused["messages"][-1]["tool_calls"]
        resume = dict(
            start,
            session_action="resume",
            input_messages=[{"role": "tool", "tool_call_id": call["id"], "content": "Rome"}],
            model_connection=dict(connection, api_key="sk-resumed"),
        )
        carry_on = [Pause(0.5), *answer("carried on")]
        b.base.script(questions.answers_prompt((), []).splitlines()[0], carry_on)
        resumed = await b.client.post(f"{door}/submit", json=resume)
        assert resumed.status_code in (200, 202), resumed.text

        keys: list[str] = []

        def key_on_b() -> bool:
            grants = [run.grant for run in b.ctx.runs.running() if run.grant is not None]
            keys.extend(grant.provider.api_key for grant in grants)
            return bool(grants)

        # "Use the connection from the latest submission": its key cannot be relayed to a (it
        # is never stored), so a's turn parks and b carries it on with the resume's key.
        await wait_for(key_on_b)
        assert keys == ["sk-resumed"]

        async def completed_on_b() -> bool:
            status = (await b.client.get(f"{door}/get_status", params=params)).json()
            return bool(status["status"] == "completed")

        await wait_for(completed_on_b)
        output = (await b.client.get(f"{door}/collect_output", params=params)).json()
        assert output["messages"][-1]["content"] == "carried on"

        def looked_at(tx: Tx) -> tuple[str, str, int]:
            ((parked,),) = tx.rows("SELECT id FROM response WHERE status = 'incomplete'")
            ((carrying,),) = tx.rows(
                "SELECT id FROM response WHERE previous_response_id = :id", {"id": parked}
            )
            ((count,),) = tx.rows("SELECT count(*) FROM relayed_question")
            return parked, carrying, count

        parked_id, carrying_id, left = a.ctx.db.run(looked_at)
        assert a.run(parked_id).log.finished
        assert (len(a.base.turns), len(b.base.turns)) == (2, 1)
        assert "Rome" in b.base.turns[0].spec.prompt
        assert b.ctx.runs.get(carrying_id) is not None  # it ran on b
        assert left == 0


async def test_an_agentos_resume_on_one_replica_carries_the_run_held_on_the_other_on_with_its_token(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # A run token works for its own invocation only: the turn held on a cannot go on there
    # with the resume's token (never stored, so never relayed), so b carries it on.
    async with _agentos_run_held_on_a(tmp_path, provider, "r_held") as (a, b, platform):
        # The resume lands on b, whose new turn asks again: its hold is b's to open.
        carrying_on = questions.answers_prompt((), []).splitlines()[0]
        b.base.script(carrying_on, [Pause(0.3), Ask("Which size?"), TurnFinished()])
        decided = platform.invoke_body("r_held", "ask", seq=2, resume={"answer": "blue"})
        held_again = await _invoked(b, platform, decided, running_with=decided)
        assert held_again["status"] == "suspended", held_again
        assert platform.holds[-1]["intent"] == "Which size?"
        # Back on a: the turn held on b parks, and a carries it on to the end.
        a.base.script(carrying_on, [Pause(0.3), *answer("carried on")])
        last = platform.invoke_body("r_held", "ask", seq=3, resume={"answer": "large"})
        done = await _invoked(a, platform, last, running_with=last)
        assert done["status"] == "completed", done
        assert done["output"]["text"] == "carried on"
        assert (len(a.base.turns), len(b.base.turns)) == (2, 1)
        procs = [turn.proc for turn in a.base.turns + b.base.turns]
        assert all(isinstance(proc, FakeProcess) and proc._exit_code.done() for proc in procs)
        assert "large" in a.base.turns[-1].spec.prompt


async def test_an_agentos_resume_tries_again_while_the_other_replica_is_slow_to_park(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AgentOS never repeats an invocation: the door itself tries again after a 503.
    async with _agentos_run_held_on_a(tmp_path, provider, "r_slow") as (a, b, platform):
        relay = a.cluster.answers
        deliver = relay.deliver

        monkeypatch.setattr(relay, "deliver", _deaf)  # its notifications lost, for a while
        refused = []
        answer_once = b.ctx.engine.answer

        async def answering(*args: Any, **kwargs: Any) -> str:
            try:
                return await answer_once(*args, **kwargs)
            except ApiError as exc:
                refused.append(exc.status)
                monkeypatch.setattr(relay, "deliver", deliver)  # it hears again
                raise

        monkeypatch.setattr(b.ctx.engine, "answer", answering)
        b.base.script(questions.answers_prompt((), []).splitlines()[0], answer("carried on"))
        decided = platform.invoke_body("r_slow", "ask", seq=2, resume={"answer": "blue"})
        done = await _invoked(b, platform, decided)
        assert refused == [503]
        assert done["status"] == "completed", done
        assert done["output"]["text"] == "carried on"
        assert (len(a.base.turns), len(b.base.turns)) == (1, 1)


@contextlib.asynccontextmanager
async def _agentos_run_held_on_a(
    tmp_path: Path, provider: RunningProvider, run_id: str
) -> AsyncIterator[tuple[InProcess, InProcess, AgentosPlatform]]:
    """Two replicas with the AgentOS door, its platform played by a stand-in, and run
    `run_id` held on a (its prompt "ask" asks "Which colour?")."""
    with (
        start_provider("sk-gateway", ["agent-model"], chat_only=True) as gateway,
        AgentosPlatform(gateway) as platform,
    ):
        async with AsyncExitStack() as stack:
            a, b = await two_replicas(
                stack,
                tmp_path,
                provider,
                agentos_principal="agentos",
                model_connection_allow_private_hosts=True,
            )
            a.base.script("ask", [Ask("Which colour?"), TurnFinished()])
            held = await _invoked(a, platform, platform.invoke_body(run_id, "ask"))
            assert held["status"] == "suspended", held
            yield a, b, platform


async def _invoked(
    replica: InProcess,
    platform: AgentosPlatform,
    body: dict[str, Any],
    *,
    running_with: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The invocation's answer from `replica`; then its token stops working. `running_with`:
    its turn must start on `replica` with that body's run token as its model connection's."""
    invoking = asyncio.create_task(replica.client.post("/invoke", json=body))
    try:
        if running_with is not None:
            tokens: list[str] = []

            def started() -> bool:
                grants = [r.grant for r in replica.ctx.runs.running() if r.grant is not None]
                tokens.extend(grant.provider.headers[RUN_TOKEN_HEADER] for grant in grants)
                return bool(grants)

            await wait_for(started)
            assert tokens == [running_with["context"]["token"]]
        answered = await asyncio.wait_for(invoking, 10)
    finally:
        platform.answered()
    assert answered.status_code == 200, answered.text
    result: dict[str, Any] = answered.json()
    return result


async def test_an_answer_given_while_the_other_replica_parks_for_the_same_one_carries_it_on_too(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the runner taking a request to park (its questions no longer wait) and its
    end recorded, the task reads as running: a second answer given then (found in CI: 409
    not_waiting) waits for that end as the first does, and gets the same new turn."""
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(
            stack, tmp_path, provider, model_connection_allow_private_hosts=True
        )
        principal_id, response_id, call_id = await _paused_on_a_seen_on_b(a, b)
        carrying_on = questions.answers_prompt((), []).splitlines()[0]
        b.base.script(carrying_on, answer("carried on"))
        connection = ModelConnection(provider.base_url, "m", "sk-resumed")
        taken = asyncio.Event()
        park = questions.park

        def park_slowly(run: Any) -> None:
            taken.set()
            asyncio.get_running_loop().call_later(0.5, park, run)

        monkeypatch.setattr(questions, "park", park_slowly)

        async def answering() -> str:
            given = [ToolAnswer(call_id, "blue")]
            return await b.ctx.engine.answer(
                principal_id, response_id, given, model_connection=connection
            )

        first = asyncio.ensure_future(answering())
        await asyncio.wait_for(taken.wait(), 10)
        second = await answering()
        assert await first == second != response_id
        await wait_for(completed_on(b, second))
        assert len(b.base.turns) == 1
