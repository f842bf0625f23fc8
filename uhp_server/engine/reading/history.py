"""A turn as it stands: live from its run, else its stored final form; and what its user said.

A response that was deleted is left out of a session's history; one created with
`store: false` appears with its id and status only, since its content was never kept
(facade/sessions.py reads a session's turns with these).
"""

from __future__ import annotations

from typing import Any

from storage import responses as response_store
from storage.tables import ResponseRow
from storage.unit import Tx
from uhp_server.engine.reading.fold import fold
from uhp_server.engine.turns.registry import RunRegistry


def response_now(tx: Tx, runs: RunRegistry, row: ResponseRow) -> dict[str, Any] | None:
    """The response as it stands: live from its run, else its stored final form."""
    run = runs.get(row.id)
    if run is not None and (row.store or not run.log.finished):
        return run.log.current()
    if row.final is not None:
        return row.final
    if row.store:
        events = response_store.events_after(tx, row.id)
        if events:
            return fold(events)
    return None


def user_text(input_items: list[dict[str, Any]]) -> str:
    """What the user said in a task's input: its text parts, in order."""
    texts = [
        part.get("text", "")
        for item in input_items
        if item.get("role") == "user"
        for part in item.get("content", [])
        if part.get("type") == "input_text"
    ]
    return "\n\n".join(t for t in texts if t)
