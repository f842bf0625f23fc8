"""The `uhpserver_baseConfig` of the two ACP agents the `acp` base is tested with (installed by
`uhp-server bases install acp`, harness_bases/acp_generic/install.py), as docs/acp.md shows
them. `python -m tests.support.acp_agents NAME` prints one as a harness body (for
scripts/conformance.sh --acp-agent NAME).
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Claude Code through the Claude Agent SDK: the Anthropic wire, at ANTHROPIC_BASE_URL.
CLAUDE_CODE_ACP: dict[str, Any] = {
    "command": ["claude-code-acp"],
    "env": {
        # Nothing online but the model: no update checks, telemetry or error reports.
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    },
    "model_access": {
        "wire": "anthropic",
        "base_url_env": "ANTHROPIC_BASE_URL",
        "token_env": "ANTHROPIC_AUTH_TOKEN",
        "model_env": "ANTHROPIC_MODEL",
    },
    "conversation_paths": [".claude", ".claude.json"],
}


def _codex_setting(key: str, value: str) -> list[str]:
    return ["-c", f"{key}={json.dumps(value)}"]


# Codex: the Responses wire, through a custom provider given on its command line; its key is
# the variable the provider's `env_key` names (never on the command line itself).
CODEX_ACP: dict[str, Any] = {
    "command": [
        "codex-acp",
        *_codex_setting("model", "${UHP_MODEL}"),
        *_codex_setting("model_provider", "gateway"),
        *_codex_setting("model_providers.gateway.name", "UHP gateway"),
        *_codex_setting("model_providers.gateway.base_url", "${UHP_GATEWAY_URL}"),
        *_codex_setting("model_providers.gateway.env_key", "CODEX_GATEWAY_TOKEN"),
        *_codex_setting("model_providers.gateway.wire_api", "responses"),
        # The sandbox is the sandbox (Codex's own fails inside it); nobody approves.
        *_codex_setting("sandbox_mode", "danger-full-access"),
        *_codex_setting("approval_policy", "never"),
        # A failure the provider answered is retried twice at most, as the codex base does.
        "-c",
        "model_providers.gateway.request_max_retries=2",
        "-c",
        "model_providers.gateway.stream_max_retries=2",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        "analytics.enabled=false",
    ],
    "model_access": {
        "wire": "responses",
        "base_url_env": "OPENAI_BASE_URL",
        "token_env": "CODEX_GATEWAY_TOKEN",
    },
    "conversation_paths": [".codex"],
}

AGENTS = {"claude-code-acp": CLAUDE_CODE_ACP, "codex-acp": CODEX_ACP}


def harness_body(name: str) -> dict[str, Any]:
    return {"name": f"{name} over ACP", "base": "acp", "uhpserver_baseConfig": AGENTS[name]}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in AGENTS:
        print(f"usage: python -m tests.support.acp_agents {'|'.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(harness_body(sys.argv[1])))
