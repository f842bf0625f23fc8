"""The memories the principal can see, in the console: the tree (and making a memory), a
memory's page with its parent and children, its grants (listed, given, revoked), its records
(written; each with its versions, revised or forgotten) and a recall box that asks the
memory a question and shows each answer with where it is, and what the answer says of
itself (`degraded`, `abstain`).

Every call is the one the `/v1/memories` routes make (`engine.memories`), as the member the
visitor's key belongs to: a memory it holds nothing on is the engine's `memory_not_found`,
the same 404 page as one that is not there. Served, as the chapter's routes are, unless the
operator turns the chapter off (UHP_MEMORIES=off)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.memories import caller_of
from uhp_server.doors.uhp.share_page.render import when
from uhp_server.engine import Engine
from uhp_server.errors import ApiError
from uhp_server.memories.content import CORE
from uhp_server.memories.records import Memory, MemoryRecord, RecallResult

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

MEMORIES = PREFIX + "/memories"
PRIVILEGES = ("read", "write", "create", "delete")
MAX_QUESTION = 2000
RECORDS_SHOWN = 100  # a page of the memory's records (the chapter's own cap is 200)
# The memories on the tree page: where one enters and their children; the rest through the
# API (`GET /v1/memories`, `?parent=`), and each memory's page lists its children.
TREE_SHOWN = 500
MAX_ID = 200  # a memory id named in a link (longer is no memory)


def memory_url(memory_id: str) -> str:
    return f"{MEMORIES}/{memory_id}"


def record_url(memory_id: str, record_id: str) -> str:
    return f"{memory_url(memory_id)}/records/{record_id}"


@dataclass
class Node:
    """A memory in the tree as the page draws it: its children nested under it."""

    memory: Memory
    children: list[Node] = field(default_factory=list)


# -- the tree -------------------------------------------------------------------------------
async def visible(engine: Engine, visitor: Visitor) -> tuple[list[Memory], bool]:
    """Where the visitor enters the tree and each entry's children, at most `TREE_SHOWN`
    (one call, whatever lies deeper: a memory's page lists its own children), and whether
    some were left out."""
    return await engine.memories.overview(caller_of(visitor.principal), TREE_SHOWN)


def tree_of(memories: list[Memory]) -> list[Node]:
    """The memories as a forest: a memory whose parent the visitor cannot see is a root."""
    nodes = {m.id: Node(m) for m in sorted(memories, key=lambda m: m.name.lower())}
    roots: list[Node] = []
    for node in nodes.values():
        parent = nodes.get(node.memory.parent_id or "")
        (parent.children if parent else roots).append(node)
    return roots


@router.get(MEMORIES)
async def memory_tree(request: Request, engine: EngineDep) -> Response:
    visitor = await guard.visitor(request)
    memories, left_out = await visible(engine, visitor)
    parent_id = request.query_params.get("parent", "")
    creatable = [m for m in memories if "create" in m.privileges]
    if parent_id and all(m.id != parent_id for m in memories):
        creatable.extend(await _deeper_parent(engine, visitor, parent_id))
    return page(
        "memories.html",
        visitor=visitor,
        section="memories",
        roots=tree_of(memories),
        left_out=left_out,
        shown=TREE_SHOWN,
        parents=sorted(creatable, key=lambda m: m.name.lower()),
        parent_id=parent_id,
    )


async def _deeper_parent(engine: Engine, visitor: Visitor, memory_id: str) -> list[Memory]:
    """The memory a "Make a memory inside it" link names, when the tree does not draw it
    (deeper than an entry's children) and the visitor may create in it; else nothing."""
    if len(memory_id) > MAX_ID:
        return []
    try:
        memory = await engine.memories.get(caller_of(visitor.principal), memory_id)
    except ApiError:  # not there, or not the visitor's to see: the form offers the rest
        return []
    return [memory] if "create" in memory.privileges else []


@router.post(MEMORIES)
async def create_memory(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    body: dict[str, Any] = {
        "name": fields.get("name", "").strip(),
        "description": fields.get("description", "").strip(),
        "restricted": fields.get("restricted") == "on",
    }
    if parent := fields.get("parent_id", "").strip():
        body["parent_id"] = parent
    created = await engine.memories.create(caller_of(visitor.principal), body)
    return see_other(memory_url(created.id))


# -- one memory -----------------------------------------------------------------------------
@router.get(MEMORIES + "/{memory_id}")
async def memory_page(
    memory_id: str,
    request: Request,
    engine: EngineDep,
    q: Annotated[str, Query(max_length=MAX_QUESTION)] = "",
    by: Annotated[list[str] | None, Query()] = None,
    include: str = "",
) -> Response:
    """The memory; with `q`, the recall box's question asked of it (`by`: `text`, words,
    and/or `query`, meaning; words when neither is said)."""
    visitor = await guard.visitor(request)
    caller = caller_of(visitor.principal)
    memory = await engine.memories.get(caller, memory_id)
    children = await engine.memories.listing(caller, parent=memory.id)
    grants = None
    if "delete" in memory.privileges:  # a memory's grants are read by who may change them
        grants = await engine.memories.grants(caller, memory.id)
    shown_all = include == "all"
    records = await engine.memories.records(
        caller, memory.id, include="all" if shown_all else None, limit=RECORDS_SHOWN
    )
    question = q.strip()
    signals = [s for s in by or [] if s in ("text", "query")] or ["text"]
    recalled = None
    if question:
        recalled = await engine.memories.recall(
            caller, memory.id, {signal: question for signal in signals}
        )
    return page(
        "memory.html",
        visitor=visitor,
        section="memories",
        memory=memory,
        parent=await _parent(engine, visitor, memory),
        children=sorted(children, key=lambda m: m.name.lower()),
        grants=grants,
        privileges=PRIVILEGES,
        records=[_record_row(r) for r in records.data],
        more_records=records.next is not None,
        shown_all=shown_all,
        types=[t.type for t in CORE],
        question=question,
        signals=signals,
        recalled=None if recalled is None else _recall_view(recalled),
        may_write="write" in memory.privileges,
    )


async def _parent(engine: Engine, visitor: Visitor, memory: Memory) -> Memory | None:
    """The parent, when the visitor may see it (the engine leaves `parent_id` out when not)."""
    if memory.parent_id is None:
        return None
    try:
        return await engine.memories.get(caller_of(visitor.principal), memory.parent_id)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


def text_of(record: MemoryRecord) -> str:
    """The record's text parts, joined; a file part named by its file name."""
    parts = []
    for part in record.content:
        if part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif part.get("type") == "file":
            parts.append(f"[file {part.get('filename') or part.get('file_id', '')}]")
    return "\n".join(parts)


def _record_row(record: MemoryRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "url": record_url(record.memory_id, record.id),
        "type": record.type,
        "title": record.title or "",
        "text": text_of(record),
        "version": record.version,
        "status": record.status,
        "written": when(record.time.written_at_ms / 1000),
        "attributes": _attributes(record),
    }


def _attributes(record: MemoryRecord) -> str:
    if not record.attributes:
        return ""
    return json.dumps(record.attributes, ensure_ascii=False, sort_keys=True)


def _recall_view(result: RecallResult) -> dict[str, Any]:
    return {
        "hits": [
            {
                **_record_row(hit.record),
                "memory_id": hit.memory_id,
                "memory_name": hit.memory_name,
                "memory_url": memory_url(hit.memory_id),
                "score": "" if hit.score is None else f"{hit.score:.2f}",
                "why": ", ".join(hit.why),
            }
            for hit in result.results
        ],
        "degraded": result.degraded,
        "abstain": result.abstain,
    }


@router.post(MEMORIES + "/{memory_id}/delete")
async def delete_memory(
    memory_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.memories.delete(caller_of(visitor.principal), memory_id)
    return see_other(MEMORIES)


# -- grants ---------------------------------------------------------------------------------
@router.post(MEMORIES + "/{memory_id}/grants")
async def give_grant(
    memory_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """`principal` as the chapter names one (`member:<principal id>`, `group:<id>`); the
    privileges ticked. The engine checks both, and that the visitor may change grants."""
    visitor, fields = await guard.checked_write(request, settings)
    privileges = [p for p in PRIVILEGES if fields.get(f"privilege_{p}") == "on"]
    body = {"principal": fields.get("principal", "").strip(), "privileges": privileges}
    await engine.memories.grant(caller_of(visitor.principal), memory_id, body)
    return see_other(memory_url(memory_id))


@router.post(MEMORIES + "/{memory_id}/grants/{grant_id}/revoke")
async def revoke_grant(
    memory_id: str, grant_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.memories.revoke(caller_of(visitor.principal), memory_id, grant_id)
    return see_other(memory_url(memory_id))


# -- records --------------------------------------------------------------------------------
def _statement(fields: dict[str, str], revising: bool) -> dict[str, Any]:
    """A record as the chapter takes it, from the form: its text (required when writing),
    title, type (writing only: a revision keeps it) and attributes (a JSON object)."""
    body: dict[str, Any] = {}
    text = fields.get("content", "").strip()
    if text or not revising:
        body["content"] = text
    if title := fields.get("title", "").strip():
        body["title"] = title
    if not revising and (kind := fields.get("type", "").strip()):
        body["type"] = kind
    attributes = fields.get("attributes", "").strip()
    if attributes:
        try:
            parsed = json.loads(attributes, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise ApiError(400, "invalid_input", "The attributes are not valid JSON.") from None
        if not isinstance(parsed, dict):
            raise ApiError(400, "invalid_input", "The attributes must be a JSON object.")
        body["attributes"] = parsed
    return body


def _no_constant(name: str) -> NoReturn:
    """JSON has no NaN or Infinity, though Python's parser reads them."""
    raise ValueError(f"{name} is not JSON")


@router.post(MEMORIES + "/{memory_id}/records")
async def remember(
    memory_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    body = _statement(fields, revising=False)
    record = await engine.memories.remember(caller_of(visitor.principal), memory_id, body)
    return see_other(record_url(memory_id, record.id))


@router.get(MEMORIES + "/{memory_id}/records/{record_id}")
async def record_page(
    memory_id: str, record_id: str, request: Request, engine: EngineDep
) -> Response:
    visitor = await guard.visitor(request)
    caller = caller_of(visitor.principal)
    memory = await engine.memories.get(caller, memory_id)
    versions = await engine.memories.history(caller, memory.id, record_id)
    current = versions[-1]
    return page(
        "memory_record.html",
        visitor=visitor,
        section="memories",
        memory=memory,
        record=_record_row(current),
        versions=[_record_row(v) for v in reversed(versions)],
        may_write="write" in memory.privileges and current.status == "active",
        attributes=json.dumps(current.attributes, ensure_ascii=False, indent=2)
        if current.attributes
        else "",
    )


@router.post(MEMORIES + "/{memory_id}/records/{record_id}")
async def revise(
    memory_id: str, record_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """A new version of the record; what the form leaves empty is kept (as `PATCH`)."""
    visitor, fields = await guard.checked_write(request, settings)
    body = _statement(fields, revising=True)
    if not body:
        raise ApiError(400, "invalid_input", "Change the text, the title or the attributes.")
    await engine.memories.revise(caller_of(visitor.principal), memory_id, record_id, body)
    return see_other(record_url(memory_id, record_id))


@router.post(MEMORIES + "/{memory_id}/records/{record_id}/forget")
async def forget(
    memory_id: str, record_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """The record closed: it stays in its history as `forgotten`."""
    visitor, _ = await guard.checked_write(request, settings)
    await engine.memories.forget(caller_of(visitor.principal), memory_id, record_id)
    return see_other(record_url(memory_id, record_id))
