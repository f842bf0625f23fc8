"""The files and command line of one Claude Code turn, all rewritten every turn.

- `settings.json` in the config dir holds the hard block for disabled tools: a
  `permissions.deny` rule per tool. `--disallowedTools` is ignored under
  `--dangerously-skip-permissions`; a deny rule in settings is not: the tool disappears
  from the model's tool list and a call to it is refused. The file is rewritten every turn,
  also when the list is empty, so a tool enabled again is really back.
- The MCP config names each server by the gateway's proxy URL; its bearer token is a
  `${VAR}` reference that the CLI expands from its own environment, so no token is written
  into a file. `--strict-mcp-config` keeps a `.mcp.json` in the workspace from adding
  servers that would bypass the gateway. A plugin's stdio server is a process the CLI
  starts: the launcher plugin_folders.py placed, on its launch file (no string from the
  plugin in this file, so the CLI's `${VAR}` expansion never reaches one).
- The system prompt goes into a file passed with `--append-system-prompt-file` (no argv
  limit), and `--system-prompt-snapshot off` makes a resumed conversation use this turn's
  instructions instead of the ones recorded on its first request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness_bases.base import McpServerSpec, StdioServerSpec, TurnSpec
from harness_bases.safe_files import real_dir, remove_if_present, write_file

CONFIG_DIR = ".claude"  # under the agent home: CLAUDE_CONFIG_DIR
OWN_DIR = "uhp"  # under the config dir: the files only this base writes
SETTINGS_FILE = "settings.json"
MCP_FILE = "mcp.json"
SYSTEM_PROMPT_FILE = "system-prompt.md"
TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"  # sent as `Authorization: Bearer`; the gateway accepts it
MCP_TOKEN_ENV_PREFIX = "UHP_MCP_TOKEN_"
# Transcripts are the conversation a later turn resumes; the CLI deletes them after 30 days
# by default, sooner than a session may sit idle.
TRANSCRIPT_RETENTION_DAYS = 36500


@dataclass(frozen=True)
class TurnFiles:
    """Where this turn's files are, as the CLI sees them (None: not used this turn)."""

    config_dir: str
    mcp_config: str
    system_prompt: str | None


def config_dir(home: str) -> str:
    return f"{home.rstrip('/')}/{CONFIG_DIR}"


def settings(disabled_tools: tuple[str, ...]) -> dict[str, Any]:
    """The settings.json contents: only what this base needs, nothing left from before."""
    deny = list(dict.fromkeys(t.strip() for t in disabled_tools if t.strip()))
    return {"permissions": {"deny": deny}, "cleanupPeriodDays": TRANSCRIPT_RETENTION_DAYS}


def mcp_token_env(index: int) -> str:
    return f"{MCP_TOKEN_ENV_PREFIX}{index}"


def mcp_config(
    servers: tuple[McpServerSpec, ...], stdio_servers: tuple[StdioServerSpec, ...] = ()
) -> dict[str, Any]:
    """`--mcp-config` contents: each server through the gateway's MCP proxy, and each
    plugin's stdio server started by its launcher."""
    entries: dict[str, Any] = {}
    for index, server in enumerate(servers):
        entries[server.name] = {
            "type": "sse" if server.transport == "sse" else "http",
            "url": server.url,
            "headers": {"Authorization": f"Bearer ${{{mcp_token_env(index)}}}"},
        }
    for stdio in stdio_servers:
        entries[stdio.name] = {"type": "stdio", "command": stdio.command, "args": list(stdio.args)}
    return {"mcpServers": entries}


def mcp_env(servers: tuple[McpServerSpec, ...]) -> dict[str, str]:
    """The environment the `${VAR}` references in mcp_config() expand from."""
    return {mcp_token_env(i): server.bearer_token for i, server in enumerate(servers)}


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=2).encode("utf-8")


def write_turn_files(turn: TurnSpec) -> TurnFiles:
    """Write settings, MCP config and system prompt for the turn; returns their sandbox paths."""
    host_config = real_dir(turn.host_home, CONFIG_DIR)  # never a link the agent left
    write_file(host_config / SETTINGS_FILE, _json(settings(turn.disabled_tools)), 0o600)
    own = real_dir(host_config, OWN_DIR)
    servers = mcp_config(turn.mcp_servers, turn.stdio_servers)
    write_file(own / MCP_FILE, _json(servers), 0o600)
    prompt = turn.system_prompt.strip()
    if prompt:
        write_file(own / SYSTEM_PROMPT_FILE, prompt.encode("utf-8", errors="replace"), 0o600)
    else:
        remove_if_present(own / SYSTEM_PROMPT_FILE)
    inside = config_dir(turn.paths.home)
    return TurnFiles(
        config_dir=inside,
        mcp_config=f"{inside}/{OWN_DIR}/{MCP_FILE}",
        system_prompt=f"{inside}/{OWN_DIR}/{SYSTEM_PROMPT_FILE}" if prompt else None,
    )
