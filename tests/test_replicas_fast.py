"""Replicas on one PostgreSQL database, in process (FakeBase, FakeSandbox): two apps share
one database and one data folder, each with its own replica id, as `serve` processes do
(tests/test_replicas_e2e.py runs the same with real processes and the real CLI)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from harness_bases.events import TextDelta, TurnFinished
from storage import replicas as replica_store
from storage.db import Database
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.fakes import Ask, Hang, answer
from tests.support.in_process import InProcess, in_process
from tests.support.sse import Stream, parse_lines
from uhp_server.engine import questions, shared_admission
from uhp_server.engine.requests import EngineTask, QuestionPolicy, ToolAnswer
from uhp_server.settings import Settings

pytestmark = pytest.mark.skipif(
    postgres.TEST_DATABASE != "postgresql",
    reason="replicas share a PostgreSQL database: the PostgreSQL pass runs these",
)

LEASE = 1.0


async def _replicas(
    stack: AsyncExitStack, data_dir: Path, provider: RunningProvider, **settings: Any
) -> tuple[InProcess, InProcess]:
    started = []
    for name in ("a", "b"):
        replica = in_process(
            data_dir,
            provider.base_url,
            PROVIDER_KEY,
            replica_id=name,
            replica_lease_seconds=LEASE,
            **settings,
        )
        started.append(await stack.enter_async_context(replica))
    a, b = started
    return a, b


async def _wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _running_with_text(a: InProcess) -> str:
    a.base.script("long", [TextDelta("m", "partial answer"), Hang()])
    response_id = (await a.submit("long", background=True)).json()["id"]

    async def has_text() -> bool:
        run = a.ctx.runs.get(response_id)
        return run is not None and any(e["type"].endswith("delta") for e in run.log.events)

    await _wait_for(has_text)
    return response_id


async def _stream(replica: InProcess, response_id: str) -> Stream:
    async with replica.client.stream(
        "GET", f"/v1/responses/{response_id}?stream=true", timeout=30
    ) as response:
        lines = [line async for line in response.aiter_lines()]
    return parse_lines(lines, Stream())


def _completed_on(replica: InProcess, response_id: str) -> Callable[[], Awaitable[bool]]:
    async def completed() -> bool:
        body = (await replica.client.get(f"/v1/responses/{response_id}")).json()
        return bool(body["status"] == "completed")

    return completed


def _text(response: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "")
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


async def test_a_turn_on_one_replica_is_streamed_and_cancelled_from_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        streaming = asyncio.create_task(_stream(b, response_id))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        cancelled = (await b.client.post(f"/v1/responses/{response_id}/cancel")).json()
        assert time.monotonic() - started < 1.5
        assert cancelled["status"] == "cancelled", cancelled
        assert _text(cancelled) == "partial answer"
        assert a.ctx.runs.get(response_id).log.finished  # stopped where it ran
        stream = await asyncio.wait_for(streaming, 10)
        assert stream.events[-1]["type"] == "response.failed"  # cancelled (Streaming §4)
        assert stream.events[-1]["response"] == cancelled


async def _lapsed_and_taken_over(a: InProcess, b: InProcess, response_id: str) -> dict[str, Any]:
    """Stop a's lease renewals until b has ended a's turn; the turn as b stored it."""
    cluster = a.ctx.runs.cluster
    assert cluster is not None and cluster._loop_task is not None
    cluster._loop_task.cancel()

    async def failed() -> bool:
        body = (await b.client.get(f"/v1/responses/{response_id}")).json()
        return bool(body["status"] == "failed")

    await _wait_for(failed, LEASE * 5)
    body: dict[str, Any] = (await b.client.get(f"/v1/responses/{response_id}")).json()
    return body


async def test_a_replica_whose_lease_lapses_has_its_turns_failed_and_reaped_by_another(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        # a stops renewing its lease, as a process killed or cut off from the database does.
        body = await _lapsed_and_taken_over(a, b, response_id)
        assert "replica" in body["error"]["message"]
        assert _text(body) == "partial answer"

        async def reaped() -> bool:  # just after the turns, by the replica that expired it
            return b.sandbox.reaped == ["a"]

        await _wait_for(reaped, LEASE * 5)
        b.base.script("next", answer("on b"))
        follow = await b.submit("next", previous_response_id=response_id)
        assert follow.status_code == 200, follow.text  # the session was released
        with a.ctx.db.session() as s:
            leases = s.connection().execute(text("SELECT id FROM replica")).all()
        assert [row[0] for row in leases] == ["b"]


async def test_a_replica_that_was_taken_over_lets_its_turns_go(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        # a stalls for longer than its lease (its renewals stop), and b takes the turn over.
        stored = await _lapsed_and_taken_over(a, b, response_id)
        assert a.sandbox.running  # the turn's process still runs on a
        # a comes back: at its first renewal it sees the turn is no longer its own.
        cluster = a.ctx.runs.cluster
        assert cluster is not None
        cluster._loop_task = asyncio.create_task(cluster._keep_lease())
        run = a.ctx.runs.get(response_id)

        async def let_go() -> bool:
            return not a.sandbox.running and run.log.finished

        await _wait_for(let_go, LEASE * 5)
        assert run.log.current()["status"] == "failed"
        assert "replica" in run.log.current()["error"]["message"]
        assert (await b.client.get(f"/v1/responses/{response_id}")).json() == stored


async def test_a_replica_cut_off_from_the_database_stops_its_turns_and_ends_them_when_back(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"replica_id": "a", "replica_lease_seconds": LEASE}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        response_id = await _running_with_text(a)
        renew = replica_store.renew_lease
        cut_off = True

        def renew_unless_cut_off(db: Database, replica_id: str) -> None:
            if cut_off:
                raise ConnectionError("the database is out of reach")
            renew(db, replica_id)

        monkeypatch.setattr(replica_store, "renew_lease", renew_unless_cut_off)
        run = a.ctx.runs.get(response_id)

        async def stopped() -> bool:
            return not a.sandbox.running and run.log.finished

        await _wait_for(stopped, LEASE * 5)  # nobody took it over: no other replica
        assert run.log.current()["status"] == "failed"
        cut_off = False

        async def ended_in_the_database() -> bool:
            with a.ctx.db.session() as s:
                status = s.connection().execute(
                    text("SELECT status FROM response WHERE id = :id"), {"id": response_id}
                )
                return bool(status.scalar_one() == "failed")

        await _wait_for(ended_in_the_database, LEASE * 5)
        a.ctx.runs.forget(response_id)  # read back from the database, not from memory
        body = (await a.client.get(f"/v1/responses/{response_id}")).json()
        assert "replica" in body["error"]["message"] and _text(body) == "partial answer"
        a.base.script("next", answer("again"))
        follow = await a.submit("next", previous_response_id=response_id)
        assert follow.status_code == 200, follow.text  # its session was released
        assert follow.json()["status"] == "completed"


async def test_a_turn_queued_right_after_the_database_ended_its_connections_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # The admission line's own connection (write_apart's thread) is ended with the others:
    # the first turn's release and the next turn's join must still go through.
    url = str(Settings(data_dir=tmp_path).database)
    async with AsyncExitStack() as stack:
        a, _b = await _replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        a.base.script("short", answer("done"))
        assert (await a.submit("short")).json()["status"] == "completed"
        assert postgres.end_connections_to(url) >= 1
        await asyncio.sleep(0.05)  # the backends' exits are asynchronous to the call
        a.base.script("again", answer("done again"))
        again = await a.submit("again", background=True)
        assert again.status_code == 200, again.text
        await _wait_for(_completed_on(a, again.json()["id"]), 10)


async def test_a_second_process_with_the_same_replica_id_refuses_to_start(
    tmp_path: Path, provider: RunningProvider
) -> None:
    same = {"replica_id": "same", "replica_lease_seconds": LEASE}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **same) as first:
        response_id = await _running_with_text(first)
        with pytest.raises(RuntimeError, match="UHP_REPLICA_ID"):
            async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **same):
                pass
        run = first.ctx.runs.get(response_id)
        assert run is not None and not run.log.finished  # its turn was left alone


async def test_the_turn_limit_counts_the_turns_of_every_replica(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await _running_with_text(a)
        b.base.script("quick", answer("done"))
        waiting = (await b.submit("quick", background=True)).json()["id"]
        await asyncio.sleep(1.0)
        body = (await b.client.get(f"/v1/responses/{waiting}")).json()
        assert body["status"] == "in_progress" and body["output"] == []
        assert b.ctx.runs.get(waiting).queued
        state = await a.ctx.tasks.state(a.ctx.runs.get(holding).principal_id, waiting)
        assert state.status == "queued"  # seen from the replica it does not wait on, too
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await _wait_for(_completed_on(b, waiting), 10)


def _line_states(db: Database, *response_ids: str) -> list[str | None]:
    with db.session() as s:
        rows = s.connection().execute(
            text("SELECT id, admission FROM response WHERE id = ANY(:ids)"),
            {"ids": list(response_ids)},
        )
        states = dict(rows.all())
    return [states.get(response_id) for response_id in response_ids]


async def _ran_in_order(a: InProcess, b: InProcess, holding: str, first: str, then: str) -> None:
    """Once both wait in line, free `holding`'s slot: `first` must run before `then` (the
    limit is one turn)."""

    async def both_wait() -> bool:
        return _line_states(a.ctx.db, first, then) == ["waiting", "waiting"]

    await _wait_for(both_wait)
    await a.client.post(f"/v1/responses/{holding}/cancel")

    async def both_done() -> bool:
        bodies = [(await b.client.get(f"/v1/responses/{i}")).json() for i in (first, then)]
        return all(body["status"] == "completed" for body in bodies)

    await _wait_for(both_done, 15)
    with a.ctx.db.session() as s:
        finished = dict(
            s.connection()
            .execute(
                text("SELECT id, finished_at FROM response WHERE id IN (:f, :t)"),
                {"f": first, "t": then},
            )
            .all()
        )
    assert finished[first] < finished[then]


async def test_turns_are_admitted_in_the_order_they_arrived_not_the_order_they_joined(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await _running_with_text(a)
        # b is slow to get its turn to the line (a cold replica opening its connections,
        # say): a's later turn joins the line before it.
        line = b.ctx.runs.executor.admission
        join_now = line.acquire

        async def join_late(holder: str) -> None:
            await asyncio.sleep(0.5)
            await join_now(holder)

        line.acquire = join_late  # type: ignore[method-assign]
        b.base.script("second", answer("two"))
        second = (await b.submit("second", background=True)).json()["id"]
        a.base.script("third", answer("three"))
        third = (await a.submit("third", background=True)).json()["id"]

        await _ran_in_order(a, b, holding, second, third)


async def test_a_slot_handed_over_is_taken_though_its_notification_was_lost(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_admission, "POLL_SECONDS", 0.2)
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        assert b.ctx.runs.cluster is not None
        b.ctx.runs.cluster.notes.on(replica_store.ADMISSION_CHANNEL, lambda _id: None)
        holding = await _running_with_text(a)
        b.base.script("quick", answer("done"))
        waiting = (await b.submit("quick", background=True)).json()["id"]

        async def in_line() -> bool:
            return _line_states(a.ctx.db, waiting) == ["waiting"]

        await _wait_for(in_line)
        await a.client.post(f"/v1/responses/{holding}/cancel")

        await _wait_for(_completed_on(b, waiting), 10)


async def test_a_response_deleted_on_another_replica_is_no_longer_stored_where_it_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        deleted = await b.client.delete(f"/v1/responses/{response_id}")
        assert deleted.status_code == 200, deleted.text
        run = a.ctx.runs.get(response_id)

        async def unstored() -> bool:
            return not run.log.persist

        await _wait_for(unstored, LEASE * 5)  # the turn runs on (deleting never cancels)
        assert not run.log.finished
        await a.client.post(f"/v1/responses/{response_id}/cancel")
        with a.ctx.db.session() as s:
            conn = s.connection()
            events = conn.execute(
                text("SELECT count(*) FROM event WHERE response_id = :id"), {"id": response_id}
            ).scalar()
            final = conn.execute(
                text("SELECT final FROM response WHERE id = :id"), {"id": response_id}
            ).scalar()
        assert events == 0 and final is None
        assert (await b.client.get(f"/v1/responses/{response_id}")).status_code == 404


async def test_a_doors_deadline_on_another_replica_ends_the_turn_incomplete_where_it_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        principal_id = a.ctx.runs.get(response_id).principal_id
        started = time.monotonic()
        state = await b.ctx.tasks.time_out(principal_id, response_id, 7.0)
        assert time.monotonic() - started < 1.5
        assert state.status == "incomplete", state
        details = state.response["incomplete_details"]
        assert details == {"reason": "timeout_seconds", "timeout_seconds": 7.0}
        # Where it runs, the log publishes the terminal event once its commit is reported
        # back from the writer thread, which can come a moment after b read it.
        log = a.ctx.runs.get(response_id).log

        async def published() -> bool:
            return bool(log.finished)

        await _wait_for(published, 2)
        assert log.current() == state.response


async def test_a_slot_whose_release_was_lost_is_free_again_when_its_replica_restarts(
    tmp_path: Path, provider: RunningProvider
) -> None:
    settings = {"replica_id": "a", "replica_lease_seconds": LEASE, "max_concurrent_turns": 1}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        a.base.script("first", answer("one"))
        first = (await a.submit("first")).json()
        assert first["status"] == "completed"
    # The server stopped before the slot's release was written (it is written after the
    # turn's process is gone, by a task the stopping server may not wait for).
    db = Database(Settings(data_dir=tmp_path).database)
    with db.session() as s:
        s.connection().execute(
            text("UPDATE response SET admission = 'admitted' WHERE id = :id"), {"id": first["id"]}
        )
        s.commit()
    db.close()
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as again:
        again.base.script("second", answer("two"))
        second = await asyncio.wait_for(again.submit("second"), 10)
        assert second.json()["status"] == "completed"


async def _paused_on(replica: InProcess) -> tuple[str, str]:
    """A turn paused on `replica`, waiting for the user; its principal and response ids."""
    replica.base.script("who", answer("me"))
    first = (await replica.submit("who")).json()["id"]
    principal_id = replica.ctx.runs.get(first).principal_id
    replica.base.script("ask", [Ask("Which colour?"), TurnFinished()])
    task = EngineTask(principal_id, None, "ask", questions=QuestionPolicy.pause())
    response_id = (await replica.ctx.tasks.start(task)).response_id

    async def asking() -> bool:
        run = replica.ctx.runs.get(response_id)
        return run is not None and bool(run.asking)

    await _wait_for(asking)
    return principal_id, response_id


async def test_a_question_paused_on_one_replica_is_answered_from_the_other_in_the_same_turn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        principal_id, response_id = await _paused_on(a)

        async def waiting_on_b() -> bool:
            state = await b.ctx.tasks.state(principal_id, response_id)
            return state.status == "input_required"

        await _wait_for(waiting_on_b)
        state = await b.ctx.tasks.state(principal_id, response_id)
        assert [q.text for q in state.questions] == ["Which colour?"]
        call_id = state.questions[0].call_id
        answered = await b.ctx.tasks.answer(
            principal_id, response_id, [ToolAnswer(call_id, "blue")]
        )
        assert answered == response_id  # the live turn goes on, as a local answer does
        done = await asyncio.wait_for(b.ctx.runs.wait_elsewhere(response_id), 10)
        assert done is None
        final = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert final["status"] == "completed", final
        assert _text(final) == "answered: blue"
        assert len(a.base.turns) == 2  # no new turn was started anywhere
        assert len(b.base.turns) == 0
        outputs = [i for i in final["output"] if i["type"] == "function_call_output"]
        assert [(o["call_id"], o["output"]) for o in outputs] == [(call_id, "blue")]
        again = b.ctx.tasks.answer(principal_id, response_id, [ToolAnswer(call_id, "red")])
        with pytest.raises(Exception, match="not waiting"):
            await again
        with a.ctx.db.session() as s:
            left = s.connection().execute(text("SELECT count(*) FROM relayed_question")).scalar()
        assert left == 0


async def test_an_answer_racing_the_turn_parking_on_its_replica_continues_it_in_a_new_turn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        principal_id, response_id = await _paused_on(a)

        async def waiting_on_b() -> bool:
            state = await b.ctx.tasks.state(principal_id, response_id)
            return state.status == "input_required"

        await _wait_for(waiting_on_b)
        call_id = (await b.ctx.tasks.state(principal_id, response_id)).questions[0].call_id
        relay = b.ctx.runs.cluster.answers
        record = relay.relay

        async def parked_first(response_id: str, answers: list[ToolAnswer]) -> bool:
            run = a.ctx.runs.get(response_id)
            questions.park(run)  # its keep ran out just before the answer was recorded
            await _wait_for(lambda: _finished(run))
            return await record(response_id, answers)

        relay.relay = parked_first  # type: ignore[method-assign]
        b.base.script(questions.answers_prompt((), []).splitlines()[0], answer("carried on"))
        carrying = await b.ctx.tasks.answer(
            principal_id, response_id, [ToolAnswer(call_id, "blue")]
        )
        assert carrying != response_id  # the parked turn goes on in a new one
        parked = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert parked["status"] == "incomplete"
        assert parked["incomplete_details"]["reason"] == "input_required"
        await asyncio.wait_for(b.ctx.runs.wait_elsewhere(carrying), 10)
        follow = (await b.client.get(f"/v1/responses/{carrying}")).json()
        assert follow["previous_response_id"] == response_id
        assert follow["status"] == "completed", follow


async def _finished(run: Any) -> bool:
    return bool(run.log.finished)


async def test_the_harness_events_feed_of_one_replica_shows_the_turns_of_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        a.base.script("who", answer("me"))
        first = (await a.submit("who")).json()
        principal_id = a.ctx.runs.get(first["id"]).principal_id
        harness_id = first["metadata"]["harness_id"]
        feed = b.ctx.runs.feed.subscribe(principal_id, harness_id)
        a.base.script("feed me", answer("fed"))
        response_id = (await a.submit("feed me", background=True)).json()["id"]
        seen: list[dict[str, Any]] = []

        async def until_terminal() -> None:
            async for event in feed:
                seen.append(event)
                if event["type"] == "response.completed":
                    return

        await asyncio.wait_for(until_terminal(), 10)
        assert [e["type"] for e in seen] == [
            "session.created",
            "response.created",
            "response.in_progress",
            "response.output_item.done",
            "response.completed",
        ]
        assert [e["sequence_number"] for e in seen] == [0, 1, 2, 3, 4]
        assert {e["response_id"] for e in seen[1:]} == {response_id}
        assert {e["harness_id"] for e in seen} == {harness_id}
        assert seen[0]["session_id"] == seen[-1]["response"]["metadata"]["session_id"]
        assert _text(seen[-1]["response"]) == "fed"


async def test_an_oumi_resume_on_one_replica_answers_the_turn_paused_on_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider, model_connection_allow_private_hosts=True)
        a.base.script("who", answer("me"))
        harness_id = (await a.submit("who")).json()["metadata"]["harness_id"]
        a.base.script("ask", [Ask("Which city?"), TurnFinished()])
        connection = {"base_url": provider.base_url, "model": "m", "api_key": "sk-platform"}
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

        await _wait_for(input_required_on_b)
        paused = (await b.client.get(f"{door}/collect_output", params=params)).json()
        (call,) = paused["messages"][-1]["tool_calls"]
        resume = dict(
            start,
            session_action="resume",
            input_messages=[{"role": "tool", "tool_call_id": call["id"], "content": "Rome"}],
        )
        resumed = await b.client.post(f"{door}/submit", json=resume)
        assert resumed.status_code in (200, 202), resumed.text

        async def completed_on_b() -> bool:
            status = (await b.client.get(f"{door}/get_status", params=params)).json()
            return bool(status["status"] == "completed")

        await _wait_for(completed_on_b)
        output = (await b.client.get(f"{door}/collect_output", params=params)).json()
        assert output["messages"][-1]["content"] == "answered: Rome"
        assert (len(a.base.turns), len(b.base.turns)) == (2, 0)  # the paused turn went on


async def test_a_replica_whose_renewal_hangs_stops_its_turns_when_its_lease_lapses(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut off by a dropped link (no reset: packets lost), a renewal does not fail, it hangs
    # for as long as TCP retries (minutes): other replicas take the turns over once the lease
    # lapses, so this replica must let them go by the clock, not at the renewal's failure.
    import threading

    settings = {"replica_id": "a", "replica_lease_seconds": LEASE}
    reachable = threading.Event()
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        try:
            response_id = await _running_with_text(a)
            renew = replica_store.renew_lease

            def renew_when_reachable(db: Database, replica_id: str) -> None:
                reachable.wait(timeout=30)
                renew(db, replica_id)

            monkeypatch.setattr(replica_store, "renew_lease", renew_when_reachable)
            assert a.ctx.runs.get(response_id) is not None

            async def stopped() -> bool:
                return not a.sandbox.running

            await _wait_for(stopped, LEASE * 5)
        finally:
            reachable.set()


async def test_a_given_up_turn_whose_session_release_failed_once_frees_its_session(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ending a given-up turn is two steps (its closing events, then its session's release),
    # right after the database came back, when a second hiccup is most likely: a release that
    # fails once must be tried again, not forgotten with the session left busy for good.
    from storage import sessions as session_store

    settings = {"replica_id": "a", "replica_lease_seconds": LEASE}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        response_id = await _running_with_text(a)
        session_id = a.ctx.runs.get(response_id).session_id
        renew, release = replica_store.renew_lease, session_store.release_session
        cut_off, hiccups = True, [ConnectionError("the database went away again")]

        def renew_unless_cut_off(db: Database, replica_id: str) -> None:
            if cut_off:
                raise ConnectionError("the database is out of reach")
            renew(db, replica_id)

        def release_after_a_hiccup(*args: Any) -> None:
            if hiccups:
                raise hiccups.pop()
            release(*args)

        monkeypatch.setattr(replica_store, "renew_lease", renew_unless_cut_off)
        monkeypatch.setattr(session_store, "release_session", release_after_a_hiccup)
        run = a.ctx.runs.get(response_id)

        async def stopped() -> bool:
            return not a.sandbox.running and run.log.finished

        await _wait_for(stopped, LEASE * 5)
        cut_off = False

        async def session_free() -> bool:
            with a.ctx.db.session() as s:
                active = s.connection().execute(
                    text("SELECT active_response_id FROM session WHERE id = :id"),
                    {"id": session_id},
                )
                return active.scalar_one() is None

        await _wait_for(session_free, LEASE * 8)
        assert not hiccups  # the release did meet its hiccup


async def test_the_line_order_does_not_follow_a_replicas_own_clock(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Leases are timed by the database's clock; a turn's place in line must be too: a
    # replica whose host clock runs a minute behind would otherwise put each of its turns
    # before every turn the others accepted in the last minute.
    from types import SimpleNamespace

    from uhp_server.engine import acceptance

    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        holding = await _running_with_text(a)
        a.base.script("second", answer("two"))
        second = (await a.submit("second", background=True)).json()["id"]
        behind = SimpleNamespace(time=lambda: time.time() - 60)
        monkeypatch.setattr(acceptance, "time", behind)  # b's host clock, a minute behind
        b.base.script("third", answer("three"))
        third = (await b.submit("third", background=True)).json()["id"]
        monkeypatch.undo()

        await _ran_in_order(a, b, holding, second, third)


async def test_a_replica_whose_renewals_are_slow_but_succeed_keeps_its_turns(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy writer delays each renewal by a little over a third of a lease; every renewal
    # still lands well within the lease (each one a little over two thirds of a lease after
    # the last), so the replica's lease never lapses and it must keep its turns.
    settings = {"replica_id": "a", "replica_lease_seconds": LEASE}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        response_id = await _running_with_text(a)
        run = a.ctx.runs.get(response_id)
        renew = replica_store.renew_lease

        def renew_behind_a_busy_writer(db: Database, replica_id: str) -> None:
            time.sleep(LEASE * 0.4)
            renew(db, replica_id)

        monkeypatch.setattr(replica_store, "renew_lease", renew_behind_a_busy_writer)
        await asyncio.sleep(LEASE * 4)
        assert not run.abandoned
        assert a.sandbox.running


async def test_reading_a_turn_that_runs_on_another_replica_reads_its_events_off_the_loop(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GET /v1/responses/{id} of a stored turn running elsewhere has no final form and no
    # run here: it folds the turn's events from the database. An async route must read
    # through the database's threads: on the loop, one slow round trip (a dropped link
    # waits out tcp_user_timeout, 10 s) stalls every stream and lease renewal of the replica.
    import threading

    from storage import responses as response_store

    async with AsyncExitStack() as stack:
        a, b = await _replicas(stack, tmp_path, provider)
        response_id = await _running_with_text(a)
        readers: list[threading.Thread] = []
        events_after = response_store.events_after

        def noting_the_thread(*args: Any, **kwargs: Any) -> Any:
            readers.append(threading.current_thread())
            return events_after(*args, **kwargs)

        monkeypatch.setattr(response_store, "events_after", noting_the_thread)
        body = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert body["status"] == "in_progress"
        assert _text(body) == "partial answer"
        assert readers and threading.current_thread() not in readers


async def test_a_renewal_that_succeeds_during_an_event_loop_stall_keeps_the_turns(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The renewal commits on the writer thread while the event loop is stalled (a long
    # synchronous call) for most of a lease: the lease was renewed in time, yet when the loop
    # wakes, the third-of-a-lease timeout is handled before the renewal's result reaches it.
    settings = {"replica_id": "a", "replica_lease_seconds": LEASE}
    async with in_process(tmp_path, provider.base_url, PROVIDER_KEY, **settings) as a:
        response_id = await _running_with_text(a)
        run = a.ctx.runs.get(response_id)
        renew, loop, stalls = replica_store.renew_lease, asyncio.get_running_loop(), [1]

        def renew_while_the_loop_stalls(db: Database, replica_id: str) -> None:
            if stalls:
                stalls.pop()
                loop.call_soon_threadsafe(time.sleep, LEASE * 0.8)
                time.sleep(LEASE * 0.1)  # the loop is stalled by now
            renew(db, replica_id)

        monkeypatch.setattr(replica_store, "renew_lease", renew_while_the_loop_stalls)
        await asyncio.sleep(LEASE * 3)
        assert not stalls
        assert not run.abandoned
        assert a.sandbox.running
