"""A harness's configuration of its base itself (`uhpserver_baseConfig`): checked by the base,
its secrets kept apart, and the base bound to it for a turn.

Most bases take none (null). One that does (the `acp` base: the agent's command line, its
environment, how it reaches a model) validates it in `HarnessBase.parse_base_config`; the
secrets it holds (credential-like environment values) are sealed with the MCP credentials
(storage/mcp_secrets.py) under an origin of their own, so the harness keeps and a GET returns
only `uhp-secret:` references, and a reference to an MCP server's credential cannot be moved
into an agent's environment (where the agent, and so the caller, could read it). They are
resolved only when a turn starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness_bases.base import BaseConfigError, HarnessBase
from storage import mcp_secrets
from storage.unit import Tx
from uhp_server.errors import ApiError
from uhp_server.gateway.wires.registry import wires
from uhp_server.harnesses.config import BASE_CONFIG_FIELD
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.writes import PendingWrites

# The origin a base configuration's secrets are bound to: never a URL's, so never an MCP
# server's credential.
SECRET_ORIGIN = "uhpserver:base-config"
SECRET_REF = mcp_secrets.SECRET_REF


def wire_backends() -> Mapping[str, str]:
    """Each registered wire's gateway backend, what a base configuration may name."""
    return {name: wire.backend for name, wire in wires().items()}


def _param(path: str) -> str:
    if not path:
        return BASE_CONFIG_FIELD
    return f"{BASE_CONFIG_FIELD}{path}" if path.startswith("[") else f"{BASE_CONFIG_FIELD}.{path}"


def parse_base_config(
    writes: PendingWrites, raw: Any, base: HarnessBase | None
) -> dict[str, Any] | None:
    """The stored form of a body's `uhpserver_baseConfig`, or None; 400 invalid_input naming
    the field that is wrong."""
    if base is None:
        if raw is not None:
            invalid(BASE_CONFIG_FIELD, "The harness's base is not enabled on this server.")
        return None

    def seal(value: str, path: str) -> str:
        if not value.startswith(SECRET_REF):
            return SECRET_REF + writes.secret(value, SECRET_ORIGIN)
        row = mcp_secrets.get_secret_row(writes.tx, writes.principal_id, value[len(SECRET_REF) :])
        if row is None or row.origin != SECRET_ORIGIN:
            invalid(
                _param(path),
                "Unknown secret reference: pass back the one a GET of this configuration "
                "returned, or send the value itself.",
            )
        return value

    try:
        return base.parse_base_config(raw, seal, wire_backends())
    except BaseConfigError as exc:
        invalid(_param(exc.param), exc.message)


def resolve_secrets(tx: Tx, principal_id: str, stored: Any) -> tuple[Any, list[str]]:
    """The configuration with each secret reference replaced by its value, and the values
    (for the turn's log guard). A reference that no longer opens is refused."""
    found: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, str) and value.startswith(SECRET_REF):
            secret_id = value[len(SECRET_REF) :]
            secret = mcp_secrets.get_secret(tx, principal_id, secret_id, SECRET_ORIGIN)
            if secret is None:
                raise ApiError(
                    422,
                    "uhpserver_harness_not_runnable",
                    "A secret of the harness's base configuration cannot be read; "
                    "send its value again.",
                    param=BASE_CONFIG_FIELD,
                )
            found.append(secret)
            return secret
        return value

    return walk(stored), found


def bound(base: HarnessBase, config: dict[str, Any] | None) -> HarnessBase:
    """The base as the harness configured it; 422 when that harness cannot run a turn."""
    try:
        return base.for_harness(config, wire_backends())
    except BaseConfigError as exc:
        raise ApiError(
            422, "uhpserver_harness_not_runnable", exc.message, param=_param(exc.param)
        ) from None


def bound_or_base(base: HarnessBase, config: dict[str, Any] | None) -> HarnessBase:
    """The base as the harness configured it, for what only reads its declarations (its
    wire, for the models it can serve); the base itself when that harness cannot run."""
    try:
        return base.for_harness(config, wire_backends())
    except BaseConfigError:
        return base
