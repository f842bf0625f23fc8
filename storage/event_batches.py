"""What the event log's writers commit: a response's new events, and with its last ones the
final response row and the session its turn held (storage/thread_writer.py's writer, and
storage/loop_writer.py's on PostgreSQL)."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass

from storage.raw_sql import RowUpdate


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
