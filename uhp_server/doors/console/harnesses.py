"""The principal's harnesses in the console: the list, a harness's page (its configuration
and the models it can serve, each with its measured availability), creating one from a few
fields, editing its whole configuration as the JSON `PUT /v1/harnesses/{id}` takes (a GET→PUT
round trip keeps every byte: skills' files, and MCP secrets as `uhp-secret:` references,
never their values), and deleting it. Every check is the engine's own parser's."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.wire import harness_to_wire
from uhp_server.errors import ApiError

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

HARNESSES = PREFIX + "/harnesses"
# A configuration carries its skills' files: a form far larger than the console's others.
MAX_CONFIGURATION_BYTES = 8 * 1024 * 1024


def _harness_url(harness_id: str) -> str:
    return f"{HARNESSES}/{harness_id}"


def _json_object(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_input", "The configuration is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_input", "The configuration must be a JSON object.")
    return body


@router.get(HARNESSES)
async def harness_list(request: Request, engine: EngineDep) -> Response:
    visitor = await guard.visitor(request)
    harnesses = sorted(
        await engine.harnesses.all(visitor.principal.id), key=lambda h: h.name.lower()
    )
    bases = [(name, base.label) for name, base in engine.bases.items()]
    return page(
        "harnesses.html", visitor=visitor, section="harnesses", harnesses=harnesses, bases=bases
    )


@router.post(HARNESSES)
async def create_harness(request: Request, engine: EngineDep, settings: SettingsDep) -> Response:
    visitor, fields = await guard.checked_write(request, settings)
    body: dict[str, Any] = {"base": fields.get("base", "")}
    for field, name in (
        ("name", "name"),
        ("model", "defaultModel"),
        ("instructions", "systemPrompt"),
    ):
        value = fields.get(field, "").strip()
        if value:
            body[name] = value
    created = await engine.harnesses.create(visitor.principal.id, body)
    return see_other(_harness_url(created.id))


@router.get(HARNESSES + "/{harness_id}")
async def harness_page(harness_id: str, request: Request, engine: EngineDep) -> Response:
    visitor = await guard.visitor(request)
    harness = await engine.harnesses.get(visitor.principal.id, harness_id)
    models = await engine.harnesses.models_of(visitor.principal.id, harness.id)
    wire = harness_to_wire(harness)
    return page(
        "harness.html",
        visitor=visitor,
        section="harnesses",
        harness=harness,
        models=models.get("models", []),
        configuration=json.dumps(wire, indent=2, ensure_ascii=False),
    )


@router.post(HARNESSES + "/{harness_id}")
async def replace_harness(
    harness_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, fields = await guard.checked_write(request, settings, MAX_CONFIGURATION_BYTES)
    body = _json_object(fields.get("configuration", ""))
    await engine.harnesses.replace(visitor.principal.id, harness_id, body)
    return see_other(_harness_url(harness_id))


@router.post(HARNESSES + "/{harness_id}/delete")
async def delete_harness(
    harness_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    visitor, _ = await guard.checked_write(request, settings)
    await engine.harnesses.delete(visitor.principal.id, harness_id)
    return see_other(HARNESSES)
