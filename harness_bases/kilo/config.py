"""Kilo Code CLI's files for one turn, under XDG_CONFIG_HOME in the session's agent home.

Kilo's CLI is built from OpenCode and reads the same config shape (`kilo.json`, named by
`KILO_CONFIG`): our gateway is the only provider (Chat Completions through the bundled
`@ai-sdk/openai-compatible`), its key read from the environment (`{env:…}`: no secret in the
file); what would go online on its own (auto-update, sharing, the models catalogue, the Kilo
gateway, telemetry, session ingest, plugin installs) is off, here or by environment (see
base.py); the provider catalogue it reads is an empty file. The system prompt and the disabled
tools reach the model as an instructions file. Skills are written whole to
`<config>/skills/<name>/`, where Kilo looks. Everything is rewritten every turn.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders

PROVIDER_ID = "uhp"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
CONFIG_HOME = ".config"  # XDG_CONFIG_HOME under the agent home
DATA_HOME = ".local/share"  # XDG_DATA_HOME: its sessions database, so a new process resumes
STATE_HOME = ".local/state"
CONFIG_DIR = f"{CONFIG_HOME}/kilo"
CONFIG_FILE = "kilo.json"
INSTRUCTIONS_FILE = "uhp-instructions.md"
# Its provider catalogue: without a file it parses the snapshot built into the binary on
# every start, for providers `enabled_providers` then drops.
MODELS_FILE = "uhp-models.json"


def config_dir(root: str) -> str:
    """Kilo's config folder under an agent home (sandbox or host view)."""
    return str(PurePosixPath(root) / CONFIG_DIR)


def kilo_config(turn: TurnSpec) -> dict[str, Any]:
    """The kilo.json contents for a turn."""
    model: dict[str, Any] = {"name": turn.model, "tool_call": True, "reasoning": True}
    if turn.max_output_tokens:
        model["limit"] = {"context": 200_000, "output": turn.max_output_tokens}
    if turn.images:  # it sends a prompt's images only to a model that takes them
        model["attachment"] = True
        model["modalities"] = {"input": ["text", "image"], "output": ["text"]}
    return {
        "$schema": "https://app.kilo.ai/config.json",
        "model": f"{PROVIDER_ID}/{turn.model}",
        "small_model": f"{PROVIDER_ID}/{turn.model}",
        "enabled_providers": [PROVIDER_ID],
        "provider": {
            PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "UHP gateway",
                "options": {"baseURL": turn.gateway_url, "apiKey": f"{{env:{TOKEN_ENV}}}"},
                "models": {turn.model: model},
            }
        },
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "lsp": False,
        "formatter": False,
        # Its own bubblewrap sandbox for commands cannot nest inside ours (no user namespaces
        # there), and ours is the boundary; outside one it runs commands with $SHELL.
        "sandbox": {"enabled": False},
        # Nobody is there to approve anything; the sandbox is the boundary. A disabled tool
        # is denied (a permission rule, which also beats the allows here).
        "permission": {
            **{"edit": "allow", "bash": "allow", "webfetch": "allow"},
            **{tool: "deny" for tool in turn.disabled_tools},
        },
        "instructions": [f"{config_dir(turn.paths.home)}/{INSTRUCTIONS_FILE}"],
        # No model call behind the agent's back: session titles are off.
        "agent": {"title": {"disable": True}},
    }


def instructions(turn: TurnSpec) -> str:
    """The standing instructions: the system prompt, the disabled tools, the skills."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        names = ", ".join(skill.name for skill in turn.skills)
        parts.append(f"Skills provided for this task (load one with the skill tool): {names}.")
    return "\n\n".join(parts)


def write_turn_files(turn: TurnSpec) -> Path:
    """Write kilo.json, the instructions and the skills; returns the config folder."""
    folder = real_dir(turn.host_home, CONFIG_DIR)  # never a link the agent left
    text = json.dumps(kilo_config(turn), indent=2, ensure_ascii=False)
    write_file(folder / CONFIG_FILE, text.encode("utf-8"))
    write_file(folder / INSTRUCTIONS_FILE, instructions(turn).encode("utf-8"))
    write_skill_folders(folder, "skills", "uhp-skills.json", turn.skills)
    write_file(folder / MODELS_FILE, b"{}")
    real_dir(turn.host_home, DATA_HOME)
    return folder
