"""Reading sessions back: pages of a principal's sessions and the responses of one session.

Pages are ordered by (created_at, id), newest first. Both never change for a session, so a
cursor taken from one page still points at the same place however sessions run meanwhile:
ordering by last activity would let a session that took a new turn jump pages and be listed
twice or not at all. A session's id begins with the millisecond it was made
(ids.new_time_ordered_id), so sessions made within one second (created_at's resolution) are
still listed newest first.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, func, or_
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
    return list(tx.orm.exec(_in_turn_order(select(ResponseRow), session_id)))


def _in_turn_order(query: Any, session_id: str) -> Any:
    return query.where(
        ResponseRow.session_id == session_id, col(ResponseRow.deleted_at).is_(None)
    ).order_by(
        col(ResponseRow.created_at),
        col(ResponseRow.finished_at).is_(None),
        col(ResponseRow.finished_at),
        col(ResponseRow.id),
    )


def response_count(tx: Tx, session_id: str) -> int:
    """How many responses of the session still exist: its turns."""
    query = select(func.count()).where(
        ResponseRow.session_id == session_id, col(ResponseRow.deleted_at).is_(None)
    )
    return int(tx.orm.exec(query).one())


def responses_slice(tx: Tx, session_id: str, offset: int, limit: int) -> list[ResponseRow]:
    """`limit` of the session's responses from the `offset`-th (0: its first), in turn order.
    The order is found over ids and times alone, then only those rows are read whole: a
    long session's every response and final object is never read for one page of it."""
    ids = list(
        tx.orm.exec(_in_turn_order(select(ResponseRow.id), session_id).offset(offset).limit(limit))
    )
    if not ids:
        return []
    found = {
        row.id: row for row in tx.orm.exec(select(ResponseRow).where(col(ResponseRow.id).in_(ids)))
    }
    return [found[i] for i in ids if i in found]


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
