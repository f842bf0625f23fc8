"""`/docs`: the OpenAPI document as one server-rendered page, readable offline.

Swagger UI and ReDoc load their scripts and styles from a CDN, which a self-hosted server
cannot count on and a strict CSP forbids. This page needs no script at all: every operation
by tag, with its parameters, body and answers, then every schema, linked to one another.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from uhp_server.api_docs.document import METHODS, SCHEMA_REF
from uhp_server.doors.uhp.share_page.render import markdown

HERE = Path(__file__).resolve().parent
STYLESHEET = HERE / "static" / "docs.css"

_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["markdown"] = lambda text: markdown(text or "")


def render_docs(document: dict[str, Any]) -> str:
    components = document.get("components", {})
    operations = [
        _operation(path, method, operation, components)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]
    tags = [
        {
            "name": tag["name"],
            "description": tag.get("description", ""),
            "operations": [op for op in operations if op["tag"] == tag["name"]],
        }
        for tag in document.get("tags", [])
    ]
    schemas = [
        {"name": name, "json": json.dumps(schema, indent=2, ensure_ascii=False)}
        for name, schema in components.get("schemas", {}).items()
    ]
    return _env.get_template("docs.html").render(
        info=document["info"], openapi=document["openapi"], tags=tags, schemas=schemas
    )


def anchor(method: str, path: str) -> str:
    return "op-" + method + "-" + re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")


def _operation(
    path: str, method: str, operation: dict[str, Any], components: dict[str, Any]
) -> dict[str, Any]:
    public = operation.get("security") == []
    parameters = [_resolve(p, components, "parameters") for p in operation.get("parameters", [])]
    body = operation.get("requestBody", {})
    return {
        "anchor": anchor(method, path),
        "method": method.upper(),
        "path": path,
        "tag": (operation.get("tags") or ["Other"])[0],
        "summary": operation.get("summary", ""),
        "description": operation.get("description", ""),
        "public": public,
        "parameters": [
            {
                "name": p.get("name"),
                "where": p.get("in"),
                "required": p.get("required", False),
                "type": _type_name(p.get("schema", {})),
                "description": p.get("description", ""),
            }
            for p in parameters
        ],
        "body": [
            {"media_type": media, "type": _type_name(content.get("schema", {}))}
            for media, content in body.get("content", {}).items()
        ],
        "responses": [
            {
                "status": status,
                "description": _resolve(answer, components, "responses").get("description", ""),
            }
            for status, answer in operation.get("responses", {}).items()
        ],
    }


def _resolve(node: dict[str, Any], components: dict[str, Any], section: str) -> dict[str, Any]:
    ref = node.get("$ref", "")
    prefix = f"#/components/{section}/"
    if ref.startswith(prefix):
        return components.get(section, {}).get(ref.removeprefix(prefix), {})
    return node


def _type_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref", "")
    if ref.startswith(SCHEMA_REF):
        return ref.removeprefix(SCHEMA_REF)
    if schema.get("type") == "array":
        return _type_name(schema.get("items", {})) + "[]"
    for combined in ("anyOf", "oneOf"):
        if combined in schema:
            return " | ".join(_type_name(s) for s in schema[combined])
    kind = schema.get("type", "object")
    return " | ".join(kind) if isinstance(kind, list) else str(kind)
