"""Tasks chapter: run a task, read it back, list its input, delete it, cancel it.

The request body is parsed here into the engine's request (`uhp_task`); everything else is
the engine's, read back and rendered in the protocol's shapes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
)

from uhp_server.doors.deps import EngineDep, SettingsDep, StreamsDep
from uhp_server.engine import Accepted, Engine, EngineTask, QuestionPolicy
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal, still_authenticated
from uhp_server.http.sse import sse_response
from uhp_server.http.strict_json import StrictJsonRoute, null_means_default
from uhp_server.settings import Settings

router = APIRouter(route_class=StrictJsonRoute)

# Sequence numbers a client may resume after: far beyond any real stream, and well inside
# SQLite's 64-bit integers.
MAX_SEQUENCE = 10**15

# Request fields this server acts on; anything else a request carries is named in
# metadata.ignored_fields (a silently ignored field is indistinguishable from an honoured one).
HONOURED_FIELDS = frozenset(
    {
        "input",
        "model",
        "metadata",
        "stream",
        "previous_response_id",
        "instructions",
        "store",
        "max_step",
        "timeout_seconds",
        "background",
    }
)
# Fields that do not change what runs, left out of the idempotency fingerprint: a retry
# that switches to streaming is still the same task.
_DELIVERY_FIELDS = ("stream", "background")


class CreateResponseBody(BaseModel):
    """POST /v1/responses. Unknown fields are accepted and reported as ignored (Tasks §1.1)."""

    model_config = ConfigDict(extra="allow")

    input: Any
    model: StrictStr | None = None
    metadata: dict[str, Any] | None = None
    stream: StrictBool = False
    previous_response_id: StrictStr | None = None
    instructions: StrictStr | None = None
    store: StrictBool = True
    max_output_tokens: StrictInt | None = Field(default=None, ge=1)
    max_step: StrictInt | None = Field(default=None, ge=0)
    timeout_seconds: StrictInt | None = Field(default=None, ge=1)
    tools: list[dict[str, Any]] | None = None
    include: list[StrictStr] | None = None
    background: StrictBool = False

    _nulls = field_validator("stream", "store", "background", mode="before")(null_means_default)

    @field_validator("input")
    @classmethod
    def _input_shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return value
        raise ValueError("must be a string or a list of input items")

    @field_validator("metadata")
    @classmethod
    def _harness_id_is_text(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in ("harness_id", "environment", "memory"):  # ids the server acts on
            if value and key in value and not isinstance(value[key], str):
                raise ValueError(f"{key} must be a string")
        return value


# -- the request as the engine's ------------------------------------------------------------
def uhp_task(principal_id: str, body: dict[str, Any]) -> EngineTask:
    """A UHP request body as the engine request (questions: none, as UHP has no pause)."""
    metadata = body.get("metadata") or {}
    return EngineTask(
        principal_id=principal_id,
        harness_id=metadata.get("harness_id"),
        environment=metadata.get("environment") or None,
        memory=metadata.get("memory") or None,
        input=body["input"],
        previous_response_id=body.get("previous_response_id"),
        model=body.get("model"),
        questions=QuestionPolicy.none(),
        timeout_seconds=body.get("timeout_seconds"),
        max_step=body.get("max_step"),
        instructions=body.get("instructions"),
        store=body.get("store", True),
        metadata=metadata,
        max_output_tokens=body.get("max_output_tokens"),
        background=body.get("background", False),
        ignored_fields=tuple(sorted(k for k in body if k not in HONOURED_FIELDS)),
    )


# What an absent field means (the body's own defaults, said once), so a repeat that spells
# out a default is the same request.
_FIELD_DEFAULTS: dict[str, Any] = {
    name: field.default
    for name, field in CreateResponseBody.model_fields.items()
    if not field.is_required() and name not in _DELIVERY_FIELDS
}


def fingerprint(body: dict[str, Any]) -> str:
    """What identifies a request for an idempotent repeat: its body, defaults spelled out,
    without the fields that only change how the answer is delivered."""
    payload = {**_FIELD_DEFAULTS, **body}
    for name in _DELIVERY_FIELDS:
        payload.pop(name, None)
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


async def _deliver(
    engine: Engine,
    settings: Settings,
    principal_id: str,
    accepted: Accepted,
    stream: Callable[[], Awaitable[bool]] | None,
    background: bool,
) -> Any:
    """The answer to `POST /v1/responses`: the new task streamed (`stream`: whether the
    caller may still read it), waited for or as it stands; an idempotent repeat's is its
    first request's response, read back by its id (it may have been deleted since)."""
    await engine.started(accepted.response_id)  # a repeat may find it mid-acceptance
    if accepted.fresh:  # just accepted here: all of it is in memory
        if stream:
            return sse_response(accepted.events(), settings.keepalive_seconds, stream)
        return JSONResponse(await accepted.response(wait=not background))
    if stream:
        events = await engine.events(principal_id, accepted.response_id)
        return sse_response(events, settings.keepalive_seconds, stream)
    return JSONResponse(
        await engine.result(principal_id, accepted.response_id, wait=not background)
    )


# -- routes ------------------------------------------------------------------------------
@router.post("/v1/responses")
async def create_response(
    body: CreateResponseBody,
    request: Request,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    streams: StreamsDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Any:
    if idempotency_key is not None and not 0 < len(idempotency_key) <= 255:
        raise ApiError(
            400,
            "invalid_input",
            "Idempotency-Key must be 1 to 255 characters.",
            param="Idempotency-Key",
        )
    raw = body.model_dump(exclude_unset=True)
    print_ = fingerprint(raw) if idempotency_key else None
    # A stream lasts while the key does (a revoked key's is closed; the task runs on).
    streamed = still_authenticated(request, principal) if body.stream else None

    async def answer() -> Any:
        if idempotency_key and print_:
            existing = await engine.idempotent_response(principal.id, idempotency_key, print_)
            if existing:
                repeat = Accepted.repeat(existing)
                return await _deliver(
                    engine, settings, principal.id, repeat, streamed, body.background
                )
        accepted = await engine.start(
            uhp_task(principal.id, raw),
            idempotency_key=idempotency_key,
            fingerprint=print_,
            base_url=str(request.base_url),  # artifact download_url is absolute, on this origin
        )
        return await _deliver(engine, settings, principal.id, accepted, streamed, body.background)

    if body.stream:  # a place for the stream first: a refused one starts no task
        return await streams.serve(principal.id, answer)
    return await answer()


@router.get("/v1/responses/{response_id}")
async def get_response(
    response_id: str,
    request: Request,
    principal: CurrentPrincipal,
    engine: EngineDep,
    settings: SettingsDep,
    streams: StreamsDep,
    stream: bool = False,
    starting_after: Annotated[int | None, Query(ge=-1, le=MAX_SEQUENCE)] = None,
) -> Any:
    if not stream:
        return await engine.response(principal.id, response_id)
    after = starting_after if starting_after is not None else -1
    last_event_id = request.headers.get("last-event-id")
    if last_event_id is not None:
        if not re.fullmatch(r"[0-9]{1,15}", last_event_id.strip()):
            await engine.check(principal.id, response_id)  # an unknown id is 404 first
            raise ApiError(
                400,
                "invalid_input",
                "Last-Event-ID must be a sequence number.",
                param="Last-Event-ID",
            )
        after = max(after, int(last_event_id))

    async def answer() -> Any:
        events = await engine.events(principal.id, response_id, after)
        allowed = still_authenticated(request, principal)  # closed once the key is revoked
        return sse_response(events, settings.keepalive_seconds, allowed)

    return await streams.serve(principal.id, answer)


@router.get("/v1/responses/{response_id}/input_items")
async def get_input_items(
    response_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
    limit: Annotated[int | None, Query(ge=1, le=100)] = None,
    order: Annotated[Literal["asc", "desc"], Query()] = "asc",
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """Every input item, oldest first, unless the client pages them the way OpenAI's API
    does (`limit`, `order`, `after`: the id of the last item of the page before)."""
    stored = await engine.input_items(principal.id, response_id)
    items = stored if order == "asc" else stored[::-1]
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise ApiError(400, "invalid_input", "No input item with that id.", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit] if limit is not None else items
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(page) < len(items),
    }


@router.delete("/v1/responses/{response_id}")
async def delete_response(
    response_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
) -> dict[str, Any]:
    deleted = await engine.delete_response(principal.id, response_id)  # never cancels
    return {"id": deleted, "object": "response.deleted", "deleted": True}


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(
    response_id: str,
    principal: CurrentPrincipal,
    engine: EngineDep,
) -> dict[str, Any]:
    """Idempotent: a finished task is left as it was (Sessions §4). The answer is the
    cancelled response itself, as its reader may see it now."""
    return (await engine.cancel(principal.id, response_id)).cancelled
