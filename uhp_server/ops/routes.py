"""Operations: liveness, readiness and Prometheus metrics (docs/operations.md).

None of these routes is part of the protocol. /healthz and /readyz take no credential (a load
balancer probes them); /metrics takes UHP_METRICS_TOKEN as a bearer token when it is set.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from uhp_server.context import Ctx
from uhp_server.ops.metrics import CONTENT_TYPE

router = APIRouter()

NO_STORE = {"Cache-Control": "no-store"}


@router.get("/healthz", summary="Liveness: the process is up")
async def healthz() -> Response:
    """The process is up and its event loop answers; touches nothing else."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


@router.get(
    "/readyz",
    summary="Readiness: the database answers and the sandbox starts a process",
    responses={503: {"description": "Not ready; `reason` says why."}},
)
async def readyz(ctx: Ctx) -> Response:
    readiness = await ctx.readiness.check()
    if readiness.ready:
        return JSONResponse({"status": "ready"}, headers=NO_STORE)
    body = {"status": "unavailable", "reason": readiness.reason}
    return JSONResponse(body, status_code=503, headers=NO_STORE)


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format)",
    responses={401: {"description": "UHP_METRICS_TOKEN is set and was not given."}},
)
async def metrics(request: Request, ctx: Ctx) -> Response:
    token = ctx.settings.metrics_token
    if token and not _bearer_matches(request, token):
        return JSONResponse(
            {"error": {"code": "unauthorized", "message": "/metrics needs UHP_METRICS_TOKEN."}},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer", **NO_STORE},
        )
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE, headers=NO_STORE)


def _bearer_matches(request: Request, token: str) -> bool:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )
