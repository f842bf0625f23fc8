"""The principal's harnesses in the console: the list, a harness's page (its configuration
and the models it can serve, each with its measured availability), creating one from a few
fields, editing its whole configuration as the JSON `PUT /v1/harnesses/{id}` takes (a GET→PUT
round trip keeps every byte: skills' files, and MCP secrets as `uhp-secret:` references,
never their values), and deleting it. Every check is the engine's own parser's."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from uhp_server.doors.console import guard
from uhp_server.doors.console.guard import PREFIX, Visitor
from uhp_server.doors.console.harness_form import HarnessFields, body_from, fields_of, new_rows
from uhp_server.doors.console.pages import ConsoleRoute, see_other
from uhp_server.doors.console.render import page
from uhp_server.doors.deps import EngineDep, SettingsDep
from uhp_server.doors.uhp.wire import harness_to_wire
from uhp_server.engine import Engine, Harness
from uhp_server.errors import ApiError
from uhp_server.memories.records import HarnessMemories

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)

HARNESSES = PREFIX + "/harnesses"
# A configuration carries its skills' files: a form far larger than the console's others.
MAX_CONFIGURATION_BYTES = 8 * 1024 * 1024
# The fields a refusal may name that the summary links to (the rest are named in it).
KNOWN_FIELDS = frozenset(
    {"name", "defaultModel", "systemPrompt", "maxStep", "timeoutSeconds", "disabledTools"}
    | {"plugins", "environment", "default_memory_id", "observe"}
)


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
    return await _harness_page(engine, visitor, harness, fields_of(harness_to_wire(harness)))


async def _harness_page(
    engine: Engine,
    visitor: Visitor,
    harness: Harness,
    fields: HarnessFields,
    errors: dict[str, str] | None = None,
) -> Response:
    """The harness's page: its models, its settings as fields (a refusal's message beside
    the field it names, the values sent kept: a 400, whatever the engine's status), and the
    whole configuration as JSON."""
    models = await engine.harnesses.models_of(visitor.principal.id, harness.id)
    wire = harness_to_wire(harness)
    memories = await _memories(engine, visitor, harness.id)
    return page(
        "harness.html",
        400 if errors else 200,
        visitor=visitor,
        section="harnesses",
        harness=harness,
        models=models.get("models", []),
        fields=fields,
        errors=errors or {},
        known_fields=KNOWN_FIELDS,
        memories=memories,
        configuration=json.dumps(wire, indent=2, ensure_ascii=False),
        **new_rows(),
    )


@router.post(HARNESSES + "/{harness_id}/settings")
async def save_settings(
    harness_id: str, request: Request, engine: EngineDep, settings: SettingsDep
) -> Response:
    """The settings form: the harness as it is, changed as its fields say, replaced with the
    engine's own `PUT` call. A refusal changes nothing and is shown by the field it names."""
    visitor, form = await guard.checked_write(request, settings, MAX_CONFIGURATION_BYTES)
    harness = await engine.harnesses.get(visitor.principal.id, harness_id)
    current = harness_to_wire(harness)
    body: dict[str, Any] | None = None
    try:
        body = body_from(form, current)
        await engine.harnesses.replace(visitor.principal.id, harness.id, body)
    except ApiError as refused:
        if refused.status >= 500 or (refused.status != 400 and refused.param is None):
            raise  # not about what was typed (the harness is gone): the plain error page
        shown = fields_of(body) if body is not None else _typed(fields_of(current), form)
        errors = _field_error(refused, "configuration")
        return await _harness_page(engine, visitor, harness, shown, errors)
    try:
        await _save_memories(engine, visitor, harness.id, form)
    except ApiError as refused:
        if refused.status >= 500 or (refused.status not in (400, 422) and refused.param is None):
            raise
        saved = await engine.harnesses.get(visitor.principal.id, harness.id)
        errors = _field_error(refused, "default_memory_id", " The other settings were saved.")
        return await _harness_page(
            engine, visitor, saved, fields_of(harness_to_wire(saved)), errors
        )
    return see_other(_harness_url(harness.id))


def _field_error(refused: ApiError, otherwise: str, more: str = "") -> dict[str, str]:
    """The refusal as the error of the field it names (`otherwise` when it names none). A
    place inside the plugins, which the form edits as one JSON field, is that field's, the
    place named in the message."""
    param = refused.param or otherwise
    message = refused.message + more
    if param.startswith("plugins["):
        return {"plugins": f"{param}: {message}"}
    return {param: message}


async def _memories(engine: Engine, visitor: Visitor, harness_id: str) -> HarnessMemories | None:
    """The harness's agent's memories (`GET /v1/harnesses/{id}/memories`), while the
    Memories chapter is served."""
    if engine.settings.memories == "off":
        return None
    return await engine.agent_memories.settings(visitor.principal.id, harness_id)


async def _save_memories(
    engine: Engine, visitor: Visitor, harness_id: str, form: dict[str, str]
) -> None:
    """The memories fields, through `PUT /v1/harnesses/{id}/memories`'s engine call, when
    they changed: a second call after the harness's own (its refusal says the rest was
    saved)."""
    current = await _memories(engine, visitor, harness_id)
    if current is None or "memories" not in form:
        return
    default = form.get("default_memory_id", "").strip() or None
    observe = form.get("observe") == "on"
    if (default, observe) == (current.default_memory_id, current.observe):
        return
    body = {"default_memory_id": default, "observe": observe}
    await engine.agent_memories.configure(visitor.principal.id, harness_id, body)


def _typed(fields: HarnessFields, form: dict[str, str]) -> HarnessFields:
    """The harness's fields with what the form typed into its plain ones (a number or JSON
    field refused before any body was made)."""
    return replace(
        fields,
        name=form.get("name", fields.name),
        model=form.get("defaultModel", fields.model),
        instructions=form.get("systemPrompt", fields.instructions),
        max_step=form.get("maxStep", fields.max_step),
        timeout_seconds=form.get("timeoutSeconds", fields.timeout_seconds),
        disabled_tools=form.get("disabledTools", fields.disabled_tools),
        plugins=form.get("plugins", fields.plugins),
        environment=form.get("environment", fields.environment),
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
