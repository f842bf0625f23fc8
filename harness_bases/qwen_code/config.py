"""The files a Qwen Code turn reads, written into the session's agent home before it starts.

`~/.qwen/settings.json` (rewritten every turn) switches off what would go online or call the
model behind the agent's back (auto-update, usage statistics, telemetry, the next-speaker
check, follow-up suggestions, managed auto-memory), approves every tool (`yolo`: the sandbox
is the boundary, and nobody is at a keyboard), and lists the disabled tools as
`permissions.deny` rules, which take them out of the model's tool list and refuse a call.

The gateway is the `openai` auth's `baseUrl`; its `apiKey` is `$UHP_GATEWAY_TOKEN`, which Qwen
Code expands from its environment, so the turn token is never written into a file (and no
`OPENAI_*` variable exists in the sandbox). Qwen Code passes its whole environment to every
shell command: `BASH_ENV` names a script, rewritten every turn, that each of those
(non-interactive) bash shells runs first; it unsets the credentials, so the commands the
agent runs never see them.

MCP servers (the gateway's MCP proxy routes) go into the same file's `mcpServers`, not into
ACP's `session/new`: only there can a server say `alwaysLoadTools`. Without it Qwen Code puts
MCP tools behind its ToolSearch/ToolCall bridge (declared to the model only when all deferred
schemas fit a token budget at session start). Each server's bearer token is
`$UHP_MCP_TOKEN_<n>` in its headers, expanded by the CLI like the API key. A plugin's stdio
servers go there too, as processes the CLI starts (harness_bases/plugin_folders.py).

Skills go whole into `~/.qwen/skills/<name>/`, where Qwen Code lists them to the model by name
and description; the appended system prompt says where each one's SKILL.md is.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from harness_bases.base import McpServerSpec, SkillBundle, StdioServerSpec, TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders
from harness_bases.skill_notes import skills_note

CONFIG_DIR = ".qwen"
SKILLS_DIR = "skills"
SCRUB_SCRIPT = "uhp/scrub-credentials.sh"
_MANAGED_SKILLS = "uhp/skills.json"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
MCP_TOKEN_ENV = "UHP_MCP_TOKEN_{index}"

SCRUB = """# Written by uhp-server: shell commands never inherit the agent's credentials.
for _uhp_var in $(compgen -e); do case "$_uhp_var" in UHP_*) unset "$_uhp_var";; esac; done
unset _uhp_var BASH_ENV
"""


def mcp_token_env(index: int) -> str:
    return MCP_TOKEN_ENV.format(index=index)


def mcp_servers(
    servers: tuple[McpServerSpec, ...], stdio_servers: tuple[StdioServerSpec, ...] = ()
) -> dict[str, dict]:
    """`mcpServers`: Streamable HTTP, and a plugin's stdio servers (the launcher's command
    line: the CLI's `$VAR` expansion never meets a string from the plugin), each trusted (no
    confirmation) with every tool offered."""
    offered = {"trust": True, "alwaysLoadTools": True}
    remote = {
        server.name: {
            "httpUrl": server.url,
            "headers": {"Authorization": f"Bearer ${mcp_token_env(index)}"},
            **offered,
        }
        for index, server in enumerate(servers)
    }
    stdio = {
        server.name: {"command": server.command, "args": list(server.args), **offered}
        for server in stdio_servers
    }
    return remote | stdio


def settings(turn: TurnSpec) -> dict:
    return {
        "general": {
            "enableAutoUpdate": False,
            "chatRecording": True,  # the session files that session/load resumes
            "gitCoAuthor": {"commit": False, "pr": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "model": {"skipNextSpeakerCheck": True, "generationConfig": {"maxRetries": 2}},
        "ui": {"enableFollowupSuggestions": False},
        "memory": {"enableManagedAutoMemory": False},
        "tools": {"approvalMode": "yolo"},
        "permissions": {"deny": list(turn.disabled_tools)},
        "mcpServers": mcp_servers(turn.mcp_servers, turn.stdio_servers),
        "security": {
            "auth": {
                "selectedType": "openai",
                "baseUrl": turn.gateway_url,
                "apiKey": f"${TOKEN_ENV}",
            },
            "folderTrust": {"enabled": False},
        },
    }


def system_prompt(turn: TurnSpec) -> str:
    """What `--append-system-prompt` adds: the turn's system prompt, and where each skill is
    (Qwen Code lists a skill's name and description only, so the agent could not find the
    files beside a SKILL.md before loading it)."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.skills:
        folders = f"{turn.paths.home}/{CONFIG_DIR}/{SKILLS_DIR}"
        how = "load one with the skill tool"
        parts.append(skills_note(turn.skills, lambda name: f"{folders}/{name}", how))
    return "\n\n".join(parts)


def scrub_script_path(home: str) -> str:
    return str(PurePosixPath(home) / CONFIG_DIR / SCRUB_SCRIPT)


def write_turn_files(turn: TurnSpec) -> None:
    host = real_dir(turn.host_home, CONFIG_DIR)
    data = json.dumps(settings(turn), indent=2, ensure_ascii=False).encode("utf-8")
    write_file(host / "settings.json", data)
    uhp = real_dir(host, "uhp")
    write_file(uhp / Path(SCRUB_SCRIPT).name, SCRUB.encode("utf-8"))
    materialise_skills(host, turn.skills)


def materialise_skills(host_config: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    write_skill_folders(host_config, SKILLS_DIR, _MANAGED_SKILLS, skills)
