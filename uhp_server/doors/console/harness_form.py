"""The harness editor's fields, to and from the configuration `PUT /v1/harnesses/{id}` takes.

Each field is named by the path the engine's parser names a refused value by (`maxStep`,
`skills[0].files[1].path`, `mcpServers[2].url`), so a refusal is shown beside its field.
The body starts from the harness as `GET` reads it and changes what the fields say, so what
the form does not show (a skill's binary files, taken from its bundle; a base's own
configuration) is sent back as it was. Secrets are write-only: an MCP server's `auth` and
its header values are never written into the page; a field left empty keeps the stored
value (a `uhp-secret:` reference the engine resolves), a value typed replaces it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from uhp_server.errors import ApiError

TRANSPORTS = ("http", "sse")
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass
class FileField:
    path: str
    content: str | None  # None: not editable here (binary, or too large to come inline)
    size: int = 0


@dataclass
class SkillField:
    name: str
    enabled: bool = True
    blob: str | None = None
    builtin: bool = False  # a suppressed built-in: sent back as it is
    files: list[FileField] = field(default_factory=list)


@dataclass
class HeaderField:
    name: str
    is_set: bool  # a value is stored (never shown)


@dataclass
class McpField:
    name: str
    url: str
    transport: str = "http"
    enabled: bool = True
    has_auth: bool = False
    headers: list[HeaderField] = field(default_factory=list)


@dataclass
class HarnessFields:
    name: str
    model: str
    instructions: str
    max_step: str
    timeout_seconds: str
    disabled_tools: str  # one a line
    skills: list[SkillField]
    mcp_servers: list[McpField]
    plugins: str  # JSON
    environment: str  # an environment's id, or empty


def fields_of(wire: dict[str, Any]) -> HarnessFields:
    """The form's fields for the harness as `GET` (or a refused `PUT` body) has it."""
    return HarnessFields(
        name=str(wire.get("name") or ""),
        model=str(wire.get("defaultModel") or ""),
        instructions=str(wire.get("systemPrompt") or ""),
        max_step=_text(wire.get("maxStep")),
        timeout_seconds=_text(wire.get("timeoutSeconds")),
        disabled_tools="\n".join(str(t) for t in wire.get("disabledTools") or []),
        skills=[_skill(s) for s in wire.get("skills") or [] if isinstance(s, dict)],
        mcp_servers=[_server(s) for s in wire.get("mcpServers") or [] if isinstance(s, dict)],
        plugins=json.dumps(wire.get("plugins") or [], indent=2, ensure_ascii=False),
        environment=str(wire.get("environment") or ""),
    )


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _skill(wire: dict[str, Any]) -> SkillField:
    files = [
        FileField(
            str(f.get("path", "")),
            f.get("content") if isinstance(f.get("content"), str) else None,
            int(f.get("size") or 0),
        )
        for f in wire.get("files") or []
        if isinstance(f, dict)
    ]
    return SkillField(
        name=str(wire.get("name", "")),
        enabled=wire.get("enabled", True) is not False,
        blob=wire.get("blob") if isinstance(wire.get("blob"), str) else None,
        builtin=wire.get("builtin") is True,
        files=files,
    )


def _server(wire: dict[str, Any]) -> McpField:
    headers = wire.get("headers") if isinstance(wire.get("headers"), dict) else {}
    return McpField(
        name=str(wire.get("name", "")),
        url=str(wire.get("url", "")),
        transport=str(wire.get("transport") or "http"),
        enabled=wire.get("enabled", True) is not False,
        has_auth=bool(wire.get("auth")),
        headers=[HeaderField(str(k), bool(v)) for k, v in (headers or {}).items()],
    )


# -- the fields sent back -------------------------------------------------------------------
def body_from(form: dict[str, str], current: dict[str, Any]) -> dict[str, Any]:
    """The `PUT` body the form's fields make of the harness as it is (`current`, as GET
    reads it). 400 for a number or JSON field that is not one, named by its field."""
    body = dict(current)
    for key in ("id", "object", "baseLabel", "createdAt", "enforcement"):
        body.pop(key, None)
    body["name"] = form.get("name", "").strip() or current.get("name")
    body["systemPrompt"] = form.get("systemPrompt", "")
    model = form.get("defaultModel", "").strip()
    if model:
        body["defaultModel"] = model
    else:
        body.pop("defaultModel", None)
    body["maxStep"] = _number(form, "maxStep")
    body["timeoutSeconds"] = _number(form, "timeoutSeconds")
    body["disabledTools"] = [
        line.strip() for line in form.get("disabledTools", "").splitlines() if line.strip()
    ]
    body["skills"] = _skills(form, current.get("skills") or [])
    body["mcpServers"] = _servers(form, current.get("mcpServers") or [])
    body["plugins"] = _json_field(form, "plugins", [])
    environment = form.get("environment", "").strip()
    if environment:
        body["environment"] = environment
    else:
        body.pop("environment", None)
    return body


def _number(form: dict[str, str], name: str) -> int | None:
    text = form.get(name, "").strip()
    if not text:
        return None
    # ASCII digits only: str.isdigit() also takes "²" and "①", which int() refuses.
    if not (text.isascii() and text.isdigit()) or len(text) > 12:
        raise ApiError(400, "invalid_input", "Type a whole number, or leave it empty.", param=name)
    return int(text)


def _json_field(form: dict[str, str], name: str, empty: Any) -> Any:
    text = form.get(name, "").strip()
    if not text:
        return empty
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_input", "This is not valid JSON.", param=name) from None


def _indexes(form: dict[str, str], prefix: str) -> list[int]:
    """The item indexes the form has fields for under `prefix` (`skills`: skills[0]…)."""
    found = set()
    for key in form:
        if key.startswith(prefix + "["):
            matched = _INDEX.match(key, len(prefix))
            if matched:
                found.add(int(matched.group(1)))
    return sorted(found)


def _checked(form: dict[str, str], name: str) -> bool:
    return form.get(name) == "on"


def _skills(form: dict[str, str], current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    skills = []
    for i in _indexes(form, "skills"):
        at = f"skills[{i}]"
        was = current[i] if i < len(current) and isinstance(current[i], dict) else {}
        if _checked(form, f"{at}.remove"):
            continue
        if was.get("builtin") is True:
            skills.append(was)  # a suppressed built-in, as it was
            continue
        name = form.get(f"{at}.name", "").strip()
        files = _files(form, at, was)
        if i >= len(current) and not name and not any(f.get("content") for f in files):
            continue  # the empty row for a new skill
        skill: dict[str, Any] = {"name": name, "enabled": _checked(form, f"{at}.enabled")}
        if was.get("blob"):
            skill["blob"] = was["blob"]  # files listed without content come from it
        skill["files"] = files
        skills.append(skill)
    return skills


def _files(form: dict[str, str], at: str, was: dict[str, Any]) -> list[dict[str, Any]]:
    old = [f for f in was.get("files") or [] if isinstance(f, dict)]
    files = []
    for j in _indexes(form, f"{at}.files"):
        where = f"{at}.files[{j}]"
        path = form.get(f"{where}.path", "").strip()
        if not path or _checked(form, f"{where}.remove"):
            continue
        if f"{where}.content" in form:
            files.append({"path": path, "content": form[f"{where}.content"]})
        else:  # not editable here: its bytes are the bundle's, as they were
            kept = old[j] if j < len(old) else {}
            entry = {"path": path}
            if "content_b64" in kept:
                entry["content_b64"] = kept["content_b64"]
            files.append(entry)
    return files


def _servers(form: dict[str, str], current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    servers = []
    for i in _indexes(form, "mcpServers"):
        at = f"mcpServers[{i}]"
        was = current[i] if i < len(current) and isinstance(current[i], dict) else {}
        if _checked(form, f"{at}.remove"):
            continue
        name = form.get(f"{at}.name", "").strip()
        url = form.get(f"{at}.url", "").strip()
        if i >= len(current) and not name and not url:
            continue  # the empty row for a new server
        server: dict[str, Any] = {
            "name": name,
            "url": url,
            "transport": form.get(f"{at}.transport") or "http",
            "enabled": _checked(form, f"{at}.enabled"),
            "headers": _headers(form, at, was.get("headers") or {}),
        }
        auth = form.get(f"{at}.auth", "")
        if auth:
            server["auth"] = auth  # a new secret: stored by the engine, never shown again
        elif was.get("auth") and not _checked(form, f"{at}.auth.clear"):
            server["auth"] = was["auth"]  # the stored reference, kept
        servers.append(server)
    return servers


def _headers(form: dict[str, str], at: str, stored: dict[str, str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for k in _indexes(form, f"{at}.headers"):
        where = f"{at}.headers[{k}]"
        name = form.get(f"{where}.name", "").strip()
        if not name or _checked(form, f"{where}.remove"):
            continue
        value = form.get(f"{where}.value", "")
        if value:
            headers[name] = value
        elif name in stored:
            headers[name] = stored[name]  # kept as stored (a reference for a secret)
        else:
            raise ApiError(400, "invalid_input", "Type the header's value.", param=f"{where}.value")
    return headers


def new_rows() -> dict[str, Any]:
    """The empty rows the form offers for adding: a skill (its SKILL.md ready), a file, an
    MCP server, a header."""
    return {
        "new_skill": SkillField(name="", files=[FileField("SKILL.md", "")]),
        "new_file": FileField("", ""),
        "new_server": McpField(name="", url=""),
        "new_header": HeaderField("", False),
        "transports": TRANSPORTS,
    }
