"""After a restart: no task stays `in_progress` forever, and nothing stored is lost.

A task that was running when the server stopped cannot be re-attached to (its sandbox died
with the server), so it ends as `failed`, keeping every event it had written. One that was
waiting for the user's answer to a question ends parked instead (`incomplete`, reason
`input_required`): the answer still continues its conversation in a new turn.
"""

from __future__ import annotations

import logging

from storage import responses as response_store
from storage import sessions as session_store
from storage.db import Database
from uhp_server.engine.reading.fold import TERMINAL_TYPES, fold
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import numbered
from uhp_server.engine.turns.questions import pending_questions
from uhp_server.engine.turns.run import PARKED_REASON

log = logging.getLogger("uhp_server.recovery")

_INTERRUPTED = {
    "type": "harness_error",
    "code": "harness_error",
    "message": "The server restarted while this task was running.",
    "param": None,
    "detail": None,
}


def _closing(response: dict, error: dict, stop: dict | None = None) -> list[dict]:
    """The terminal events of an interrupted response: what a stop asked before its turn was
    lost (`stop`: {} a cancel, else a deadline's details), else parked when it awaited an
    answer, else failed."""
    builder = ResponseBuilder.resume(response)
    if stop is not None:
        if stop:
            return builder.finish(TaskStatus.INCOMPLETE, incomplete_details=stop)
        return builder.finish(TaskStatus.CANCELLED)
    pending = [q.call_id for q in pending_questions(response)]
    if pending:
        details = {"reason": PARKED_REASON, "pending_call_ids": pending}
        return builder.finish(TaskStatus.INCOMPLETE, incomplete_details=details)
    return builder.finish(TaskStatus.FAILED, error=dict(error))


def finish_interrupted(
    db: Database, response_id: str, error: dict = _INTERRUPTED, stop: dict | None = None
) -> str:
    """End one response whose turn is gone, keeping every event it wrote (on a thread that
    may block: its closing events go through the event log's writer, and it waits for their
    commit); `stop`: a cancel ({}) or deadline (its details) asked before the turn was lost.
    Returns the status it ended with."""
    events = db.run(response_store.events_after, response_id)
    if events and events[-1]["type"] in TERMINAL_TYPES:
        final = events[-1]["response"]
    elif events:
        closing = _closing(fold(events), error, stop)
        rows = [numbered(event, seq) for seq, event in enumerate(closing, len(events))]
        final = closing[-1]["response"]
        db.append_events(response_store.event_batch(response_id, rows, final)).result()
    else:
        final = None
    if final is not None:
        db.run(response_store.finish_response, response_id, final)
        return str(final["status"])
    db.run(response_store.mark_failed_unstored, response_id)
    return "failed"


def recover(db: Database) -> int:
    """Finish every response left in progress; returns how many were finished."""
    finished = 0
    for row in db.run(response_store.unfinished_responses):
        finish_interrupted(db, row.id)
        finished += 1
    for session in db.run(session_store.sessions_with_active_turns):
        db.run(
            session_store.release_session,
            session.id,
            session.active_response_id or "",
            "failed",
            None,
        )
    if finished:
        log.info("recovered_unfinished_tasks", extra={"count": finished})
    return finished
