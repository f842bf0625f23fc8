"""OpenCode's files for one turn, under XDG_CONFIG_HOME in the session's agent home.

`opencode.json` makes our gateway the only provider (Chat Completions through the bundled
`@ai-sdk/openai-compatible`), its key read from the environment (`{env:…}`: no secret in the
file), and switches off what would go online on its own (auto-update, sharing, the models.dev
catalogue and plugin installs are also off by environment, see base.py); the provider
catalogue it reads is an empty file, so it never parses its built-in one. The system prompt
and the disabled tools reach the model as an instructions file. Skills are written whole to
`<config>/skills/<name>/`, where OpenCode looks. Everything is rewritten every turn.
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
DATA_HOME = ".local/share"  # XDG_DATA_HOME: sessions live here, so a new process resumes
CONFIG_DIR = f"{CONFIG_HOME}/opencode"
# OpenCode npm-installs its plugin package (`@opencode-ai/plugin`) into its config folder
# from the registry unless a lock file says it is there. Nothing here loads plugins (the CLI
# runs `--pure`), so the lock file says so and nothing is fetched behind the agent's back.
PLUGIN_PACKAGE = "@opencode-ai/plugin"
CONFIG_FILE = "opencode.json"
INSTRUCTIONS_FILE = "uhp-instructions.md"
# OpenCode's provider catalogue (models.dev). Without a file it parses the snapshot built
# into the binary on every start: a third of a turn's CPU time and 150 MB, for providers
# that `enabled_providers` then drops. Our only provider is defined whole in opencode.json,
# so an empty catalogue is all it needs (bench/overhead.py --base opencode).
MODELS_FILE = "uhp-models.json"


def config_dir(root: str) -> str:
    """OpenCode's config folder under an agent home (sandbox or host view)."""
    return str(PurePosixPath(root) / CONFIG_DIR)


def opencode_config(turn: TurnSpec) -> dict[str, Any]:
    """The opencode.json contents for a turn."""
    model = {"name": turn.model, "tool_call": True, "reasoning": True}
    if turn.max_output_tokens:
        model["limit"] = {"context": 200_000, "output": turn.max_output_tokens}
    if turn.images:  # OpenCode sends a prompt's images only to a model that takes them
        model["attachment"] = True
        model["modalities"] = {"input": ["text", "image"], "output": ["text"]}
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
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
    return config


def instructions(turn: TurnSpec) -> str:
    """The standing instructions: the system prompt, the disabled tools, the skills."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(f"Do not use these tools: {', '.join(turn.disabled_tools)}.")
    if turn.skills:
        names = ", ".join(skill.name for skill in turn.skills)
        parts.append(f"Skills provided for this task (load one with the skill tool): {names}.")
    return "\n\n".join(parts)


def _mark_plugin_package_present(folder: Path) -> None:
    real_dir(folder, "node_modules")
    lock = {"packages": {"": {"dependencies": {PLUGIN_PACKAGE: "*"}}}}
    write_file(folder / "package-lock.json", json.dumps(lock).encode())


def write_turn_files(turn: TurnSpec) -> Path:
    """Write opencode.json, the instructions and the skills; returns the config folder."""
    folder = real_dir(turn.host_home, CONFIG_DIR)  # never a link the agent left
    text = json.dumps(opencode_config(turn), indent=2, ensure_ascii=False)
    write_file(folder / CONFIG_FILE, text.encode("utf-8"))
    write_file(folder / INSTRUCTIONS_FILE, instructions(turn).encode("utf-8"))
    write_skill_folders(folder, "skills", "uhp-skills.json", turn.skills)
    _mark_plugin_package_present(folder)
    write_file(folder / MODELS_FILE, b"{}")
    real_dir(turn.host_home, DATA_HOME)
    return folder
