"""Codex's config.toml for one turn: our gateway as the only provider, nothing else online.

Every key was checked against `codex app-server --strict-config` of the pinned version
(tests/test_codex_base.py does so on each run). Rewritten every turn so a changed model
or a newer policy never meets a stale file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

from harness_bases.base import McpServerSpec, StdioServerSpec
from harness_bases.safe_files import write_file

PROVIDER_ID = "uhp_gateway"  # never a built-in id such as "openai": config cannot override those
TOKEN_ENV = "UHP_GATEWAY_TOKEN"

# Features that reach the internet on their own (plugin sync talks to github.com and
# chatgpt.com at start-up) or that can stall a turn on a closed network.
USER_INPUT_FEATURE = "default_mode_request_user_input"
_DISABLED_FEATURES = (
    "plugins",
    "remote_plugin",
    "apps",
    "tool_suggest",
    "api_key_model_discovery",
    "skill_mcp_dependency_install",
    # With this on, an unreachable gateway means "waiting for network" forever; off, the
    # turn fails after the retries below.
    "unbounded_connection_retries",
)


# How long Codex waits for an MCP server to start (initialize + tools/list through the
# gateway's proxy); the engine already checked the server can be reached.
MCP_STARTUP_TIMEOUT_SEC = 20


def mcp_server_tables(
    servers: tuple[McpServerSpec, ...], stdio_servers: tuple[StdioServerSpec, ...] = ()
) -> dict[str, Any]:
    """`[mcp_servers.<name>]` for each server: the gateway's MCP proxy, authenticated with
    the turn token read from the CLI's own environment (never written into a file).
    Codex speaks Streamable HTTP only, so other transports are left out (the engine tells
    the user: CodexBase.mcp_transports). A plugin's stdio server is the process Codex starts
    (plugin_folders.py's launcher)."""
    tables: dict[str, Any] = {
        server.name: {
            "url": server.url,
            "bearer_token_env_var": TOKEN_ENV,
            "startup_timeout_sec": MCP_STARTUP_TIMEOUT_SEC,
        }
        for server in servers
        if server.transport == "http"
    }
    for stdio in stdio_servers:
        tables[stdio.name] = {
            "command": stdio.command,
            "args": list(stdio.args),
            "startup_timeout_sec": MCP_STARTUP_TIMEOUT_SEC,
        }
    return tables


def codex_config(
    model: str,
    gateway_url: str,
    mcp_servers: tuple[McpServerSpec, ...] = (),
    ask_user: bool = False,
    stdio_servers: tuple[StdioServerSpec, ...] = (),
) -> dict[str, Any]:
    """The config.toml contents for a turn; `ask_user`: someone answers request_user_input."""
    features = {name: False for name in _DISABLED_FEATURES}
    if ask_user:
        # request_user_input is a Plan-mode tool; this flag (the pinned version's, "under
        # development") lets the Default mode we run in call it. Its call then comes to us as
        # an `item/tool/requestUserInput` request (harness_bases/codex/questions.py).
        features[USER_INPUT_FEATURE] = True
    return {
        "model": model,
        "model_provider": PROVIDER_ID,
        # Our sandbox is the sandbox; Codex's own (bwrap/landlock) fails inside it.
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        "hide_agent_reasoning": False,
        # Asks the Responses API for reasoning summaries ("auto" is what every model accepts).
        "model_reasoning_summary": "auto",
        "cli_auth_credentials_store": "file",  # no keyring daemon in a sandbox
        "history": {"persistence": "none"},  # the TUI's prompt history; resume uses rollouts
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "otel": {"exporter": "none"},
        "features": features,
        "shell_environment_policy": {
            "inherit": "all",  # the CLI's env is already built from an allow-list
            # Tool commands do not inherit the gateway token. (They run as the CLI's uid and
            # could read it in /proc; it is bound to this turn's sandbox and dies with it.)
            "exclude": [TOKEN_ENV],
            "ignore_default_excludes": False,  # also drop *KEY*, *SECRET*, *TOKEN*
        },
        "model_providers": {
            PROVIDER_ID: {
                "name": "UHP gateway",
                "base_url": gateway_url,
                "env_key": TOKEN_ENV,
                "wire_api": "responses",
                # The gateway is local; Codex's defaults (4 x 5 attempts with back-off) turn
                # one upstream error into a minute of silence.
                "request_max_retries": 2,
                "stream_max_retries": 2,
            }
        },
        "mcp_servers": mcp_server_tables(mcp_servers, stdio_servers),
    }


def write_config(
    codex_home: Path,
    model: str,
    gateway_url: str,
    mcp_servers: tuple[McpServerSpec, ...] = (),
    ask_user: bool = False,
    stdio_servers: tuple[StdioServerSpec, ...] = (),
) -> Path:
    """Write `config.toml` into codex_home (created if needed); returns its path."""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    config = codex_config(model, gateway_url, mcp_servers, ask_user, stdio_servers)
    write_file(path, tomli_w.dumps(config).encode("utf-8"), 0o600)
    return path
