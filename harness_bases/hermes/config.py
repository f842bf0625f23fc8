"""Hermes' files for one turn, under HERMES_HOME in the session's agent home.

`config.yaml` makes our gateway the only provider (Chat Completions wire) and switches off
everything that would reach the internet on its own or call the model behind the agent's
back (session titles, memory and skill reviews, "smart" approvals, the tirith download).
No secret is written: the gateway token and the MCP tokens stay in environment variables
the config names. A plugin's stdio MCP servers are Hermes' own stdio servers, started
through the launcher (harness_bases/plugin_folders.py). Skills are copied whole into a
folder Hermes reads as external skills, rewritten every turn so a disabled skill disappears.
All of it is rewritten every turn, so a changed model, gateway URL or policy never meets a
stale file.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harness_bases.base import McpServerSpec, SkillBundle, StdioServerSpec, TurnSpec
from harness_bases.safe_files import real_dir, remove, write_file
from harness_bases.skill_notes import skills_note

PROVIDER_ID = "uhp_gateway"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
MCP_TOKEN_ENV = "UHP_MCP_TOKEN_{index}"
HERMES_DIR = ".hermes"
SKILLS_DIR = "uhp-skills"
INSTRUCTIONS_FILE = "uhp-instructions.md"


def hermes_home(root: str) -> str:
    """HERMES_HOME under an agent home, as a POSIX path (sandbox or host view)."""
    return str(PurePosixPath(root) / HERMES_DIR)


def mcp_token_env(index: int) -> str:
    return MCP_TOKEN_ENV.format(index=index)


def _mcp_servers(
    servers: tuple[McpServerSpec, ...], stdio_servers: tuple[StdioServerSpec, ...]
) -> dict[str, Any]:
    """The proxy routes, then a plugin's stdio servers: the launcher's command line, which
    Hermes starts with only its short list of safe variables (no `${VAR}` from the plugin
    meets its expansion)."""
    configured: dict[str, Any] = {}
    for index, server in enumerate(servers):
        entry: dict[str, Any] = {
            "url": server.url,
            # Hermes resolves ${VAR} in MCP config when it connects: the file holds no secret.
            "headers": {"Authorization": f"Bearer ${{{mcp_token_env(index)}}}"},
        }
        if server.transport == "sse":
            entry["transport"] = "sse"
        configured[server.name] = entry
    for stdio in stdio_servers:
        configured[stdio.name] = {"command": stdio.command, "args": list(stdio.args)}
    return configured


def hermes_config(turn: TurnSpec) -> dict[str, Any]:
    """The config.yaml contents for a turn."""
    home = hermes_home(turn.paths.home)
    config: dict[str, Any] = {
        "model": {"provider": PROVIDER_ID, "default": turn.model},
        "providers": {
            PROVIDER_ID: {
                "name": "UHP gateway",
                "base_url": turn.gateway_url,
                "key_env": TOKEN_ENV,
                "api_mode": "chat_completions",
                "default_model": turn.model,
            }
        },
        # No start-up probe of the Python toolchain: four subprocesses (`python3 -m pip
        # --version`, …) before every turn's first model call, about a second of CPU, for a
        # hint about the runtime image, which is the same every turn.
        "agent": {"api_max_retries": 2, "environment_probe": False},
        "mcp_servers": _mcp_servers(turn.mcp_servers, turn.stdio_servers),
        "skills": {"external_dirs": [f"{home}/{SKILLS_DIR}"], "creation_nudge_interval": 0},
        # Our sandbox is the security boundary and nobody is there to approve anything;
        # "smart" approvals would also ask the model behind the agent's back.
        "approvals": {"mode": "off"},
        "auxiliary": {"title_generation": {"enabled": False}},
        "memory": {"nudge_interval": 0},
        "curator": {"enabled": False},
        "checkpoints": {"enabled": False},
        "model_catalog": {"enabled": False},
        "lsp": {"enabled": False},
        "security": {"tirith_enabled": False, "allow_lazy_installs": False},
    }
    if turn.max_step is not None:
        # Hermes counts model calls, UHP counts tool calls: one more call for the answer.
        # Hermes reports reaching it (StepBudgetReached); the engine's count stops the tool
        # call past the budget before Hermes would run it.
        config["agent"]["max_turns"] = turn.max_step + 1
    return config


def instructions(turn: TurnSpec) -> str:
    """The standing instructions: the system prompt, the disabled tools, the skills (where
    each one is, and its description whole: Hermes' own listing has neither)."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        folders = f"{hermes_home(turn.paths.home)}/{SKILLS_DIR}"
        note = skills_note(
            turn.skills, lambda name: f"{folders}/{name}", "load one with skill_view"
        )
        parts.append(note)
    return "\n\n".join(parts)


def _mode(data: bytes) -> int:
    # The wire carries no file modes: scripts (a #! line) are made runnable.
    return 0o755 if data.startswith(b"#!") else 0o644


def _write_skills(home: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Every skill folder whole, in a folder that holds nothing else (so it is replaced)."""
    remove(home / SKILLS_DIR)
    root = real_dir(home, SKILLS_DIR)
    for skill in skills:
        folder = real_dir(root, skill.name)
        for file in skill.files:
            relative = PurePosixPath(file.path)  # validated not to escape the folder
            where = real_dir(folder, str(relative.parent))  # "." is the folder itself
            write_file(where / relative.name, file.data, _mode(file.data))


def write_turn_files(turn: TurnSpec) -> Path:
    """Write config.yaml, the instructions and the skills into HERMES_HOME; returns it."""
    home = real_dir(turn.host_home, HERMES_DIR)  # never a link the agent left
    text = yaml.safe_dump(hermes_config(turn), sort_keys=False, allow_unicode=True)
    write_file(home / "config.yaml", text.encode("utf-8"))  # no secret in it
    write_file(home / INSTRUCTIONS_FILE, instructions(turn).encode("utf-8"))
    _write_skills(home, turn.skills)
    return home
