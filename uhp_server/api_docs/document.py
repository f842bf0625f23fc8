"""`/openapi.json`: the protocol's OpenAPI document, plus what FastAPI generates for the routes
this server serves beyond it (sharing pages, the harness events feed, trace deletion ...).

The protocol's document is normative, so its operations are served exactly as published. An
operation it lacks is taken from FastAPI's schema, tagged as an extension, with the
protocol's error responses in place of FastAPI's 422 (this server answers validation errors
with the envelope's 400), and with only the component schemas it refers to.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

SPEC_PATH = Path(__file__).resolve().parent / "uhp-2026-08-11.openapi.yaml"
EXTENSION_TAG = "UHP Server extensions"
METHODS = ("get", "put", "post", "delete", "patch", "options", "head")
PUBLIC_PREFIXES = ("/s/",)  # the share page: its token is in the path, no credential
# Probes and metrics (ops/routes.py): no API key; /metrics takes UHP_METRICS_TOKEN when set.
OPERATIONS_PATHS = ("/healthz", "/readyz", "/metrics")
SCHEMA_REF = "#/components/schemas/"


@functools.cache
def protocol_document() -> dict[str, Any]:
    return yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))


def build_document(app: FastAPI) -> dict[str, Any]:
    document = copy.deepcopy(protocol_document())
    generated = get_openapi(title=app.title, version=app.version, routes=app.routes)
    generated_schemas = generated.get("components", {}).get("schemas", {})
    extensions: list[dict[str, Any]] = []
    for path, operations in generated["paths"].items():
        served = document["paths"].setdefault(path, {})
        for method, operation in operations.items():
            if method in METHODS and method not in served:
                served[method] = _as_extension(path, operation)
                extensions.append(served[method])
    schemas = document["components"]["schemas"]
    for name in _referenced(extensions, generated_schemas):
        schemas.setdefault(name, generated_schemas[name])
    document["tags"].append(
        {"name": EXTENSION_TAG, "description": "Routes this server adds to the protocol."}
    )
    document["servers"] = [{"url": "/", "description": "This server"}]
    return document


def _as_extension(path: str, operation: dict[str, Any]) -> dict[str, Any]:
    operation = dict(operation)
    operation["tags"] = [EXTENSION_TAG]
    operation["x-uhp-server-extension"] = True
    responses = {
        code: answer for code, answer in operation.get("responses", {}).items() if code != "422"
    }
    if path in OPERATIONS_PATHS:
        operation["security"] = []
    elif path.startswith(PUBLIC_PREFIXES):
        operation["security"] = []
        responses.setdefault("404", {"description": "No such share, or it was revoked."})
    else:
        responses.setdefault("401", {"$ref": "#/components/responses/Unauthorized"})
        responses.setdefault("404", {"$ref": "#/components/responses/NotFound"})
    operation["responses"] = responses
    return operation


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
