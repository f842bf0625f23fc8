"""Reading sessions back: pages of a principal's sessions and the responses of one session.

Pages are ordered by (created_at, id), newest first. Both never change for a session, so a
cursor taken from one page still points at the same place however sessions run meanwhile:
ordering by last activity would let a session that took a new turn jump pages and be listed
twice or not at all.
"""

from __future__ import annotations

import time

from sqlalchemy import and_, or_
from sqlmodel import col, select

from storage.tables import ResponseRow, SessionRow
from storage.unit import Tx


def page(
    tx: Tx,
    principal_id: str,
    limit: int,
    after: tuple[int, str] | None = None,
    harness_id: str | None = None,
    status: str | None = None,
    text: str | None = None,
) -> tuple[list[SessionRow], bool]:
    """Up to `limit` sessions after the (created_at, id) position; and whether more follow.
    Only those of `harness_id`, in `status`, whose title holds `text` (any case), when given."""
    query = select(SessionRow).where(
        SessionRow.principal_id == principal_id, col(SessionRow.deleted_at).is_(None)
    )
    if harness_id is not None:
        query = query.where(SessionRow.harness_id == harness_id)
    if status is not None:
        query = query.where(SessionRow.status == status)
    if text:
        query = query.where(col(SessionRow.title).ilike(f"%{_like_escaped(text)}%", escape="\\"))
    if after is not None:
        created_at, session_id = after
        query = query.where(
            or_(
                col(SessionRow.created_at) < created_at,
                and_(col(SessionRow.created_at) == created_at, col(SessionRow.id) < session_id),
            )
        )
    query = query.order_by(col(SessionRow.created_at).desc(), col(SessionRow.id).desc())
    rows = list(tx.orm.exec(query.limit(limit + 1)))  # one extra row says whether more follow
    return rows[:limit], len(rows) > limit


def _like_escaped(text: str) -> str:
    """`text` matched as it is: LIKE's wildcards and its escape character taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def responses_of(tx: Tx, session_id: str) -> list[ResponseRow]:
    """The session's responses that still exist, in the order they were created.

    A session's turns never overlap: each ends (finished_at) before the next is created, and
    only the last can still be running (no finished_at). created_at has one-second
    resolution, so within one second the finish time orders them, the running one last."""
    query = (
        select(ResponseRow)
        .where(ResponseRow.session_id == session_id, col(ResponseRow.deleted_at).is_(None))
        .order_by(
            col(ResponseRow.created_at),
            col(ResponseRow.finished_at).is_(None),
            col(ResponseRow.finished_at),
            col(ResponseRow.id),
        )
    )
    return list(tx.orm.exec(query))


def all_response_ids(tx: Tx, session_id: str) -> list[str]:
    """Every response id of the session, deleted ones included (for purging a trace)."""
    return list(tx.orm.exec(select(ResponseRow.id).where(ResponseRow.session_id == session_id)))


def record_status(tx: Tx, response_id: str, status: str) -> None:
    """The terminal status of a response whose content is not kept (store: false): a
    history lists the turn as finished without holding anything of what it said."""
    row = tx.orm.get(ResponseRow, response_id)
    if row is not None and row.status == "in_progress":
        row.status = status
        row.finished_at = time.time()  # orders it among the session's turns
        tx.orm.add(row)
