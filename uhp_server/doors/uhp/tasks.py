"""Tasks chapter: run a task, read it back, list its input, delete it, cancel it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
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

from storage import responses as response_store
from storage.tables import Principal, ResponseRow
from storage.unit import Tx
from uhp_server.context import AppContext, Ctx
from uhp_server.engine import reading
from uhp_server.engine.run import Run
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.sse import sse_response
from uhp_server.http.strict_json import StrictJsonRoute, null_means_default

router = APIRouter(route_class=StrictJsonRoute)

# Sequence numbers a client may resume after: far beyond any real stream, and well inside
# SQLite's 64-bit integers.
MAX_SEQUENCE = 10**15


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
        if value and "harness_id" in value and not isinstance(value["harness_id"], str):
            raise ValueError("harness_id must be a string")
        return value


# -- helpers -----------------------------------------------------------------------------
def _row_or_404(tx: Tx, ctx: AppContext, principal: Principal, response_id: str) -> ResponseRow:
    row = response_store.get_response(tx, principal.id, response_id)
    if row is None:
        raise ApiError(404, "response_not_found", "No response with that id.")
    return row


async def current_response(
    ctx: AppContext, row: ResponseRow, *, replay: bool = False
) -> dict[str, Any]:
    """From the run in memory, else read (stored events are folded) on a reader thread."""
    live = reading.live_response(ctx.runs, row, replay=replay)
    if live is not None:
        return live
    return await ctx.db.read(reading.current_response, ctx.runs, row, replay)


def _events(ctx: AppContext, row: ResponseRow, after: int) -> AsyncIterator[dict[str, Any]]:
    return reading.follow_events(ctx.db, ctx.runs, row, after)


async def _deliver(
    ctx: AppContext,
    principal: Principal,
    response_id: str,
    stream: bool,
    background: bool,
    fresh: Run | None = None,
) -> Any:
    await ctx.tasks.started(response_id)  # an idempotent repeat may find it mid-acceptance
    if fresh is not None:
        # Just accepted here: all of it is in memory. (A repeat reads the row: the response
        # may have been deleted since.)
        run = fresh
        if stream:
            return sse_response(run.log.follow(), ctx.settings.keepalive_seconds)
        if not background:
            await run.log.wait_finished()
        return JSONResponse(run.log.current())
    row = await ctx.db.read(_row_or_404, ctx, principal, response_id)
    if not _readable(ctx, row):
        # A repeat after a `store: false` task ended: its result is what was retained, the
        # id and status without the content (Tasks §6 wants the first result; §4 lets the
        # content go); there are no events left to stream.
        if stream:
            raise _not_retained()
        return JSONResponse(reading.unretained_response(row))
    if stream:
        return sse_response(_events(ctx, row, -1), ctx.settings.keepalive_seconds)
    run = ctx.runs.get(row.id)
    if run is not None and not background:
        await run.log.wait_finished()
        row = await ctx.db.read(_row_or_404, ctx, principal, response_id)  # deleted meanwhile?
    elif run is None and not background and row.status == "in_progress":  # on another replica
        await ctx.runs.wait_elsewhere(row.id)
        row = await ctx.db.read(_row_or_404, ctx, principal, response_id)
    return JSONResponse(await current_response(ctx, row, replay=True))


# -- routes ------------------------------------------------------------------------------
@router.post("/v1/responses")
async def create_response(
    body: CreateResponseBody,
    request: Request,
    principal: CurrentPrincipal,
    ctx: Ctx,
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
    accepted = None
    if idempotency_key:
        # A write: an expired key is forgotten.
        existing = await ctx.tasks.idempotent_target(principal.id, idempotency_key, raw)
        if existing:
            return await _deliver(ctx, principal, existing, body.stream, body.background)
    base_url = str(request.base_url)  # artifact download_url is absolute, on this origin
    accepted = await ctx.tasks.submit(principal.id, raw, idempotency_key, base_url)
    return await _deliver(
        ctx, principal, accepted.response_id, body.stream, body.background, accepted.run
    )


@router.get("/v1/responses/{response_id}")
async def get_response(
    response_id: str,
    request: Request,
    principal: CurrentPrincipal,
    ctx: Ctx,
    stream: bool = False,
    starting_after: Annotated[int | None, Query(ge=-1, le=MAX_SEQUENCE)] = None,
) -> Any:
    row = await ctx.db.read(_row_or_404, ctx, principal, response_id)
    if not stream:
        return await current_response(ctx, row)
    after = starting_after if starting_after is not None else -1
    last_event_id = request.headers.get("last-event-id")
    if last_event_id is not None:
        if not re.fullmatch(r"[0-9]{1,15}", last_event_id.strip()):
            raise ApiError(
                400,
                "invalid_input",
                "Last-Event-ID must be a sequence number.",
                param="Last-Event-ID",
            )
        after = max(after, int(last_event_id))
    if not _readable(ctx, row):
        raise _not_retained()
    return sse_response(_events(ctx, row, after), ctx.settings.keepalive_seconds)


@router.get("/v1/responses/{response_id}/input_items")
def get_input_items(
    response_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
    limit: Annotated[int | None, Query(ge=1, le=100)] = None,
    order: Annotated[Literal["asc", "desc"], Query()] = "asc",
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """Every input item, oldest first, unless the client pages them the way OpenAI's API
    does (`limit`, `order`, `after`: the id of the last item of the page before)."""
    row = ctx.db.run(_row_or_404, ctx, principal, response_id)
    if not row.store:
        raise _not_retained()
    items = row.input_items if order == "asc" else row.input_items[::-1]
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
def delete_response(
    response_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    row = ctx.db.run(_row_or_404, ctx, principal, response_id)
    run = ctx.runs.get(row.id)
    if run is not None:
        run.log.persist = False  # deleting never cancels (Tasks §7): the turn runs on, unstored
    ctx.db.run(response_store.delete_response, row.id)
    return {"id": row.id, "object": "response.deleted", "deleted": True}


@router.post("/v1/responses/{response_id}/cancel")
async def cancel_response(
    response_id: str,
    principal: CurrentPrincipal,
    ctx: Ctx,
) -> dict[str, Any]:
    row = await ctx.db.read(_row_or_404, ctx, principal, response_id)
    run = ctx.runs.get(row.id)
    cancelled_here = run is not None and not run.log.finished
    if cancelled_here:
        await ctx.runs.cancel(run)
    elif run is None and row.status == "in_progress":  # it runs on another replica
        await ctx.runs.cancel_elsewhere(row.id)
        row = await ctx.db.read(_row_or_404, ctx, principal, response_id)
    if not row.store and (run is None or run.log.finished):
        # Cancelling a finished task succeeds and changes nothing (Sessions §4), also when
        # its content was never retained: the cancel that stopped the run answers with its
        # partial output, as the run's own stream would; any later one with what is known
        # without the content (a finished run lingers in memory, but is not retained).
        if cancelled_here and run is not None:
            return run.log.current()
        return reading.unretained_response(row)
    return await current_response(ctx, row)


def _readable(ctx: AppContext, row: ResponseRow) -> bool:
    """Whether the response's content may be read: kept (`store: true`), or still running
    (its stream, a blocking wait). A finished run stays in memory a while; that does not
    make a `store: false` response readable (Tasks §4)."""
    if row.store:
        return True
    run = ctx.runs.get(row.id)
    return run is not None and not run.log.finished


def _not_retained() -> ApiError:
    return ApiError(404, "response_not_found", "That response was not retained.")
