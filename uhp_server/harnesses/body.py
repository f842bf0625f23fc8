"""A POST/PUT body → (name, stored config).

Accepts the snake_case `HarnessCreate` of the spec and, so that what a GET returned can be
PUT back unchanged, the camelCase harness object too (snake_case wins when both are there).
Read-only fields of the harness object (`id`, `object`, `baseLabel`, `createdAt`,
`enforcement`, `uhpserver_builtinSkills`) are accepted and ignored; on a PUT, `id`, `base`
and `createdAt` must match the harness, since a changed base would silently change every
session attached to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness_bases.base import HarnessBase
from storage import environments as environment_store
from storage.tables import HarnessRow
from storage.unit import Tx
from uhp_server.environments.errors import environment_not_found
from uhp_server.harnesses.base_config import parse_base_config
from uhp_server.harnesses.config import BASE_CONFIG_FIELD, KEEP_WARM_FIELD, STORED_KEYS
from uhp_server.harnesses.mcp import parse_mcp_servers
from uhp_server.harnesses.plugins.install import parse_plugins
from uhp_server.harnesses.plugins.namespace import check_namespace
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.skills import parse_skills
from uhp_server.harnesses.writes import PendingWrites

MAX_NAME = 200
MAX_SYSTEM_PROMPT = 1024 * 1024
MAX_DISABLED_TOOLS = 200

MAX_KEEP_WARM_SECONDS = 3600  # an idle process is a process: an hour at most

# (snake_case, camelCase) of each mutable field: the configuration's own, and the name.
_FIELDS = {"name": "name", **STORED_KEYS}


@dataclass(frozen=True)
class ParsedHarness:
    name: str
    config: dict[str, Any]  # the row's JSON (HarnessConfig.stored's keys)
    writes: PendingWrites  # bundles, packages and secrets, for the write that stores it


@dataclass(frozen=True)
class ConfigRules:
    """What validation depends on besides the body."""

    max_timeout_seconds: int
    mcp_allow_private_hosts: bool


def _field(body: dict[str, Any], snake: str) -> tuple[str, Any]:
    """(the key the value came under, the value); absent is (snake, None)."""
    camel = _FIELDS[snake]
    if snake in body:
        return snake, body[snake]
    return camel, body.get(camel)


def check_immutables(body: dict[str, Any], row: HarnessRow) -> None:
    """A PUT may repeat `id`, `base` and `createdAt`, never change them."""
    checks = (("id", row.id), ("base", row.base), ("createdAt", row.created_at_ms))
    for key, current in (*checks, ("created_at", row.created_at_ms)):
        if key not in body:
            continue
        if isinstance(current, str) and not isinstance(body[key], str):
            invalid(key, f"`{key}` must be a string.")  # a wrong type is not a change
        if isinstance(current, int) and (
            isinstance(body[key], bool) or not isinstance(body[key], int)
        ):
            invalid(key, f"`{key}` must be an integer.")
        if body[key] != current:
            invalid(
                key,
                f"`{key}` of a harness cannot change; create a new harness instead.",
            )


def parse_harness_body(
    tx: Tx,
    principal_id: str,
    body: dict[str, Any],
    base: HarnessBase | None,
    rules: ConfigRules,
    default_name: str,
) -> ParsedHarness:
    """Validate every field; what it stores besides the row is written only once all of the
    body is valid, by whoever writes the harness (ParsedHarness.writes)."""
    writes = PendingWrites(tx, principal_id)
    name = _name(*_field(body, "name"), default_name)
    mcp_key, mcp_raw = _field(body, "mcp_servers")
    skills_key, skills_raw = _field(body, "skills")
    plugins_key, plugins_raw = _field(body, "plugins")
    allow_private = rules.mcp_allow_private_hosts
    mcp_servers = parse_mcp_servers(writes, mcp_raw, mcp_key, base, allow_private)
    skills = parse_skills(writes, skills_raw, skills_key)
    plugins = parse_plugins(writes, plugins_raw, plugins_key, base, allow_private)
    check_namespace(mcp_servers, skills, plugins)
    config: dict[str, Any] = {
        "defaultModel": _optional_text(*_field(body, "default_model")),
        "systemPrompt": _system_prompt(*_field(body, "system_prompt")),
        "disabledTools": _disabled_tools(*_field(body, "disabled_tools")),
        "maxStep": _positive_int(*_field(body, "max_step")),
        "timeoutSeconds": _timeout(*_field(body, "timeout_seconds"), rules.max_timeout_seconds),
        "environment": _environment(tx, principal_id, *_field(body, "environment")),
        "mcpServers": mcp_servers,
        "skills": skills,
        "plugins": plugins,
    }
    base_config = parse_base_config(writes, body.get(BASE_CONFIG_FIELD), base)
    if base_config is not None:
        config[BASE_CONFIG_FIELD] = base_config
    keep_warm = _keep_warm_seconds(body.get(KEEP_WARM_FIELD))
    if keep_warm:
        config[KEEP_WARM_FIELD] = keep_warm
    return ParsedHarness(name, config, writes)


def _name(key: str, raw: Any, default: str) -> str:
    if raw is None:
        return default
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_NAME:
        invalid(key, f"`{key}` must be a non-empty string of at most {MAX_NAME} characters.")
    if "\x00" in raw:  # no database text column holds it (PostgreSQL refuses it)
        invalid(key, f"`{key}` must not contain a NUL character.")
    return raw


def _optional_text(key: str, raw: Any) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        invalid(key, f"`{key}` must be a string.")
    return raw


def _system_prompt(key: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or len(raw) > MAX_SYSTEM_PROMPT:
        invalid(key, f"`{key}` must be a string of at most {MAX_SYSTEM_PROMPT} characters.")
    return raw


def _disabled_tools(key: str, raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MAX_DISABLED_TOOLS:
        invalid(key, f"`{key}` must be an array of at most {MAX_DISABLED_TOOLS} tool names.")
    tools: list[str] = []
    for index, tool in enumerate(raw):
        if not isinstance(tool, str) or not tool.strip() or len(tool) > 200:
            invalid(f"{key}[{index}]", "A tool name must be a non-empty string.")
        if tool not in tools:
            tools.append(tool)
    return tools


def _positive_int(key: str, raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        invalid(key, f"`{key}` must be a positive integer or null.")
    return raw


def _environment(tx: Tx, principal_id: str, key: str, raw: Any) -> str | None:
    """The id of one of the principal's environments (Environments §5): another's, or one
    that is not there, is refused `environment_not_found`, alike."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        invalid(key, f"`{key}` must be an environment's id.")
    if environment_store.get_environment(tx, principal_id, raw) is None:
        raise environment_not_found(param=key)
    return raw


def _keep_warm_seconds(raw: Any) -> int:
    """`uhpserver_keepWarmSeconds`: whole seconds from 0 (null and absent alike: off) to
    MAX_KEEP_WARM_SECONDS."""
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_KEEP_WARM_SECONDS:
        invalid(
            KEEP_WARM_FIELD,
            f"`{KEEP_WARM_FIELD}` must be an integer from 0 (off) to {MAX_KEEP_WARM_SECONDS}.",
        )
    return raw


def _timeout(key: str, raw: Any, limit: int) -> int | None:
    value = _positive_int(key, raw)
    if value is not None and value > limit:
        invalid(key, f"`{key}` may be at most {limit}.", max_timeout_seconds=limit)
    return value
