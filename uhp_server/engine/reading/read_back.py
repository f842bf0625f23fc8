"""Reading a task back: its response as it stands, and its events, live or stored.

Every door reads tasks this way (UHP's GET and stream, the other doors' status and output),
so none of them touches storage or the run registry's internals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from storage import relayed_questions
from storage import replicas as replica_store
from storage import responses as response_store
from storage.db import Database
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.reading.fold import fold
from uhp_server.engine.requests import INPUT_REQUIRED, QUEUED, TERMINAL, TaskState, TaskStatus
from uhp_server.engine.turns.questions import pending_questions, question_of_call
from uhp_server.engine.turns.registry import RunRegistry
from uhp_server.engine.turns.run import PARKED_REASON, Run
from uhp_server.errors import VENDOR, ApiError

# While a turn waits for a slot, its response's metadata says where it stands in line (1: the
# next to start). The protocol has no queued status: the response stays `in_progress`.
QUEUE_POSITION = VENDOR + "queue_position"


def current_response(
    tx: Tx, runs: RunRegistry, row: ResponseRow, replay: bool = False
) -> dict[str, Any]:
    """The response as it stands: live from the run, else its stored final form.

    A finished store=false response is not readable back; only an idempotent repeat of the
    request that created it (replay) still gets its result while the run is remembered."""
    live = live_response(runs, row, replay=replay)
    if live is not None:
        return live
    if row.final is not None:
        return row.final
    if row.store:
        events = response_store.events_after(tx, row.id)
        if events:
            return fold(events)
    raise ApiError(404, "response_not_found", "That response was not retained (store: false).")


def unretained_response(row: ResponseRow) -> dict[str, Any]:
    """What is known of a response whose content was not kept (store: false): its row."""
    return {
        "id": row.id,
        "object": "response",
        "created_at": row.created_at,
        "status": row.status,
        "error": None,
        "incomplete_details": None,
        "previous_response_id": row.previous_response_id,
        "model": row.model,
        "output": [],
        "store": False,
        "usage": None,
        "metadata": {"session_id": row.session_id},
    }


def live_response(
    runs: RunRegistry, row: ResponseRow, *, replay: bool = False
) -> dict[str, Any] | None:
    """`current_response` when the run in memory answers it (no storage: fit for the event
    loop), else None."""
    run = runs.get(row.id)
    if run is None or not answers_live(run, row, replay):
        return None
    response = run.log.current()
    place = runs.executor.place_in_line(run)
    if place is not None:
        response = {**response, "metadata": {**response.get("metadata", {}), QUEUE_POSITION: place}}
    return response


def answers_live(run: Run, row: ResponseRow, replay: bool = False) -> bool:
    """Whether the run in memory answers for the response `row` (as just read) stands for:
    while it runs, or once ended when kept (or replayed). Not for a kept response whose end
    the store already holds while the run has not heard it yet: another replica ended it (a
    cancel sent there), and a reader of this one would otherwise see it running after that
    cancel."""
    if row.store and row.status in TERMINAL and not run.log.finished:
        return False
    return row.store or replay or not run.log.finished


def task_state(tx: Tx, runs: RunRegistry, row: ResponseRow) -> TaskState:
    """The task's engine status (with `queued` and `input_required`, which UHP folds into
    `in_progress`), its response, and the questions it waits on."""
    response = current_response(tx, runs, row, True)
    status = TaskStatus(response["status"])
    run = runs.get(row.id)
    if run is not None and status is TaskStatus.IN_PROGRESS:
        if run.queued:
            status = QUEUED
        elif run.asking:
            return TaskState(INPUT_REQUIRED, response, tuple(run.asking))
    elif run is None and status is TaskStatus.IN_PROGRESS and runs.peers.shared:
        if row.admission == "waiting":
            status = QUEUED  # waiting for a slot on another replica
        elif waiting := relayed_questions.pending(tx, row.id):  # paused on another replica
            asked = tuple(question_of_call(call, arguments) for call, arguments in waiting)
            return TaskState(INPUT_REQUIRED, response, asked)
        elif row.admission == replica_store.IN_OWN_QUEUE:  # (questions first: a stale mark)
            status = QUEUED
    details = response.get("incomplete_details") or {}
    if status is TaskStatus.INCOMPLETE and details.get("reason") == PARKED_REASON:
        return TaskState(INPUT_REQUIRED, response, pending_questions(response))
    return TaskState(status, response)


async def follow_events(
    db: Database, runs: RunRegistry, row: ResponseRow, after: int = -1
) -> AsyncIterator[dict[str, Any]]:
    """The response's events after `after`: live until the terminal one, or as stored."""
    run = runs.get(row.id)
    if run is not None:
        async for event in run.log.follow(after):
            yield event
        return
    if runs.peers.shared and row.status == TaskStatus.IN_PROGRESS:  # it runs on another replica
        async for event in runs.peers.follow(row.id, after):
            yield event
        return
    for event in await db.read(response_store.events_after, row.id, after):
        yield event
