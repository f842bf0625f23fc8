"""The files a Pi turn reads, written into the session's agent home before it starts.

`PI_CODING_AGENT_DIR` is `<agent home>/.pi/agent`; in it, rewritten every turn:

- `models.json`: the gateway as the only provider (`uhp`, Chat Completions). Its `apiKey` is
  the *name* of the variable holding the turn token (Pi resolves an env var name), so no
  secret is written into a file.
- `settings.json`: no install ping, no startup banner, at most two retries of a failed model
  call, and a prefix to every bash command that unsets the turn's credentials, so the
  commands the agent runs never see them.
- `uhp/system-prompt.md`: the task's system prompt (`--append-system-prompt` reads a file).
- `skills/<name>/`: each enabled skill folder whole (Pi lists skills found there itself).
- `uhp/mcp.json`: the MCP servers for the MCP extension (`mcp_extension.js`): the gateway's
  MCP proxy routes, each with the name of the variable holding its bearer token, and the
  plugins' stdio servers, each the command and arguments that start plugin_launcher.py on
  its launch file inside the sandbox (harness_bases/plugin_folders.py).

A plugin's skills are among the turn's skills (written in `skills/` like the harness's own);
its package is already in the agent home (plugin_folders.place_plugins).

Sessions are kept in `sessions/` (`--session-dir`), one `<time>_<id>.jsonl` file each.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness_bases.base import SkillBundle, TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders

AGENT_DIR = ".pi/agent"
PROVIDER = "uhp"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
SESSIONS_DIR = "sessions"
SKILLS_DIR = "skills"
SYSTEM_PROMPT_FILE = "uhp/system-prompt.md"
MCP_CONFIG_FILE = "uhp/mcp.json"
_MANAGED_SKILLS = "skills.json"  # in uhp/: the skill folders this base wrote last turn
# Pi's session ids are UUIDs; anything else is never looked up (it becomes a file pattern).
_SESSION_ID = re.compile(r"[0-9a-fA-F-]{8,64}")

# Bash runs `<prefix>\n<command>`: every UHP_* variable is gone before the command starts.
SHELL_PREFIX = (
    'for _uhp_var in $(compgen -e); do case "$_uhp_var" in UHP_*) unset "$_uhp_var";; esac; '
    "done; unset _uhp_var"
)


@dataclass(frozen=True)
class TurnFiles:
    """What prepare() wrote, as the CLI sees it inside the sandbox."""

    agent_dir: str
    sessions_dir: str
    system_prompt: str | None  # None: no system prompt this turn
    mcp_config: str | None  # None: no MCP servers this turn
    resume_file: str | None  # the session file to continue, when it is there


def agent_dir(root: str) -> str:
    return str(PurePosixPath(root) / AGENT_DIR)


def models_config(turn: TurnSpec) -> dict:
    model: dict = {"id": turn.model, "name": turn.model, "reasoning": False}
    if turn.images:  # pi leaves a prompt's images out for a text-only model
        model["input"] = ["text", "image"]
    provider = {
        "baseUrl": turn.gateway_url,
        "api": "openai-completions",
        "apiKey": TOKEN_ENV,
        # A plain Chat Completions request: the system prompt as a `system` message and no
        # reasoning_effort, which every provider behind the gateway understands.
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [model],
    }
    return {"providers": {PROVIDER: provider}}


def settings() -> dict:
    return {
        "enableInstallTelemetry": False,
        "quietStartup": True,
        "enableSkillCommands": False,
        "shellCommandPrefix": SHELL_PREFIX,
        "retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 500},
    }


def write_turn_files(turn: TurnSpec) -> TurnFiles:
    """Write this turn's config into the agent home; returns the paths the CLI sees."""
    host = real_dir(turn.host_home, AGENT_DIR)
    write_file(host / "models.json", _json(models_config(turn)), 0o600)
    write_file(host / "settings.json", _json(settings()))
    real_dir(host, SESSIONS_DIR)
    prompt_path = PurePosixPath(SYSTEM_PROMPT_FILE)
    where = real_dir(host, str(prompt_path.parent))
    write_file(where / prompt_path.name, turn.system_prompt.encode("utf-8"))
    materialise_skills(host, turn.skills)
    write_file(host / MCP_CONFIG_FILE, _json(mcp_config(turn)))
    inside = agent_dir(turn.paths.home)
    resume = session_file(host, turn.native_session_id)
    return TurnFiles(
        agent_dir=inside,
        sessions_dir=f"{inside}/{SESSIONS_DIR}",
        system_prompt=f"{inside}/{SYSTEM_PROMPT_FILE}" if turn.system_prompt.strip() else None,
        resume_file=f"{inside}/{SESSIONS_DIR}/{resume.name}" if resume else None,
        mcp_config=f"{inside}/{MCP_CONFIG_FILE}" if has_mcp(turn) else None,
    )


def mcp_token_env(index: int) -> str:
    return f"UHP_MCP_TOKEN_{index}"


def has_mcp(turn: TurnSpec) -> bool:
    """Whether the turn has MCP servers, so that Pi loads the MCP extension."""
    return bool(turn.mcp_servers or turn.stdio_servers)


def mcp_config(turn: TurnSpec) -> dict:
    """The extension's config: a remote server is reached at its proxy route with the token
    in the variable `tokenEnv` names; a stdio one is the process the extension starts."""
    servers: list[dict] = [
        {"name": server.name, "url": server.url, "tokenEnv": mcp_token_env(index)}
        for index, server in enumerate(turn.mcp_servers)
    ]
    servers += [
        {"name": server.name, "command": server.command, "args": list(server.args)}
        for server in turn.stdio_servers
    ]
    return {"servers": servers, "disabled": list(turn.disabled_tools)}


def session_file(host_agent_dir: Path, session_id: str | None) -> Path | None:
    """The session file of `session_id` in the agent home, or None when it is not there."""
    if not session_id or not _SESSION_ID.fullmatch(session_id):
        return None
    found = sorted((host_agent_dir / SESSIONS_DIR).glob(f"*_{session_id}.jsonl"))
    real = [p for p in found if p.is_file() and not p.is_symlink()]
    return real[-1] if real else None


def materialise_skills(host_agent_dir: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    write_skill_folders(host_agent_dir, SKILLS_DIR, f"uhp/{_MANAGED_SKILLS}", skills)


def _json(value: dict) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")
