"""`GET /health` and `POST /invoke`, served only when UHP_AGENTOS_PRINCIPAL is set.

Unset, both answer the server's ordinary 404 for an unknown route. Set, `/invoke` always
answers 200 with `completed`, `failed` or `suspended` — a non-2xx would fail the run as
interrupted — and never logs or stores the run token or the context's secrets.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from uhp_server.doors.agentos.contract import BadInvocation, failed, read_invocation
from uhp_server.doors.agentos.invocations import AgentosRuns
from uhp_server.errors import ApiError
from uhp_server.http.strict_json import parse_strict

log = logging.getLogger("uhp_server.agentos")
router = APIRouter()
_MAX_BODY_BYTES = 4 * 1024 * 1024


def _enabled_or_404(request: Request) -> str:
    principal = request.app.state.engine.settings.agentos_principal
    if not principal:
        raise ApiError(404, "uhpserver_route_not_found", "No such route.")
    return principal


@router.get("/health")
def health(request: Request) -> JSONResponse:
    _enabled_or_404(request)
    engine = request.app.state.engine
    if not engine.bases:
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})


@router.post("/invoke")
async def invoke(request: Request) -> JSONResponse:
    principal_name = _enabled_or_404(request)
    engine = request.app.state.engine
    try:
        invocation = read_invocation(await _read_body(request))
        principal_id = await engine.principals.named(principal_name)
        base_url = engine.settings.public_base_url or str(request.base_url)
        answer = await runs_of(request).invoke(principal_id, invocation, base_url)
    except BadInvocation as bad:
        answer = failed(bad.code, bad.message)
    except Exception:
        # Never a non-2xx: the platform would fail the run as interrupted. The log line names
        # the fault, never the body (it holds the run token and secrets).
        log.exception("agentos_invoke_failed")
        answer = failed("internal_error", "The agent failed inside the server.")
    return JSONResponse(answer)


def runs_of(request: Request) -> AgentosRuns:
    state = request.app.state
    if getattr(state, "agentos_runs", None) is None:
        state.agentos_runs = AgentosRuns(state.engine)
    return state.agentos_runs


async def _read_body(request: Request) -> Any:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_BODY_BYTES:
            raise BadInvocation("invalid_invocation", "The invoke body is larger than 4 MiB.")
    try:
        return parse_strict(bytes(body))
    except ValueError:
        raise BadInvocation("invalid_invocation", "The invoke body is not valid JSON.") from None
