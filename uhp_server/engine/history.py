"""A session's history (Sessions §3): its turns, oldest first, as stored or as they run now.

`/turns` and the shared page both read this, so they show the same thing. A response that
was deleted is left out; one created with `store: false` appears with its id and status
only, since its content was never kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from storage import artifacts as artifact_store
from storage import responses as response_store
from storage import session_listing
from storage.tables import ArtifactRow, ResponseRow
from storage.unit import Tx
from uhp_server.engine.fold import fold
from uhp_server.engine.runs import RunManager


@dataclass
class Turn:
    row: ResponseRow
    response: dict[str, Any] | None  # None: not retained (store: false)
    artifacts: list[ArtifactRow]


def response_now(tx: Tx, runs: RunManager, row: ResponseRow) -> dict[str, Any] | None:
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


def session_turns(tx: Tx, runs: RunManager, session_id: str) -> list[Turn]:
    by_response: dict[str, list[ArtifactRow]] = {}
    for artifact in artifact_store.for_session(tx, session_id):
        by_response.setdefault(artifact.response_id, []).append(artifact)
    return [
        Turn(row, response_now(tx, runs, row), by_response.get(row.id, []))
        for row in session_listing.responses_of(tx, session_id)
    ]


def user_text(row: ResponseRow) -> str:
    texts = [
        part.get("text", "")
        for item in row.input_items
        if item.get("role") == "user"
        for part in item.get("content", [])
        if part.get("type") == "input_text"
    ]
    return "\n\n".join(t for t in texts if t)


def attachments(row: ResponseRow) -> list[dict[str, Any]]:
    return [
        {"file_id": part.get("file_id"), "filename": part.get("filename")}
        for item in row.input_items
        for part in item.get("content", [])
        if part.get("type") in ("input_file", "input_image")
    ]


def assistant_text(response: dict[str, Any]) -> str:
    texts = [
        part.get("text", "")
        for item in response.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
    ]
    return "\n\n".join(t for t in texts if t)


def tool_calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    """Each function call with its output (None while it runs), in call order."""
    outputs = {
        item.get("call_id"): item
        for item in response.get("output", [])
        if item.get("type") == "function_call_output"
    }
    calls = []
    for item in response.get("output", []):
        if item.get("type") != "function_call":
            continue
        result = outputs.get(item.get("call_id"))
        calls.append(
            {
                "call_id": item.get("call_id"),
                "name": item.get("name"),
                "arguments": item.get("arguments"),
                "output": result.get("output") if result else None,
                "status": result.get("status") if result else item.get("status"),
            }
        )
    return calls


def turn_item(turn: Turn) -> dict[str, Any]:
    """The protocol's TurnItem."""
    response = turn.response
    item: dict[str, Any] = {
        "id": turn.row.id,
        "status": response["status"] if response else turn.row.status,
        "created_at": turn.row.created_at,
    }
    if response is None:
        return item
    item.update(
        user=user_text(turn.row),
        assistant=assistant_text(response),
        tools=tool_calls(response),
        files=[artifact_store.to_wire(a) for a in turn.artifacts],
        attachments=attachments(turn.row),
        model=response.get("model"),
        error=response.get("error"),
    )
    return item
