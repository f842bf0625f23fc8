"""OpenHands CLI's files for one turn, under `~/.openhands` in the session's agent home (its
persistence folder: settings, conversations, skills), all rewritten every turn.

The pinned ACP server takes its model only from a settings file that would hold the key; our
launcher (acp_launcher.py) builds the agent from `uhp-turn.json` instead, which names the
gateway and the variables holding the turn token and each MCP server's token (no secret in
the file). The system prompt, the disabled tools and where the skills are go to the model with
each user message (a loaded conversation keeps the system message it began with). Skills are
written whole to `~/.openhands/skills/<name>/`, where OpenHands loads its user skills from.
The agent's shell reads `uhp-inputrc`: no bracketed-paste escapes around a command's output.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders
from harness_bases.skill_notes import skills_note

OPENHANDS_DIR = ".openhands"  # its persistence folder (OPENHANDS_PERSISTENCE_DIR)
CONVERSATIONS_DIR = f"{OPENHANDS_DIR}/conversations"
TURN_FILE = "uhp-turn.json"
INPUTRC_FILE = "uhp-inputrc"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
MCP_TOKEN_ENV = "UHP_MCP_TOKEN_{index}"
INPUTRC = "set enable-bracketed-paste off\n"


def openhands_dir(root: str) -> str:
    """The persistence folder under an agent home (sandbox or host view)."""
    return str(PurePosixPath(root) / OPENHANDS_DIR)


def mcp_token_env(index: int) -> str:
    return MCP_TOKEN_ENV.format(index=index)


def standing_instructions(turn: TurnSpec) -> str:
    """The system prompt, the disabled tools and the skills, for each user message."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        skills = f"{openhands_dir(turn.paths.home)}/skills"
        how = "OpenHands lists them as its user skills"
        parts.append(skills_note(turn.skills, lambda name: f"{skills}/{name}", how))
    return "\n\n".join(parts)


def turn_config(turn: TurnSpec) -> dict[str, Any]:
    """What the launcher builds the turn's agent from."""
    return {
        "model": turn.model,
        "base_url": turn.gateway_url,
        "token_env": TOKEN_ENV,
        "instructions": standing_instructions(turn),
        "disabled_tools": list(turn.disabled_tools),
        "max_output_tokens": turn.max_output_tokens,
        "mcp_servers": [
            {
                "name": server.name,
                "url": server.url,
                "transport": server.transport,
                "token_env": mcp_token_env(index),
            }
            for index, server in enumerate(turn.mcp_servers)
        ],
        "stdio_servers": [
            {"name": server.name, "command": server.command, "args": list(server.args)}
            for server in turn.stdio_servers
        ],
    }


def write_turn_files(turn: TurnSpec) -> Path:
    """Write the turn file, the shell's inputrc and the skills; returns the folder."""
    folder = real_dir(turn.host_home, OPENHANDS_DIR)  # never a link the agent left
    text = json.dumps(turn_config(turn), indent=2, ensure_ascii=False)
    write_file(folder / TURN_FILE, text.encode("utf-8"), 0o600)
    write_file(folder / INPUTRC_FILE, INPUTRC.encode("ascii"))
    write_skill_folders(folder, "skills", "uhp-skills.json", turn.skills)
    real_dir(turn.host_home, CONVERSATIONS_DIR)
    return folder
