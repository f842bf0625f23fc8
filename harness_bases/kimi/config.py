"""Kimi CLI's files for one turn, in its share folder (`KIMI_SHARE_DIR`, `~/.kimi` in the agent
home), all rewritten every turn.

- `config.toml`: the gateway is the only provider (`openai_legacy`: Chat Completions) and the
  turn's model the default one. Its key is left empty here: the launcher gives it the turn's
  token in memory (acp_launcher.py), so no secret is in the file. Every action is approved
  (`default_yolo`: nobody is at a keyboard; the sandbox is the boundary) and telemetry is off.
- `uhp-agent.yaml`: Kimi's built-in agent, extended with the turn's standing instructions
  (the system prompt and the skills) where its system prompt takes a role's additions.
- `skills/<name>/`: each skill whole, where Kimi looks for the user's skills.

Kimi keeps its sessions in the same folder (`sessions/`), so `session/load` resumes one in a
new process.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

import tomli_w

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders

SHARE_DIR = ".kimi"
CONFIG_FILE = "config.toml"
AGENT_FILE = "uhp-agent.yaml"
SKILLS_DIR = f"{SHARE_DIR}/skills"
SKILLS_RECORD = f"{SHARE_DIR}/uhp-skills.json"
MODEL_KEY = "uhp"
PROVIDER_KEY = "uhp"
# What Kimi budgets its context against (it compacts past 85% of it); the gateway's models
# do not say, and a model's real limit is the provider's to enforce.
CONTEXT_SIZE = 200_000


def share_dir(home: str) -> str:
    """Kimi's share folder under an agent home (sandbox or host view)."""
    return str(PurePosixPath(home) / SHARE_DIR)


def agent_file(home: str) -> str:
    return f"{share_dir(home)}/{AGENT_FILE}"


def kimi_config(turn: TurnSpec) -> dict[str, Any]:
    """The config.toml contents for a turn."""
    model: dict[str, Any] = {
        "provider": PROVIDER_KEY,
        "model": turn.model,
        "max_context_size": CONTEXT_SIZE,
    }
    if turn.images:  # it sends a prompt's images only to a model that takes them
        model["capabilities"] = ["image_in"]
    return {
        "default_model": MODEL_KEY,
        "default_thinking": False,
        "default_yolo": True,
        "telemetry": False,
        # Only the skills written here, not Claude Code's or Codex's folders.
        "merge_all_available_skills": False,
        "models": {MODEL_KEY: model},
        "providers": {
            PROVIDER_KEY: {"type": "openai_legacy", "base_url": turn.gateway_url, "api_key": ""}
        },
    }


def standing_instructions(turn: TurnSpec) -> str:
    """What goes into Kimi's system prompt: the system prompt and the skills."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.skills:
        names = ", ".join(skill.name for skill in turn.skills)
        parts.append(f"Skills provided for this task: {names}.")
    return "\n\n".join(parts)


def agent_spec(turn: TurnSpec) -> dict[str, Any]:
    """The agent file: the built-in agent with the turn's instructions as its role."""
    return {
        "version": 1,
        "agent": {
            "extend": "default",
            "system_prompt_args": {"ROLE_ADDITIONAL": standing_instructions(turn)},
        },
    }


def write_turn_files(turn: TurnSpec) -> Path:
    """Write config.toml, the agent file and the skills; returns the share folder."""
    folder = real_dir(turn.host_home, SHARE_DIR)  # never a link the agent left
    write_file(folder / CONFIG_FILE, tomli_w.dumps(kimi_config(turn)).encode("utf-8"), 0o600)
    # JSON is YAML: Kimi reads the agent file with yaml.safe_load.
    spec = json.dumps(agent_spec(turn), indent=2, ensure_ascii=False)
    write_file(folder / AGENT_FILE, spec.encode("utf-8"))
    write_skill_folders(turn.host_home, SKILLS_DIR, SKILLS_RECORD, turn.skills)
    return folder
