"""The HTTP tool endpoint: `POST /oumi/tools/<harness_id>` and the schemas to declare it.

The platform reads a 2xx body as the tool's output and a 4xx as a refusal the model reads
(its first 200 characters): so arguments, a missing harness and a failed turn are short
plain-text 4xx answers, never the protocol's error envelope and never a 5xx.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from uhp_server.doors.harness_result import RESULT_SCHEMA, TOOL_INPUT_SCHEMA
from uhp_server.doors.oumi_tools.calls import (
    Refusal,
    parse_arguments,
    parse_budget,
    run_tool_call,
)
from uhp_server.doors.oumi_tools.reading import read_json
from uhp_server.http.auth import require_principal

router = APIRouter()


@router.get("/oumi/tools/schemas")
def tool_schemas() -> dict[str, Any]:
    """No credential: the schemas are the same for every harness and hold nothing private."""
    return {"input_schema": TOOL_INPUT_SCHEMA, "output_schema": RESULT_SCHEMA}


@router.post("/oumi/tools/{harness_id}")
async def call_tool(harness_id: str, request: Request) -> Any:
    principal = await require_principal(request)  # before a byte of the body is read
    engine = request.app.state.engine
    try:
        budget = parse_budget(
            request.query_params.get("timeout_seconds"), engine.settings.tool_timeout_seconds
        )
        arguments = parse_arguments(await read_json(request))
        base_url = engine.settings.public_base_url or str(request.base_url)
        result = await run_tool_call(engine, principal.id, harness_id, arguments, budget, base_url)
    except Refusal as refusal:
        status = refusal.status if 400 <= refusal.status < 500 else 409
        if status in (408, 429):  # the platform reads these as transport failures
            status = 409
        return PlainTextResponse(refusal.reason[:500], status_code=status)
    return JSONResponse(result)
