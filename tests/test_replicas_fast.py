"""Replicas on one PostgreSQL database, in process (FakeBase, FakeSandbox; tests/support/
replica_pair.py): a turn streamed, cancelled, deleted, questioned and answered from the replica
that does not run it (tests/test_replicas_e2e.py runs some of the same with real processes and
the real CLI; leases, the admission line and answers that bring a model connection have files
of their own)."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request

from bench._runs import output_text
from storage import door_sessions
from storage.db import EVENTS_CHANNEL
from storage.unit import Tx
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.fakes import answer
from tests.support.in_process import API_KEY
from tests.support.replica_pair import (
    LEASE,
    ONLY_ON_POSTGRESQL,
    completed_on,
    ended_on,
    finished,
    input_required_on,
    paused_on,
    running_with_text,
    stream_of,
    two_replicas,
)
from tests.support.waiting import wait_for
from uhp_server.doors.uhp.harness_events import harness_events
from uhp_server.engine.facade.records import Principal
from uhp_server.engine.requests import SessionKey, ToolAnswer
from uhp_server.engine.turns import questions
from uhp_server.http.streams import StreamLimits
from uhp_server.settings import Settings

pytestmark = ONLY_ON_POSTGRESQL


async def test_a_turn_on_one_replica_is_streamed_and_cancelled_from_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        streaming = asyncio.create_task(stream_of(b, response_id))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        cancelled = (await b.client.post(f"/v1/responses/{response_id}/cancel")).json()
        assert time.monotonic() - started < 1.5
        assert cancelled["status"] == "cancelled", cancelled
        assert output_text(cancelled) == "partial answer"
        assert a.run(response_id).log.finished  # stopped where it ran
        stream = await asyncio.wait_for(streaming, 10)
        assert stream.events[-1]["type"] == "response.failed"  # cancelled (Streaming §4)
        assert stream.events[-1]["response"] == cancelled


async def test_a_sessions_cancel_on_the_other_replica_names_the_turn_it_stopped(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        session_id = (await a.client.get(f"/v1/responses/{response_id}")).json()["metadata"][
            "session_id"
        ]
        answer = (await b.client.post(f"/v1/sessions/{session_id}/cancel")).json()
        assert answer["status"] == "cancelled", answer
        assert answer["cancelled_response_id"] == response_id
        assert a.run(response_id).log.finished


async def test_a_turn_queued_right_after_the_database_ended_its_connections_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # The admission line's connection (Order.LINE's thread) is ended with the others:
    # the first turn's release and the next turn's join must still go through.
    url = str(Settings(data_dir=tmp_path).database)
    async with AsyncExitStack() as stack:
        a, _b = await two_replicas(stack, tmp_path, provider, max_concurrent_turns=1)
        a.base.script("short", answer("done"))
        assert (await a.submit("short")).json()["status"] == "completed"
        assert postgres.end_connections_to(url) >= 1
        await asyncio.sleep(0.05)  # the backends' exits are asynchronous to the call
        a.base.script("again", answer("done again"))
        again = await a.submit("again", background=True)
        assert again.status_code == 200, again.text
        await wait_for(completed_on(a, again.json()["id"]), 10)


async def test_a_response_deleted_on_another_replica_is_no_longer_stored_where_it_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        deleted = await b.client.delete(f"/v1/responses/{response_id}")
        assert deleted.status_code == 200, deleted.text
        run = a.run(response_id)

        async def unstored() -> bool:
            return not run.log.persist

        await wait_for(unstored, LEASE * 5)  # the turn runs on (deleting never cancels)
        assert not run.log.finished
        await a.client.post(f"/v1/responses/{response_id}/cancel")

        def stored(tx: Tx) -> tuple[int, object]:
            ((events,),) = tx.rows(
                "SELECT count(*) FROM event WHERE response_id = :id", {"id": response_id}
            )
            ((final,),) = tx.rows("SELECT final FROM response WHERE id = :id", {"id": response_id})
            return events, final

        events, final = a.ctx.db.run(stored)
        assert events == 0 and final is None
        assert (await b.client.get(f"/v1/responses/{response_id}")).status_code == 404


async def test_a_doors_deadline_on_another_replica_ends_the_turn_incomplete_where_it_runs(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        principal_id = a.run(response_id).principal_id
        started = time.monotonic()
        state = await b.ctx.engine.time_out(principal_id, response_id, 7.0)
        assert time.monotonic() - started < 1.5
        assert state.status == "incomplete", state
        details = state.response["incomplete_details"]
        assert details == {"reason": "timeout_seconds", "timeout_seconds": 7.0}
        # Where it runs, the log publishes the terminal event once its commit is reported
        # back from the writer thread, which can come a moment after b read it.
        log = a.run(response_id).log

        async def published() -> bool:
            return bool(log.finished)

        await wait_for(published, 2)
        assert log.current() == state.response


async def test_a_question_paused_on_one_replica_is_answered_from_the_other_in_the_same_turn(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        principal_id, response_id = await paused_on(a)

        await wait_for(lambda: input_required_on(b, principal_id, response_id))
        state = await b.ctx.engine.state(principal_id, response_id)
        assert [q.text for q in state.questions] == ["Which colour?"]
        call_id = state.questions[0].call_id
        answered = await b.ctx.engine.answer(
            principal_id, response_id, [ToolAnswer(call_id, "blue")]
        )
        assert answered == response_id  # the live turn goes on, as a local answer does
        await asyncio.wait_for(b.ctx.runs.peers.wait_finished(response_id), 10)
        final = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert final["status"] == "completed", final
        assert output_text(final) == "answered: blue"
        assert len(a.base.turns) == 2  # no new turn was started anywhere
        assert len(b.base.turns) == 0
        outputs = [i for i in final["output"] if i["type"] == "function_call_output"]
        assert [(o["call_id"], o["output"]) for o in outputs] == [(call_id, "blue")]
        again = b.ctx.engine.answer(principal_id, response_id, [ToolAnswer(call_id, "red")])
        with pytest.raises(Exception, match="not waiting"):
            await again
        ((left,),) = a.ctx.db.run(lambda tx: tx.rows("SELECT count(*) FROM relayed_question"))
        assert left == 0


async def test_an_answer_racing_the_turn_parking_on_its_replica_continues_it_in_a_new_turn(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        principal_id, response_id = await paused_on(a)

        await wait_for(lambda: input_required_on(b, principal_id, response_id))
        call_id = (await b.ctx.engine.state(principal_id, response_id)).questions[0].call_id
        relay = b.cluster.answers
        record = relay.relay

        async def parked_first(response_id: str, answers: list[ToolAnswer]) -> bool:
            run = a.run(response_id)
            questions.park(run)  # its keep ran out just before the answer was recorded
            await wait_for(lambda: finished(run))
            return await record(response_id, answers)

        monkeypatch.setattr(relay, "relay", parked_first)
        b.base.script(questions.answers_prompt((), []).splitlines()[0], answer("carried on"))
        carrying = await b.ctx.engine.answer(
            principal_id, response_id, [ToolAnswer(call_id, "blue")]
        )
        assert carrying != response_id  # the parked turn goes on in a new one
        parked = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert parked["status"] == "incomplete"
        assert parked["incomplete_details"]["reason"] == "input_required"
        await asyncio.wait_for(b.ctx.runs.peers.wait_finished(carrying), 10)  # stored
        # Then read through the API: the carrying turn runs on `b`, whose in-memory response
        # follows its stored end by a moment.
        await wait_for(ended_on(b, carrying), 10)
        follow = (await b.client.get(f"/v1/responses/{carrying}")).json()
        assert follow["previous_response_id"] == response_id
        assert follow["status"] == "completed", follow


async def test_the_harness_events_feed_of_one_replica_shows_the_turns_of_the_other(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        a.base.script("who", answer("me"))
        first = (await a.submit("who")).json()
        principal_id = a.run(first["id"]).principal_id
        harness_id = first["metadata"]["harness_id"]
        assert b.ctx.runs.peers is not None
        async with b.ctx.runs.peers.events_heard():  # as the feed's route subscribes
            feed = b.ctx.runs.feed.subscribe(principal_id, harness_id)
        a.base.script("feed me", answer("fed"))
        response_id = (await a.submit("feed me", background=True)).json()["id"]
        seen: list[dict[str, Any]] = []

        async def until_terminal() -> None:
            async for event in feed:
                seen.append(event)
                if event["type"] == "response.completed":
                    return

        try:
            await asyncio.wait_for(until_terminal(), 10)
        except TimeoutError:
            pytest.fail(f"no response.completed in 10 s; seen: {[e['type'] for e in seen]}")
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
        assert output_text(seen[-1]["response"]) == "fed"


async def test_the_harness_events_feed_answers_once_it_hears_the_other_replicas(
    tmp_path: Path, provider: RunningProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # b's LISTEN is slow (a busy database): the feed's response comes only once it is in
    # place, so a turn a client starts on a as soon as the feed answered is on it.
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        a.base.script("who", answer("me"))
        first = (await a.submit("who")).json()
        principal = Principal(id=a.run(first["id"]).principal_id, name="default")
        notes = b.cluster.notes
        listen = notes._listen_as_wanted

        async def late(conn: Any) -> None:
            await asyncio.sleep(0.3)
            await listen(conn)

        monkeypatch.setattr(notes, "_listen_as_wanted", late)

        streams = StreamLimits(max_connections=64)
        bearer = (b"authorization", f"Bearer {API_KEY}".encode())
        request = Request({"type": "http", "headers": [bearer], "app": b.app})
        answered = await harness_events(
            first["metadata"]["harness_id"],
            request,
            principal,
            b.ctx.engine,
            b.ctx.settings,
            streams,
        )

        assert answered.status_code == 200
        assert notes._heard_event(EVENTS_CHANNEL).is_set()
        await answered.inner.body_iterator.aclose()
        answered.place.give_back()


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
        a, b = await two_replicas(stack, tmp_path, provider)
        response_id = await running_with_text(a)
        readers: list[threading.Thread] = []
        events_after = response_store.events_after

        def noting_the_thread(*args: Any, **kwargs: Any) -> Any:
            readers.append(threading.current_thread())
            return events_after(*args, **kwargs)

        monkeypatch.setattr(response_store, "events_after", noting_the_thread)
        body = (await b.client.get(f"/v1/responses/{response_id}")).json()
        assert body["status"] == "in_progress"
        assert output_text(body) == "partial answer"
        assert readers and threading.current_thread() not in readers


async def test_two_replicas_rekeying_one_door_key_for_two_sessions_at_once_drop_it(
    tmp_path: Path, provider: RunningProvider
) -> None:
    # A Chat-door key names two conversations that cannot be told apart: rekeyed on both
    # replicas at once for their two sessions, neither may fail on the key's primary key, and
    # the key ends up continuing neither (storage/door_sessions.py, rekey).
    async with AsyncExitStack() as stack:
        a, b = await two_replicas(stack, tmp_path, provider)
        finished_on = []
        for replica in (a, b):
            body = (await replica.submit("hello")).json()
            assert body["status"] == "completed", body
            finished_on.append((replica, body["id"], body["metadata"]))
        principal_id = a.run(finished_on[0][1]).principal_id
        harness_id = finished_on[0][2]["harness_id"]
        assert finished_on[1][2]["harness_id"] == harness_id
        for attempt in range(10):
            key = SessionKey("openai-chat", f"history-{attempt}")
            results = await asyncio.gather(
                *(
                    replica.ctx.engine.rekey_door_session(
                        principal_id, harness_id, key, metadata["session_id"]
                    )
                    for replica, _, metadata in finished_on
                ),
                return_exceptions=True,
            )
            assert results == [None, None], results
            held = await a.ctx.db.read(
                door_sessions.find, principal_id, harness_id, key.door, key.external_id
            )
            assert held is None, attempt
