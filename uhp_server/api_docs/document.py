"""`/openapi.json`: the protocol's OpenAPI document (its newest version, which every older one
this server serves is a subset of), plus what FastAPI generates for the routes this server
serves beyond it (sharing pages, the harness events feed, trace deletion ...).

The protocol's document is normative, so its operations are served exactly as published,
those of an optional chapter this server does not implement included: their tag says that
they answer 404 here (doors/uhp/chapters.py). An operation it lacks is taken from FastAPI's
schema, tagged as an extension, with the protocol's error responses in place of FastAPI's
422 (this server answers validation errors with the envelope's 400), and with only the
component schemas it refers to; one that the protocol's prose names but its document omits
goes under its chapter's tag instead. A door mounted as a sub-application (Chat Completions
at /openai/v1), which FastAPI's generator skips, is generated on its own and listed under its
full paths, with its errors in its own (OpenAI's) shape.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Mount

from uhp_server.doors.uhp.chapters import NOT_SERVED_YET, chapters_off
from uhp_server.doors.uhp.wire import BUILTIN_SKILLS_FIELD
from uhp_server.harnesses.config import BASE_CONFIG_FIELD, KEEP_WARM_FIELD

SPEC_PATH = Path(__file__).resolve().parent / "uhp-2026-10-04.openapi.yaml"
EXTENSION_TAG = "UHP Server extensions"
# (method, path): (tag, where the prose names it). Operations of the protocol that its
# OpenAPI document leaves out.
NAMED_IN_PROSE = {
    ("delete", "/v1/sessions/{session_id}"): ("Sessions", "Sessions §6"),
}
METHODS = ("get", "put", "post", "delete", "patch", "options", "head")
PUBLIC_PREFIXES = ("/s/",)  # the share page: its token is in the path, no credential
# Probes and metrics (ops/routes.py): no API key; /metrics takes UHP_METRICS_TOKEN when set.
OPERATIONS_PATHS = ("/healthz", "/readyz", "/metrics")
SCHEMA_REF = "#/components/schemas/"
# Doors mounted as sub-applications, each answering in its own contract's shapes: the Chat
# Completions door (docs/doors/openai-chat.md).
MOUNTED_DOORS = ("/openai/v1/",)
CHAT_TAG = {
    "name": "Chat Completions door",
    "description": (
        "This server's OpenAI Chat Completions door: every harness as a model "
        "(`<slug>--<harness id>`). Errors, unknown paths included, are OpenAI's shape."
    ),
}
OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
    "description": "An error in OpenAI's shape, as the Chat Completions door answers it.",
}
OPENAI_ERROR_CONTENT = {
    "application/json": {"schema": {"$ref": "#/components/schemas/OpenAIErrorEnvelope"}}
}
OPENAI_ERRORS = {
    "400": "A malformed request: `invalid_request`, `unsupported_content`",
    "401": "A missing or unknown key: `invalid_api_key`",
    "404": "No such model (harness): `model_not_found`",
}
OPENAI_TASK_ERRORS = {  # a chat completion runs a task: how one that did not complete answers
    "409": "The task was cancelled: `cancelled`",
    "422": "No model can be served for the harness: `model_unavailable`",
    "502": "The task failed: its error code and message",
}
# The published 2026-10-04 document refers to this answer (`GET /v1/environments/packages/
# check`) and never defines it; defined here the way its siblings are, so that the document
# served is valid OpenAPI. The copy in this folder stays byte for byte the published one.
# The harness object's field of this server's own (doors/uhp/wire.py), beside the protocol's.
BUILTIN_SKILLS_PROPERTY = {
    "type": "array",
    "readOnly": True,
    "items": {"$ref": "#/components/schemas/Skill"},
    "description": (
        "This server's extension: the built-in skills (its `skills/` folder) the harness "
        "inherits, each with `builtin: true`, `enabled` (false when the harness's `skills` "
        "suppress it with `{name, enabled: false}`) and its files' paths and sizes; `GET "
        "/v1/harnesses/{harness_id}/skills/{skill_id}/files` has their contents. A built-in "
        "the harness replaces with a skill of its own of the same name is not listed. "
        "`skills` reports only what was written to it, never these; a PUT ignores this field."
    ),
    "x-uhp-server-extension": True,
}
BASE_CONFIG_PROPERTY = {
    "type": ["object", "null"],
    "description": (
        "This server's extension: the base's own configuration, for a base that takes one "
        "(the `acp` base: `command`, `env`, `model_access`, `conversation_paths`; "
        "docs/acp.md). Credential-like `env` values come back only as `uhp-secret:` "
        "references. Other bases refuse it."
    ),
    "x-uhp-server-extension": True,
}
KEEP_WARM_PROPERTY = {
    "type": ["integer", "null"],
    "minimum": 0,
    "maximum": 3600,
    "description": (
        "This server's extension: seconds a session's CLI process stays alive after a "
        "completed turn, for the same session's next turn to go on in it (on a base whose "
        "CLI holds several turns; others stay cold); absent, null or 0: off. A warm "
        "process and its sandbox serve several "
        "responses of one session, never another session or principal (docs/harnesses.md)."
    ),
    "x-uhp-server-extension": True,
}
MISSING_RESPONSES = {
    "BadRequest": {
        "description": "The request was malformed: `invalid_input`",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}},
    },
}


@functools.cache
def protocol_document() -> dict[str, Any]:
    return yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))


def build_document(app: FastAPI) -> dict[str, Any]:
    document = copy.deepcopy(protocol_document())
    generated = get_openapi(title=app.title, version=app.version, routes=app.routes)
    generated_schemas = generated.get("components", {}).get("schemas", {})
    extensions: list[dict[str, Any]] = []
    for mounted in _mounted_doors(app):
        extensions.extend(_add_mounted(document, mounted))
        for name, schema in mounted.schemas.items():
            generated_schemas.setdefault(name, schema)
    for path, operations in generated["paths"].items():
        served = document["paths"].setdefault(path, {})
        for method, operation in operations.items():
            if method not in METHODS or method in served:
                continue
            if (method, path) in NAMED_IN_PROSE:
                served[method] = _as_protocol(operation, *NAMED_IN_PROSE[method, path])
            else:
                served[method] = _as_extension(path, operation)
            extensions.append(served[method])
    harness = document["components"]["schemas"]["Harness"]
    harness["properties"][BUILTIN_SKILLS_FIELD] = BUILTIN_SKILLS_PROPERTY
    harness["properties"][BASE_CONFIG_FIELD] = BASE_CONFIG_PROPERTY
    document["components"]["schemas"]["HarnessCreate"].setdefault("properties", {})[
        BASE_CONFIG_FIELD
    ] = BASE_CONFIG_PROPERTY
    harness["properties"][KEEP_WARM_FIELD] = KEEP_WARM_PROPERTY
    document["components"]["schemas"]["HarnessCreate"]["properties"][KEEP_WARM_FIELD] = (
        KEEP_WARM_PROPERTY
    )
    for name, answer in MISSING_RESPONSES.items():
        document["components"]["responses"].setdefault(name, answer)
    schemas = document["components"]["schemas"]
    for name in _referenced(extensions, generated_schemas):
        schemas.setdefault(name, generated_schemas[name])
    _mark_chapters_off(document["tags"])
    _mark_not_served_yet(document["tags"])
    document["tags"].append(
        {"name": EXTENSION_TAG, "description": "Routes this server adds to the protocol."}
    )
    if any(path.startswith(MOUNTED_DOORS) for path in document["paths"]):
        document["tags"].append(CHAT_TAG)
        document["components"]["schemas"].setdefault("OpenAIErrorEnvelope", OPENAI_ERROR)
    document["servers"] = [{"url": "/", "description": "This server"}]
    return document


@dataclass(frozen=True)
class MountedDoor:
    """A door served as a sub-application (doors/door.py): its routes, generated on their own
    and prefixed with its mount path, since FastAPI's generator skips a mount."""

    prefix: str
    paths: dict[str, dict[str, Any]]
    schemas: dict[str, Any]


def _mounted_doors(app: FastAPI) -> list[MountedDoor]:
    found = []
    for route in app.routes:
        mounted = getattr(route, "app", None)
        if isinstance(route, Mount) and isinstance(mounted, FastAPI):
            generated = get_openapi(title=app.title, version=app.version, routes=mounted.routes)
            schemas = generated.get("components", {}).get("schemas", {})
            found.append(MountedDoor(route.path, generated["paths"], schemas))
    return found


def _add_mounted(document: dict[str, Any], door: MountedDoor) -> list[dict[str, Any]]:
    """The door's operations under their full paths, answering errors in its own shape."""
    added = []
    for path, operations in door.paths.items():
        served = document["paths"].setdefault(door.prefix + path, {})
        for method, operation in operations.items():
            if method in METHODS and method not in served:
                served[method] = _as_chat_door(method, operation)
                added.append(served[method])
    return added


def _as_chat_door(method: str, operation: dict[str, Any]) -> dict[str, Any]:
    operation = dict(operation)
    operation["tags"] = [CHAT_TAG["name"]]
    operation["x-uhp-server-extension"] = True
    responses = _without_422(operation)  # its validation errors are 400, in its own shape
    errors = {**OPENAI_ERRORS, **(OPENAI_TASK_ERRORS if method == "post" else {})}
    for code, meaning in errors.items():
        responses.setdefault(code, {"description": meaning, "content": OPENAI_ERROR_CONTENT})
    operation["responses"] = responses
    return operation


def _as_extension(path: str, operation: dict[str, Any]) -> dict[str, Any]:
    operation = dict(operation)
    operation["tags"] = [EXTENSION_TAG]
    operation["x-uhp-server-extension"] = True
    responses = _without_422(operation)
    if path in OPERATIONS_PATHS:
        operation["security"] = []
    elif path.startswith(PUBLIC_PREFIXES):
        operation["security"] = []
        responses.setdefault("404", {"description": "No such share, or it was revoked."})
    else:
        _authenticated(responses)
    operation["responses"] = responses
    return operation


def _as_protocol(operation: dict[str, Any], tag: str, named_in: str) -> dict[str, Any]:
    operation = dict(operation)
    operation["tags"] = [tag]
    operation["description"] = (
        f"Named by the protocol ({named_in}); its OpenAPI document does not list it."
    )
    operation["responses"] = _authenticated(_without_422(operation))
    return operation


def _without_422(operation: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's 422 never happens: this server answers validation errors with a 400."""
    answers = operation.get("responses", {})
    return {code: answer for code, answer in answers.items() if code != "422"}


def _authenticated(responses: dict[str, Any]) -> dict[str, Any]:
    responses.setdefault("401", {"$ref": "#/components/responses/Unauthorized"})
    responses.setdefault("404", {"$ref": "#/components/responses/NotFound"})
    return responses


def _mark_chapters_off(tags: list[dict[str, Any]]) -> None:
    """Say, where a reader meets them, that an optional chapter's operations are not served."""
    off = {chapter.tag: chapter.capability for chapter in chapters_off()}
    for tag in tags:
        if tag["name"] in off:
            note = (
                f"**Not served by this server**: its discovery document reports "
                f"`{off[tag['name']]}: false`, and every route below answers 404."
            )
            tag["description"] = note + "\n\n" + tag.get("description", "")


def _mark_not_served_yet(tags: list[dict[str, Any]]) -> None:
    """Say, on its chapter's tag, which operations of a served chapter are not served here
    yet (the operations themselves stay as published)."""
    for tag in tags:
        missing = sorted(
            f"`{method.upper()} {path}`"
            for method, path in NOT_SERVED_YET
            if path.startswith(("/v1/memories", "/v1/harnesses/{harness_id}/memories"))
        )
        if tag["name"] == "Memories" and missing:
            note = "**Not served by this server yet** (each answers 404): " + ", ".join(missing)
            tag["description"] = note + "\n\n" + tag.get("description", "")


def _referenced(nodes: list[dict[str, Any]], schemas: dict[str, Any]) -> list[str]:
    """Names of the schemas the nodes refer to, directly or through one another."""
    found: list[str] = []
    pending: list[Any] = list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(SCHEMA_REF):
                name = ref.removeprefix(SCHEMA_REF)
                if name not in found and name in schemas:
                    found.append(name)
                    pending.append(schemas[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found
