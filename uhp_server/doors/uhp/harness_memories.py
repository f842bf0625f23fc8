"""Memories chapter §9: a harness's agent and its memories, `GET`/`PUT
/v1/harnesses/{id}/memories`. Served with the chapter (UHP_MEMORIES=preview). Parsing and
shapes only: the logic is the engine's (`engine.agent_memories`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends

from uhp_server.doors.deps import EngineDep
from uhp_server.doors.uhp.memories import keepable_body
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.strict_json import StrictJsonRoute
from uhp_server.memories.records import HarnessMemories

router = APIRouter(route_class=StrictJsonRoute, dependencies=[Depends(keepable_body)])

JsonObject = Annotated[dict[str, Any], Body()]
NOTICE_FIELD = "uhpserver_notice"


def harness_memories_to_wire(settings: HarnessMemories) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "object": "harness.memories",
        "principal": settings.principal,
        "default_memory_id": settings.default_memory_id,
        "observe": settings.observe,
        "data": [
            {"id": m.id, "name": m.name, "privileges": m.privileges, "default": m.default}
            for m in settings.data
        ],
    }
    # §9.1's notice, where turns leave the server (a field of ours: the chapter names none).
    if settings.notice is not None:
        wire[NOTICE_FIELD] = settings.notice
    return wire


@router.get("/v1/harnesses/{harness_id}/memories")
async def get_harness_memories(
    harness_id: str, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    settings = await engine.agent_memories.settings(principal.id, harness_id)
    return harness_memories_to_wire(settings)


@router.put("/v1/harnesses/{harness_id}/memories")
async def put_harness_memories(
    harness_id: str, body: JsonObject, principal: CurrentPrincipal, engine: EngineDep
) -> dict[str, Any]:
    settings = await engine.agent_memories.configure(principal.id, harness_id, body)
    return harness_memories_to_wire(settings)
