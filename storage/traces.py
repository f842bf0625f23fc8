"""The database side of deleting a session's trace (Sessions §6): nothing readable is left."""

from __future__ import annotations

import time

from sqlmodel import col, select

from storage.tables import FileRow, ResponseRow, SessionRow
from storage.unit import Tx


def forget_session(tx: Tx, session_id: str) -> None:
    """Mark the session deleted and drop its title (it quotes the first prompt)."""
    row = tx.orm.get(SessionRow, session_id)
    if row is None:
        return
    row.deleted_at = row.deleted_at or time.time()
    row.title = ""
    tx.orm.add(row)


def inline_inputs(tx: Tx, session_id: str) -> list[FileRow]:
    """The File objects created for files the session's tasks sent inline (not uploads,
    which are the principal's own objects and outlive any one session)."""
    s = tx.orm
    items = s.exec(select(ResponseRow.input_items).where(ResponseRow.session_id == session_id))
    ids = {
        part.get("file_id")
        for input_items in items
        for item in input_items or []
        for part in item.get("content", [])
        if isinstance(part, dict) and part.get("file_id")
    }
    if not ids:
        return []
    return list(s.exec(select(FileRow).where(col(FileRow.id).in_(ids), FileRow.purpose == "input")))


def delete_files(tx: Tx, file_ids: list[str]) -> None:
    s = tx.orm
    for row in s.exec(select(FileRow).where(col(FileRow.id).in_(file_ids))):
        row.deleted_at = time.time()
        s.add(row)
