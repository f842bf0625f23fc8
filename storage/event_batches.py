"""What the event log's writers commit: a response's new events, and with its last ones the
final response row and the session its turn held (storage/thread_writer.py's writer, and
storage/loop_writer.py's on PostgreSQL), and how PostgreSQL writes a group as one statement."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from storage.sql_text import MAX_PARAMETERS, psycopg_style

# Rows in one multi-row INSERT of events on PostgreSQL (three parameters each).
EVENT_ROWS_PER_INSERT = 1000
_INSERT_EVENTS = "INSERT INTO event (response_id, seq, data) VALUES "


@dataclass(frozen=True)
class RowUpdate:
    """A statement (with `?` parameters) that changes the one row `row` names."""

    sql: str
    params: tuple[Any, ...]
    row: tuple[str, str]  # (table, primary key)


@dataclass
class SessionRelease:
    """A session whose turn ends with this batch: it is free for its next task the moment
    the terminal event is committed, in the same transaction."""

    session_id: str
    native_session_id: str | None  # the CLI's conversation id, for the next turn's resume


@dataclass
class EventBatch:
    """Rows for the event log, written in one transaction with whatever else is queued."""

    response_id: str
    rows: list[tuple[int, str]]  # (seq, the event as JSON)
    final: str | None = None  # the terminal response object as JSON, when the log ends here
    status: str | None = None  # with `final`, or alone: the end of a response not kept
    release: SessionRelease | None = None  # with `final`: the session the turn held


def batch_ends(batch: EventBatch) -> list[RowUpdate]:
    """The batch's final row, its status, and the session its turn releases."""
    ends = []
    if batch.final is not None:
        ends.append(
            RowUpdate(
                "UPDATE response SET status = ?, final = ?, finished_at = ? WHERE id = ?",
                (batch.status, batch.final, time.time(), batch.response_id),
                ("response", batch.response_id),
            )
        )
    elif batch.status is not None:  # the end of a response not kept: its status, for histories
        ends.append(
            RowUpdate(
                "UPDATE response SET status = ?, finished_at = ?"
                " WHERE id = ? AND status = 'in_progress'",
                (batch.status, time.time(), batch.response_id),
                ("response", batch.response_id),
            )
        )
    if batch.status is not None and batch.release is not None:
        release = batch.release
        ends.append(
            RowUpdate(
                "UPDATE session SET status = ?, updated_at = ?,"
                " native_session_id = COALESCE(?, native_session_id),"
                " active_response_id = CASE WHEN active_response_id = ? THEN NULL"
                " ELSE active_response_id END"
                " WHERE id = ?",
                (
                    batch.status,
                    int(time.time()),
                    release.native_session_id,
                    batch.response_id,
                    release.session_id,
                ),
                ("session", release.session_id),
            )
        )
    return ends


Queued = tuple[EventBatch, "Future[None]"]  # a batch, and what its appender waits on


def group_writes(group: list[Queued]) -> tuple[list[tuple[str, int, str]], list[RowUpdate]]:
    """What one commit of the group writes: its event rows (response, seq, JSON), then each
    batch's ends (`batch_ends`)."""
    rows = [(b.response_id, seq, data) for b, _ in group for seq, data in b.rows]
    return rows, [end for batch, _ in group for end in batch_ends(batch)]


def committed(group: list[Queued]) -> None:
    """Tell the group's appenders that their batches are stored."""
    for _, future in group:
        if future.set_running_or_notify_cancel():
            future.set_result(None)


def failed(group: list[Queued], error: BaseException) -> None:
    """Tell the group's appenders that their batches are not stored, and why."""
    for _, future in group:
        if future.set_running_or_notify_cancel():
            future.set_exception(error)


def events_at_once(
    rows: list[tuple[str, int, str]], updates: list[RowUpdate]
) -> tuple[str, list[Any]] | None:
    """PostgreSQL: the event rows and the updates as one statement of data-modifying CTEs,
    atomic on its own in autocommit: one round trip and one answer, where BEGIN, the
    statements and COMMIT are a pipeline whose machinery costs several times one statement's
    (an empty statement: nothing to write). None when it cannot be one: two updates change
    one row (a statement's CTEs all see the same snapshot, and which of the two wins is
    undefined), or more parameters than the protocol allows in one statement."""
    if len({update.row for update in updates}) < len(updates):
        return None
    if 3 * len(rows) + sum(len(update.params) for update in updates) > MAX_PARAMETERS:
        return None
    parts, params = [], []
    for n, (sql, values) in enumerate(event_inserts(rows)):
        parts.append(f"e{n} AS ({sql})")
        params.extend(values)
    for n, update in enumerate(updates):
        parts.append(f"u{n} AS ({psycopg_style(update.sql)})")
        params.extend(update.params)
    if not parts:
        return "", []
    return "WITH " + ", ".join(parts) + " SELECT 1", params


def event_inserts(rows: list[tuple[str, int, str]]) -> Iterator[tuple[str, list[Any]]]:
    """PostgreSQL's multi-row INSERTs of events, EVENT_ROWS_PER_INSERT rows each."""
    for start in range(0, len(rows), EVENT_ROWS_PER_INSERT):
        chunk = rows[start : start + EVENT_ROWS_PER_INSERT]
        values = ", ".join(["(%s, %s, %s)"] * len(chunk))
        yield _INSERT_EVENTS + values, [field for row in chunk for field in row]
