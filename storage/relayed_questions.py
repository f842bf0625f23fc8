"""Questions a paused turn waits on, and answers relayed to the replica running it (engine/
answer_relay.py). The runner posts each question it waits on; a replica that takes an answer
for it sets `answer` in one transaction for all the turn's pending calls (their rows locked
and found still waiting first: that decides against a second answer and against the runner
withdrawing them on parking);
the runner takes the answers with a DELETE … RETURNING, so each is delivered once. A replica
given the answers with a fresh model connection, which cannot be relayed, sets
`park_requested` instead, under the same conditions: the runner parks the turn, and the
asking replica carries it on in a new turn of its own.
"""

from __future__ import annotations

from storage.unit import Tx

ANSWERS_CHANNEL = "uhp_answers"  # payload: the response id answered


def post(tx: Tx, response_id: str, call_id: str, arguments: str) -> None:
    tx.execute(
        "INSERT INTO relayed_question (response_id, call_id, arguments)"
        " VALUES (:id, :call, :arguments) ON CONFLICT DO NOTHING",
        {"id": response_id, "call": call_id, "arguments": arguments},
    )


def pending(tx: Tx, response_id: str) -> list[tuple[str, str]]:
    """The (call id, arguments) of the questions the turn waits on, unanswered."""
    rows = tx.rows(
        "SELECT call_id, arguments FROM relayed_question"
        " WHERE response_id = :id AND answer IS NULL ORDER BY call_id",
        {"id": response_id},
    )
    return [(row[0], row[1]) for row in rows]


def record_answers(tx: Tx, response_id: str, answers: dict[str, str]) -> bool:
    """Answer every given call at once; False (nothing written) when any of them is no
    longer waiting: answered already, withdrawn by its parked turn, or asked to park."""
    return _set_on_each(
        tx,
        response_id,
        "answer = :answer",
        [{"call": call_id, "answer": output} for call_id, output in answers.items()],
    )


def request_park(tx: Tx, response_id: str, call_ids: list[str]) -> bool:
    """Ask the runner to park the turn waiting on these calls; False (nothing written) when
    any of them is no longer waiting, as `record_answers`."""
    return _set_on_each(
        tx, response_id, "park_requested = TRUE", [{"call": call_id} for call_id in call_ids]
    )


_STILL_WAITING = "answer IS NULL AND NOT park_requested"


def _set_on_each(tx: Tx, response_id: str, assignment: str, calls: list[dict[str, str]]) -> bool:
    """`assignment` on the row of every call, each only while it still waits; then the
    runner is told. False, with nothing written, when a call does not wait: the rows are
    locked first, all of them or none changed after."""
    # In the calls' order, the same for every writer: two transactions locking the same rows
    # in different orders would deadlock.
    ordered = sorted(calls, key=lambda call: call["call"])
    for params in ordered:
        still = tx.rows(
            "SELECT 1 FROM relayed_question WHERE response_id = :id AND call_id = :call"
            f" AND {_STILL_WAITING} FOR UPDATE",
            {"id": response_id, "call": params["call"]},
        )
        if not still:
            return False
    for params in ordered:
        tx.execute(
            f"UPDATE relayed_question SET {assignment} WHERE response_id = :id AND call_id = :call",
            {"id": response_id, **params},
        )
    tx.rows("SELECT pg_notify(:channel, :id)", {"channel": ANSWERS_CHANNEL, "id": response_id})
    return True


def take_answers(tx: Tx, response_id: str) -> dict[str, str]:
    """The answers relayed for the response, removed as they are read (delivered once)."""
    rows = tx.rows(
        "DELETE FROM relayed_question WHERE response_id = :id AND answer IS NOT NULL"
        " RETURNING call_id, answer",
        {"id": response_id},
    )
    return {row[0]: row[1] for row in rows}


def take_park_request(tx: Tx, response_id: str) -> list[str]:
    """The runner takes a request to park its turn: the call ids it was asked for. Their rows
    go with it (the turn parks, or was answered here meanwhile), so the asker can no longer
    withdraw it."""
    rows = tx.rows(
        "DELETE FROM relayed_question WHERE response_id = :id AND park_requested RETURNING call_id",
        {"id": response_id},
    )
    return sorted(row[0] for row in rows)


def withdraw_park_request(tx: Tx, response_id: str) -> bool:
    """The asker gives up a request to park that the runner has not taken (it did not hear of
    it in time); False when the runner took it."""
    changed = tx.execute(
        "UPDATE relayed_question SET park_requested = FALSE"
        " WHERE response_id = :id AND park_requested",
        {"id": response_id},
    )
    return bool(changed)


def withdraw(tx: Tx, response_id: str, call_id: str) -> str | None:
    """The question no longer waits (answered here, parked, stopped): its row goes; an answer
    relayed for it meanwhile is returned."""
    rows = tx.rows(
        "DELETE FROM relayed_question WHERE response_id = :id AND call_id = :call RETURNING answer",
        {"id": response_id, "call": call_id},
    )
    return rows[0][0] if rows else None


def answered_on(tx: Tx, replica_id: str) -> list[str]:
    """The responses this replica runs that have relayed answers or a request to park
    waiting."""
    rows = tx.rows(
        "SELECT DISTINCT q.response_id FROM relayed_question q JOIN response r ON r.id ="
        " q.response_id WHERE r.replica_id = :me AND (q.answer IS NOT NULL OR q.park_requested)",
        {"me": replica_id},
    )
    return [row[0] for row in rows]


def forget_finished(tx: Tx) -> None:
    """Rows of turns no longer running (their replica died while they waited)."""
    tx.execute(
        "DELETE FROM relayed_question q WHERE NOT EXISTS (SELECT 1 FROM response r"
        " WHERE r.id = q.response_id AND r.status = 'in_progress')"
    )
