"""The Plugins chapter's refusals (Errors §3): each one a client can act on, with the detail
the chapter names."""

from __future__ import annotations

from typing import NoReturn

from uhp_server.errors import ApiError


def plugin_invalid(param: str, path: str, reason: str) -> NoReturn:
    """Not a valid Agent Plugins package: no manifest, a fatal manifest error, a path that
    escapes the root, a `name` that contradicts the manifest. `path`: where in the package."""
    raise ApiError(
        422,
        "plugin_invalid",
        f"The plugin package is not valid: {reason}",
        param=param,
        detail={"path": path, "reason": reason},
    )


def unsupported_plugin_schema(param: str, schema: str, supported: list[str]) -> NoReturn:
    raise ApiError(
        422,
        "unsupported_plugin_schema",
        "The plugin's manifest targets an Agent Plugins version this server does not install.",
        param=param,
        detail={"schema": schema, "supported": supported},
    )


def unsupported_transport(param: str, transport: str, base: str, server: str) -> NoReturn:
    raise ApiError(
        422,
        "unsupported_transport",
        f"The plugin's MCP server '{server}' uses the {transport} transport, which this "
        f"server cannot run for the {base} base.",
        param=param,
        detail={"transport": transport, "base": base, "server": server},
    )


def plugin_conflict(component: str, name: str, between: tuple[str, str]) -> NoReturn:
    """Two owners of one name: `between` holds each, `harness` or a plugin's name."""
    what = {"mcp_server": "MCP server", "skill": "skill", "plugin": "plugin"}[component]
    raise ApiError(
        409,
        "plugin_conflict",
        f"The {what} name '{name}' is used twice ({between[0]} and {between[1]}); rename or "
        "disable one of them.",
        param="plugins",
        detail={"component": component, "name": name, "between": list(between)},
    )


def package_too_large(param: str, max_bytes: int) -> NoReturn:
    raise ApiError(
        413,
        "file_too_large",
        "The plugin package exceeds this server's size limit.",
        param=param,
        detail={"max_bytes": max_bytes},
    )


def plugin_not_found() -> ApiError:
    return ApiError(
        404, "plugin_not_found", "This harness has no plugin of that name.", param="plugin_name"
    )
