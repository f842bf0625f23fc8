"""`<server>/oumi/harnesses/<harness_id>/{submit,get_status,collect_output,cancel}`.

The credential is one of the server's API keys (Bearer). The harness must belong to the
key's principal (404 otherwise), except for an invocation already submitted: that one is
always answered, as a 404 for it would fail the platform's whole evaluation.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from uhp_server.doors.deps import EngineDep
from uhp_server.doors.oumi_harness.service import OumiInvocations
from uhp_server.doors.oumi_harness.wire import (
    MAX_BODY_BYTES,
    TERMINAL,
    ids_of,
    parse_json,
    parse_submission,
)
from uhp_server.engine import Engine
from uhp_server.errors import ApiError
from uhp_server.http.auth import CurrentPrincipal
from uhp_server.http.bodies import read_within

PREFIX = "/oumi/harnesses/{harness_id}"
router = APIRouter()
InvocationId = Annotated[str, Query(min_length=1, max_length=512)]


def _door(request: Request) -> OumiInvocations:
    """The door's invocations, one per app (made on first use)."""
    state = request.app.state
    if getattr(state, "oumi_invocations", None) is None:
        state.oumi_invocations = OumiInvocations(state.engine)
    return state.oumi_invocations


async def _body(request: Request) -> dict[str, Any]:
    """The body, refused past 10 MiB without reading the rest (413: fails only the row)."""
    raw = await read_within(request, MAX_BODY_BYTES)
    if raw is None:
        raise ApiError(413, "request_too_large", "The request body is over 10 MiB.")
    return parse_json(bytes(raw))


async def _harness_known(engine: Engine, principal_id: str, harness_id: str) -> None:
    if not await engine.harnesses.exists(principal_id, harness_id):
        raise ApiError(404, "harness_not_found", "No harness with that id.")


def _answer(status: dict[str, Any], *, by_status: bool) -> JSONResponse:
    code = 200 if not by_status or status["status"] in TERMINAL else 202
    return JSONResponse(status, status_code=code)


@router.post(PREFIX + "/submit")
async def submit(
    harness_id: str, request: Request, principal: CurrentPrincipal, engine: EngineDep
) -> JSONResponse:
    body = await _body(request)
    submission = parse_submission(body)
    door = _door(request)
    known = await door.known(principal.id, harness_id, submission.invocation_id)
    if not known:
        await _harness_known(engine, principal.id, harness_id)
    status = await door.submit(principal.id, harness_id, submission)
    return _answer(status, by_status=True)


@router.get(PREFIX + "/get_status")
async def get_status(
    harness_id: str, invocation_id: InvocationId, request: Request, principal: CurrentPrincipal
) -> JSONResponse:
    status = await _door(request).status(principal.id, harness_id, invocation_id)
    return _answer(status, by_status=False)


@router.get(PREFIX + "/collect_output")
async def collect_output(
    harness_id: str, invocation_id: InvocationId, request: Request, principal: CurrentPrincipal
) -> JSONResponse:
    output = await _door(request).output(principal.id, harness_id, invocation_id)
    return _answer(output, by_status=False)


@router.post(PREFIX + "/cancel")
async def cancel(harness_id: str, request: Request, principal: CurrentPrincipal) -> JSONResponse:
    session_id, invocation_id = ids_of(await _body(request))
    status = await _door(request).cancel(principal.id, harness_id, session_id, invocation_id)
    return _answer(status, by_status=False)
