"""A version of a record as one mem0 memory: its text (what is embedded) and its metadata.

mem0 keeps a memory as a text, its vector and a payload; it overwrites a memory in place when
it is updated. The chapter never overwrites (§5.3), so the adapter keeps every *version* of a
record as a mem0 memory of its own, and the chain in the payload: the record's id, the
version's number and status, when it was written and closed, and the record as written.
"""

from __future__ import annotations

import json
from typing import Any

from uhp_server.memories.provider import NewRecord, Version
from uhp_server.memories.records import Writer

# Payload keys of our own, beside mem0's (data, hash, created_at, user_id, ...).
RECORD = "uhp_record"
VERSION = "uhp_version"
STATUS = "uhp_status"
TYPE = "uhp_type"
WRITTEN_AT = "uhp_written_at_ms"
INVALIDATED_AT = "uhp_invalidated_at_ms"
SUPERSEDES = "uhp_supersedes"
BODY = "uhp_body"
# mem0's own: the memory a version belongs to is its user_id (the scope mem0 filters by).
MEMORY = "user_id"


def text_of(record: NewRecord) -> str:
    """What mem0 embeds: the title and every text part; a part of another kind as JSON, so a
    record without text is still found by what it holds."""
    parts = [record.title] if record.title else []
    for part in record.content:
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(json.dumps(part, sort_keys=True))
    return "\n".join(p for p in parts if p.strip()) or record.type


def metadata_of(
    record_id: str, version: int, record: NewRecord, written_at_ms: int, supersedes: int | None
) -> dict[str, Any]:
    return {
        RECORD: record_id,
        VERSION: version,
        STATUS: "active",
        TYPE: record.type,
        WRITTEN_AT: written_at_ms,
        INVALIDATED_AT: None,
        SUPERSEDES: supersedes,
        BODY: {
            "title": record.title,
            "content": record.content,
            "attributes": record.attributes,
            "references": record.references,
            "valid_from": record.valid_from,
            "valid_to": record.valid_to,
            "written_by": record.written_by.to_json(),
        },
    }


def version_of(payload: dict[str, Any]) -> Version:
    body = payload[BODY]
    writer = body.get("written_by") or {}
    return Version(
        id=payload[RECORD],
        memory_id=payload[MEMORY],
        version=int(payload[VERSION]),
        status=payload[STATUS],
        supersedes=payload.get(SUPERSEDES),
        written_at_ms=int(payload[WRITTEN_AT]),
        invalidated_at_ms=payload.get(INVALIDATED_AT),
        record=NewRecord(
            memory_id=payload[MEMORY],
            type=payload[TYPE],
            title=body.get("title"),
            content=list(body.get("content") or []),
            attributes=dict(body.get("attributes") or {}),
            references=list(body.get("references") or []),
            valid_from=body.get("valid_from"),
            valid_to=body.get("valid_to"),
            written_by=Writer(
                kind=str(writer.get("kind", "")),
                id=str(writer.get("id", "")),
                type=writer.get("type"),
            ),
        ),
    )


def held_at(payload: dict[str, Any], instant: int) -> bool:
    """The version the memory held at `instant`: written by then, not yet closed."""
    closed = payload.get(INVALIDATED_AT)
    return int(payload[WRITTEN_AT]) <= instant and (closed is None or closed > instant)


def is_current(payload: dict[str, Any], include_forgotten: bool) -> bool:
    status = payload[STATUS]
    return status == "active" or (include_forgotten and status == "forgotten")
