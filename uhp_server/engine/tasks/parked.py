"""Cancelling a parked task: its open questions are withdrawn.

A parked turn already ended (`incomplete`, reason `input_required`) and its log cannot take
another event, yet a door must see the task end `cancelled`. So the cancel closes the
session's conversation with one more turn that never runs: a `cancelled` response after the
parked one, which the session's history and every door then read as the task's outcome.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from storage import responses as response_store
from storage import session_listing
from storage.db import Database
from storage.tables import ResponseRow
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.engine.turns.eventlog import EventLog
from uhp_server.ids import new_id


async def withdraw_parked(
    db: Database, parked: ResponseRow, response: dict[str, Any], *, replica_id: str | None = None
) -> str:
    """Record the closing `cancelled` turn after `parked`; returns its response id (of the
    one turn after it: cancels that overlap, a client's retry on another replica, close it
    once). `replica_id`: the replica writing it (no other replica's sweep then ends it
    meanwhile)."""
    response_id, now = new_id("response"), int(time.time())
    row = ResponseRow(
        id=response_id,
        principal_id=parked.principal_id,
        session_id=parked.session_id,
        previous_response_id=parked.id,
        status="in_progress",
        store=parked.store,
        model=parked.model,
        created_at=now,
        input_items=[],
        replica_id=replica_id,
    )
    successor = await db.write(response_store.insert_successor, row)
    if successor != response_id:  # another cancel closes it: its end is the answer
        await _until_finished(db, parked.principal_id, successor)
        return successor
    closing = {
        "id": response_id,
        "object": "response",
        "created_at": now,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "previous_response_id": parked.id,
        "model": parked.model,
        "output": [],
        "store": parked.store,
        "usage": None,
        "metadata": dict(response.get("metadata") or {}),
        "instructions": None,
        "background": False,
        "max_output_tokens": None,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }
    builder = ResponseBuilder(closing)
    log = EventLog(db, response_id, persist=parked.store)
    await log.append([*builder.created(), *builder.finish(TaskStatus.CANCELLED)])
    if not parked.store:  # nothing of it is kept but its end, which histories list
        await db.write(session_listing.record_status, response_id, "cancelled")
    return response_id


async def _until_finished(
    db: Database, principal_id: str, response_id: str, timeout: float = 5.0
) -> None:
    """Until the response's closing turn is written (the racing cancel writes it at once)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        row = await db.read(response_store.get_response, principal_id, response_id)
        if row is None or row.status != "in_progress":
            return
        await asyncio.sleep(0.02)
