"""Memories chapter (UHP 2026-10-04): the tree of memories (§2), grants (§3.1), records with
their versions (§4, §5: remember, observe, list, get, history, revise, forget, erase), file
parts and their bytes (§4.3, §7), snapshots (§5.3), recall (§6.1-§6.3), named and free queries
(§6.4, §6.5), the graph (§6.6), the core types (§8) and the providers' capability documents
(§10.2); jobs, extension types' operations and consolidation runs are refused as the chapter
says. Served unless UHP_MEMORIES=off (doors/uhp/chapters.py). Parsing and shapes only: the
chapter is the engine's (`engine.memories`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Request
from fastapi.responses import StreamingResponse

from uhp_server.doors.deps import EngineDep
from uhp_server.engine import Engine, Principal
from uhp_server.errors import ApiError
from uhp_server.files.filenames import content_disposition
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute
from uhp_server.memories.access import Caller
from uhp_server.memories.content import CORE, nul_at
from uhp_server.memories.errors import memory_invalid
from uhp_server.memories.graph import GraphEdge, GraphEnd, MemoryGraph
from uhp_server.memories.provider import Capabilities
from uhp_server.memories.records import (
    Grant,
    Memory,
    MemoryRecord,
    NamedQuery,
    Neighbour,
    RecallResult,
    RecordPage,
    Reference,
)
from uhp_server.memories.snapshots import Snapshot


async def keepable_body(request: Request) -> None:
    """A body holding a NUL character (U+0000) anywhere is refused whole, `422 memory_invalid`
    naming where: no memory keeps one (memories/content.py nul_at)."""
    parsed = getattr(request, "_json", None)  # set by StrictJsonRoute for a JSON body
    if parsed is not None and (where := nul_at(parsed)) is not None:
        raise memory_invalid(
            f"`{where}` holds a NUL character (U+0000), which no memory keeps.", where
        )


router = APIRouter(route_class=StrictJsonRoute, dependencies=[Depends(keepable_body)])

JsonObject = Annotated[dict[str, Any], Body()]
# Every write accepts one (§5.1): a repeat of the same request is given the first answer.
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key")]
MAX_KEY = 255


def caller_of(principal: Principal) -> Caller:
    """A request made with an API key acts as the member the key belongs to (§3): a person.
    An agent's calls (§9) will say `agent`."""
    return Caller(member_id=principal.id, type="human")


async def once(
    request: Request,
    engine: Engine,
    principal: Principal,
    key: str | None,
    body: dict[str, Any] | None,
    write: Callable[[], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """The write, made once per Idempotency-Key: the request is its method, path and body."""
    if key is None:
        return await write()
    if not 0 < len(key) <= MAX_KEY:
        raise ApiError(
            400,
            "invalid_input",
            f"Idempotency-Key must be 1 to {MAX_KEY} characters.",
            param="Idempotency-Key",
        )
    said = json.dumps([request.method, request.url.path, body], sort_keys=True, default=str)
    fingerprint = hashlib.sha256(said.encode()).hexdigest()
    return await engine.memories.replays.once(principal.id, key, fingerprint, write)


# -- shapes -------------------------------------------------------------------------------
def memory_to_wire(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "object": "memory",
        "name": memory.name,
        "description": memory.description,
        "parent_id": memory.parent_id,
        "ancestors": memory.ancestors,
        "restricted": memory.restricted,
        "provider": memory.provider,
        "privileges": memory.privileges,
        "records": {"count": memory.records},
        "children": {"count": memory.children},
        "createdAt": memory.created_at_ms,
        "updatedAt": memory.updated_at_ms,
    }


def grant_to_wire(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id,
        "object": "memory.grant",
        "memory_id": grant.memory_id,
        "principal": grant.principal,
        "privileges": grant.privileges,
        "inherited": grant.inherited,
    }


def _moment(ms: int | None) -> str | None:
    if ms is None:
        return None
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def reference_to_wire(reference: Reference) -> dict[str, Any]:
    if not reference.available:  # nothing else of it: not its meaning, not its memory (§4.2)
        return {"record_id": reference.record_id, "available": False}
    wire: dict[str, Any] = {"memory_id": reference.memory_id, "record_id": reference.record_id}
    if reference.rel is not None:
        wire["rel"] = reference.rel
    wire["available"] = True
    return wire


def record_to_wire(record: MemoryRecord) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "id": record.id,
        "object": "memory.record",
        "memory_id": record.memory_id,
        "type": record.type,
    }
    if record.title is not None:
        wire["title"] = record.title
    wire |= {
        "content": record.content,
        "attributes": record.attributes,
        "version": record.version,
        "status": record.status,
        "supersedes": record.supersedes,
        "time": {
            "valid_from": record.time.valid_from,
            "valid_to": record.time.valid_to,
            "written_at": _moment(record.time.written_at_ms),
            "invalidated_at": _moment(record.time.invalidated_at_ms),
        },
        "written_by": record.written_by.to_json(),
        "references": [reference_to_wire(ref) for ref in record.references],
    }
    if record.follows is not None:
        wire["follows"] = record.follows
    wire["trust"] = "untrusted"  # what a memory returns is data, never instructions (§13)
    return wire


def page_to_wire(page: RecordPage) -> dict[str, Any]:
    return {"object": "list", "data": [record_to_wire(r) for r in page.data], "next": page.next}


def neighbour_to_wire(neighbour: Neighbour) -> dict[str, Any]:
    return {
        "id": neighbour.id,
        "name": neighbour.name,
        "description": neighbour.description,
        "records": {"count": neighbour.records},
    }


def recall_to_wire(result: RecallResult) -> dict[str, Any]:
    """§6.3: `parent` is left out on a root and where the caller may not read it."""
    wire: dict[str, Any] = {
        "object": "memory.recall",
        "results": [
            {
                "record": record_to_wire(hit.record),
                "memory": {"id": hit.memory_id, "name": hit.memory_name},
                "score": hit.score,
                "why": hit.why,
            }
            for hit in result.results
        ],
    }
    if result.parent is not None:
        wire["parent"] = neighbour_to_wire(result.parent)
    wire |= {
        "children": [neighbour_to_wire(kid) for kid in result.children],
        "degraded": result.degraded,
        "abstain": result.abstain,
    }
    return wire


def query_to_wire(query: NamedQuery) -> dict[str, Any]:
    return {
        "object": "memory.query",
        "name": query.name,
        "description": query.description,
        "params": query.params,
        "requires": query.requires,
        "language": query.language,
        "body": query.body,
    }


def provider_to_wire(said: Capabilities) -> dict[str, Any]:
    """A provider's capability document (§10.2), in the chapter's shape."""
    queries: dict[str, Any] = {"named": said.queries.named}
    if said.queries.named:
        queries["languages"] = list(said.queries.languages)
    queries["free"] = (
        {"languages": list(said.queries.free.languages), "write": said.queries.free.write}
        if said.queries.free is not None
        else False
    )
    return {
        "id": said.id,
        "object": "memory.provider",
        "isolation": said.isolation,
        "derivation": said.derivation,
        "observe": {
            "keeps_episodes": said.observe.keeps_episodes,
            "answers": said.observe.answers,
        },
        "recall": {"signals": list(said.recall.signals), "abstain": said.recall.abstain},
        "history": {"content": said.history.content, "structure": said.history.structure},
        "revise": said.revise,
        "forget": said.forget,
        "erase": {"unreachable": said.erase_unreachable},
        "prime": said.prime,
        "consolidate": said.consolidate,
        "queries": queries,
        "types": said.types,
        "graph": {"entities": said.graph_entities},
        "content": {
            "media": list(said.content.media),
            "bytes": said.content.bytes,
            "describes": list(said.content.describes),
        },
    }


def _flag(value: str | None, name: str) -> bool:
    if value in (None, "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise memory_invalid(f"`{name}` is true or false.", name)


def _digits(value: str) -> bool:
    """0-9 only: str.isdigit() is also true of "²", which int() refuses."""
    return value.isascii() and value.isdigit()


def _limit(value: str | None) -> int | None:
    if value is None:
        return None
    if not _digits(value):
        raise memory_invalid("`limit` is a whole number.", "limit")
    return int(value)


# -- the tree (§2) ------------------------------------------------------------------------
@router.get("/v1/memories")
async def list_memories(
    principal: CurrentPrincipal,
    engine: EngineDep,
    parent: str | None = None,
    ancestor: str | None = None,
    granted: str | None = None,
) -> dict[str, Any]:
    memories = await engine.memories.listing(
        caller_of(principal), parent=parent, ancestor=ancestor, granted=_flag(granted, "granted")
    )
    return {"object": "list", "data": [memory_to_wire(m) for m in memories]}


@router.post("/v1/memories")
async def create_memory(
    request: Request,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        return memory_to_wire(await engine.memories.create(caller_of(principal), body))

    return await once(request, engine, principal, key, body, write)


# Before /v1/memories/{memory_id}: no memory's path.
@router.get("/v1/memories/types")
async def list_types(principal: CurrentPrincipal) -> dict[str, Any]:
    """The core types; no provider here registers an extension type yet (§8)."""
    return {
        "object": "list",
        "data": [{"type": t.type, "core": True, "description": t.description} for t in CORE],
    }


@router.get("/v1/memories/providers")
async def list_providers(principal: CurrentPrincipal, engine: EngineDep) -> dict[str, Any]:
    """What each connected provider does (§10.2)."""
    documents = engine.memories.provider_documents()
    return {"object": "list", "data": [provider_to_wire(d) for d in documents]}


@router.get("/v1/memories/{memory_id}")
async def get_memory(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return memory_to_wire(await engine.memories.get(caller_of(principal), memory_id))


@router.put("/v1/memories/{memory_id}")
async def update_memory(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        memory = await engine.memories.update(caller_of(principal), memory_id, body)
        return memory_to_wire(memory)

    return await once(request, engine, principal, key, body, write)


@router.delete("/v1/memories/{memory_id}")
async def delete_memory(
    request: Request,
    memory_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        deleted = await engine.memories.delete(caller_of(principal), memory_id)
        return {
            "id": deleted.id,
            "object": "memory",
            "deleted": True,
            "memories": deleted.memories,
        }

    return await once(request, engine, principal, key, None, write)


# -- grants (§3.1) ------------------------------------------------------------------------
@router.get("/v1/memories/{memory_id}/grants")
async def list_grants(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    grants = await engine.memories.grants(caller_of(principal), memory_id)
    return {"object": "list", "data": [grant_to_wire(g) for g in grants]}


@router.post("/v1/memories/{memory_id}/grants")
async def create_grant(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        return grant_to_wire(await engine.memories.grant(caller_of(principal), memory_id, body))

    return await once(request, engine, principal, key, body, write)


@router.delete("/v1/memories/{memory_id}/grants/{grant_id}")
async def delete_grant(
    request: Request,
    memory_id: str,
    grant_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        await engine.memories.revoke(caller_of(principal), memory_id, grant_id)
        return {"id": grant_id, "object": "memory.grant", "deleted": True}

    return await once(request, engine, principal, key, None, write)


# -- records (§4, §5) ---------------------------------------------------------------------
@router.post("/v1/memories/{memory_id}/observe")
async def observe(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        records = await engine.memories.observe(caller_of(principal), memory_id, body)
        return {"object": "list", "data": [record_to_wire(r) for r in records], "next": None}

    return await once(request, engine, principal, key, body, write)


@router.get("/v1/memories/{memory_id}/records")
async def list_records(
    memory_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    type: str | None = None,
    include: str | None = None,
    as_of: str | None = None,
    limit: str | None = None,
    cursor: str | None = None,
) -> dict[str, Any]:
    page = await engine.memories.records(
        caller_of(principal),
        memory_id,
        type=type,
        include=include,
        as_of=as_of,
        limit=_limit(limit),
        cursor=cursor,
    )
    return page_to_wire(page)


@router.post("/v1/memories/{memory_id}/records")
async def remember(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        record = await engine.memories.remember(caller_of(principal), memory_id, body)
        return record_to_wire(record)

    return await once(request, engine, principal, key, body, write)


@router.get("/v1/memories/{memory_id}/records/{record_id}")
async def get_record(
    memory_id: str,
    record_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    as_of: str | None = None,
) -> dict[str, Any]:
    record = await engine.memories.record(caller_of(principal), memory_id, record_id, as_of)
    return record_to_wire(record)


@router.patch("/v1/memories/{memory_id}/records/{record_id}")
async def revise(
    request: Request,
    memory_id: str,
    record_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        record = await engine.memories.revise(caller_of(principal), memory_id, record_id, body)
        return record_to_wire(record)

    return await once(request, engine, principal, key, body, write)


@router.delete("/v1/memories/{memory_id}/records/{record_id}")
async def forget(
    request: Request,
    memory_id: str,
    record_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        record = await engine.memories.forget(caller_of(principal), memory_id, record_id)
        return record_to_wire(record)

    return await once(request, engine, principal, key, None, write)


@router.post("/v1/memories/{memory_id}/erase")
async def erase(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        erasure = await engine.memories.erase(caller_of(principal), memory_id, body)
        return {"erased": erasure.erased, "unreachable": erasure.unreachable}

    return await once(request, engine, principal, key, body, write)


@router.get("/v1/memories/{memory_id}/records/{record_id}/history")
async def history(
    memory_id: str, record_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    versions = await engine.memories.history(caller_of(principal), memory_id, record_id)
    return {"object": "list", "data": [record_to_wire(v) for v in versions], "next": None}


# -- recall (§6) --------------------------------------------------------------------------
@router.post("/v1/memories/{memory_id}/recall")
async def recall(
    memory_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    result = await engine.memories.recall(caller_of(principal), memory_id, body)
    return recall_to_wire(result)


# -- named and free queries (§6.4, §6.5) --------------------------------------------------
@router.get("/v1/memories/{memory_id}/queries")
async def list_queries(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    queries = await engine.memories.queries(caller_of(principal), memory_id)
    return {"object": "list", "data": [query_to_wire(q) for q in queries]}


@router.put("/v1/memories/{memory_id}/queries/{name}")
async def define_query(
    request: Request,
    memory_id: str,
    name: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        query = await engine.memories.define_query(caller_of(principal), memory_id, name, body)
        return query_to_wire(query)

    return await once(request, engine, principal, key, body, write)


@router.post("/v1/memories/{memory_id}/queries/{name}")
async def run_query(
    memory_id: str, name: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    result = await engine.memories.run_query(caller_of(principal), memory_id, name, body)
    return recall_to_wire(result)


@router.post("/v1/memories/{memory_id}/query")
async def free_query(
    memory_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    await engine.memories.free_query(caller_of(principal), memory_id, body)  # always refuses


# -- the graph (§6.6) ---------------------------------------------------------------------
def graph_to_wire(graph: MemoryGraph) -> dict[str, Any]:
    def end(point: GraphEnd) -> dict[str, Any]:
        if point.memory_id is None:  # the far end of an edge the reader may not follow
            return {"record_id": point.record_id}
        return {"memory_id": point.memory_id, "record_id": point.record_id}

    def edge(e: GraphEdge) -> dict[str, Any]:
        wire: dict[str, Any] = {"from": end(e.source), "to": end(e.target)}
        if e.rel is not None:
            wire["rel"] = e.rel
        wire["available"] = e.available
        return wire

    return {
        "object": "memory.graph",
        "nodes": [
            {
                "record": record_to_wire(node.record),
                "memory": {"id": node.memory_id, "name": node.memory_name},
            }
            for node in graph.nodes
        ],
        "edges": [edge(e) for e in graph.edges],
        "truncated": graph.truncated,
        "degraded": graph.degraded,
    }


@router.post("/v1/memories/{memory_id}/graph")
async def graph(
    memory_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return graph_to_wire(await engine.memories.graph(caller_of(principal), memory_id, body))


# -- file parts (§4.3, §7) ----------------------------------------------------------------
# What a memory holds was written by others: never sniffed, never rendered in place.
CONTENT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "private, no-store",
    "Referrer-Policy": "no-referrer",
}


@router.get("/v1/memories/{memory_id}/records/{record_id}/content/{index}")
async def record_content(
    memory_id: str,
    record_id: str,
    index: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    as_of: str | None = None,
    version: str | None = None,
) -> StreamingResponse:
    if not _digits(index) or len(index) > 6:
        raise memory_invalid("`index` is the place of a part in the content, from 0.", "index")
    if version is not None and (not _digits(version) or len(version) > 9):
        raise memory_invalid("`version` is a version's number, from 1.", "version")
    part = await engine.memories.content(
        caller_of(principal),
        memory_id,
        record_id,
        int(index),
        as_of=as_of,
        version=None if version is None else int(version),
    )
    headers = {
        **CONTENT_HEADERS,
        "Content-Disposition": content_disposition(part.name),
        "Content-Length": str(part.size),
    }
    return StreamingResponse(part.chunks, media_type=part.media_type, headers=headers)


# -- snapshots (§5.3) ---------------------------------------------------------------------
def snapshot_to_wire(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "id": snapshot.id,
        "object": "memory.snapshot",
        "memory_id": snapshot.memory_id,
        "name": snapshot.name,
        "message": snapshot.message,
        "at": _moment(snapshot.at_ms),  # read `as_of` it: the memory as it stood then
        "written_by": snapshot.written_by.to_json(),
    }


@router.post("/v1/memories/{memory_id}/snapshots")
async def create_snapshot(
    request: Request,
    memory_id: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
    key: IdempotencyKey = None,
) -> dict[str, Any]:
    async def write() -> dict[str, Any]:
        taken = await engine.memories.snapshot(caller_of(principal), memory_id, body)
        return snapshot_to_wire(taken)

    return await once(request, engine, principal, key, body, write)


@router.get("/v1/memories/{memory_id}/snapshots")
async def list_snapshots(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    taken = await engine.memories.snapshots(caller_of(principal), memory_id)
    return {"object": "list", "data": [snapshot_to_wire(s) for s in taken]}


# -- jobs (§5.1), operations (§8), consolidation runs (§9.2): refused honestly -------------
@router.get("/v1/memories/{memory_id}/jobs/{job_id}")
async def get_job(
    memory_id: str, job_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    await engine.memories.job(caller_of(principal), memory_id, job_id)
    raise AssertionError("a job is never found here")  # job() raises


@router.post("/v1/memories/{memory_id}/records/{record_id}/operations/{name}")
async def operate(
    memory_id: str,
    record_id: str,
    name: str,
    body: JsonObject,
    principal: CurrentPrincipal,
    engine: EngineDep,
) -> dict[str, Any]:
    await engine.memories.operate(caller_of(principal), memory_id, record_id, name)
    raise AssertionError("no operation is offered here")  # operate() raises


async def _no_consolidation(engine: Engine, principal: Principal, memory_id: str) -> Any:
    await engine.memories.consolidation(caller_of(principal), memory_id)
    raise AssertionError("no consolidation is run here")  # consolidation() raises


@router.get("/v1/memories/{memory_id}/consolidations")
async def list_consolidations(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await _no_consolidation(engine, principal, memory_id)


@router.post("/v1/memories/{memory_id}/consolidations")
async def start_consolidation(
    memory_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await _no_consolidation(engine, principal, memory_id)


@router.get("/v1/memories/{memory_id}/consolidations/{run_id}")
async def get_consolidation(
    memory_id: str, run_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await _no_consolidation(engine, principal, memory_id)


@router.get("/v1/memories/{memory_id}/consolidations/{run_id}/changes")
async def consolidation_changes(
    memory_id: str, run_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await _no_consolidation(engine, principal, memory_id)


@router.post("/v1/memories/{memory_id}/consolidations/{run_id}/revert")
async def revert_consolidation(
    memory_id: str, run_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    return await _no_consolidation(engine, principal, memory_id)
