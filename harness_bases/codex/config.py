"""Codex's config.toml for one turn: our gateway as the only provider, nothing else online.

Every key was checked against `codex app-server --strict-config` of the pinned version
(tests/test_codex_base.py does so on each run). Rewritten every turn so a changed model
or a newer policy never meets a stale file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

PROVIDER_ID = "uhp_gateway"  # never a built-in id such as "openai": config cannot override those
TOKEN_ENV = "UHP_GATEWAY_TOKEN"

# Features that reach the internet on their own (plugin sync talks to github.com and
# chatgpt.com at start-up) or that can stall a turn on a closed network.
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


def codex_config(model: str, gateway_url: str) -> dict[str, Any]:
    """The config.toml contents for a turn."""
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
        "features": {name: False for name in _DISABLED_FEATURES},
        "shell_environment_policy": {
            "inherit": "all",  # the CLI's env is already built from an allow-list
            # The gateway token is the agent's only credential: tool commands never see it.
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
    }


def write_config(codex_home: Path, model: str, gateway_url: str) -> Path:
    """Write `config.toml` into codex_home (created if needed); returns its path."""
    codex_home.mkdir(parents=True, exist_ok=True)
    path = codex_home / "config.toml"
    path.write_text(tomli_w.dumps(codex_config(model, gateway_url)), encoding="utf-8")
    return path
