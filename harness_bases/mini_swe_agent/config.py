"""The files a mini-swe-agent turn reads, written into the session's agent home before it starts.

In `<agent home>/.mini-swe-agent/`, rewritten every turn:

- `uhp/turn.json`: the driver's settings: the model and the gateway (the token only by the
  name of the variable that holds it), the system prompt, the session to continue, whether
  the bash tool is offered, the images to show.
- `skills/<name>/`: each enabled skill folder whole, named in the system prompt (mini-swe-agent
  has no skills of its own: the agent reads a skill's SKILL.md with `cat`).

Conversations are kept in `sessions/<id>.json` (driver.py); mini-swe-agent's global config
folder is `config/` (`MSWEA_GLOBAL_CONFIG_DIR`), so nothing lands in `~/.config`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, write_file
from harness_bases.skill_folders import write_skill_folders
from harness_bases.skill_notes import skills_note

HOME_DIR = ".mini-swe-agent"
TOKEN_ENV = "UHP_GATEWAY_TOKEN"
TURN_FILE = "uhp/turn.json"
SESSIONS_DIR = "sessions"
SKILLS_DIR = "skills"
CONFIG_DIR = "config"
_MANAGED_SKILLS = "uhp/skills.json"
# The tool the model is offered; naming it in disabledTools leaves the model without tools.
BASH_TOOL = "bash"
# Seconds one command may run before it is stopped (the turn's own budget still applies).
COMMAND_TIMEOUT = 600
# The driver's session ids are uuid4 hex; anything else is never looked up.
_SESSION_ID = re.compile(r"[0-9a-f]{32}")

STANDING_PROMPT = (
    "You are a helpful assistant that can interact with a computer. You can run bash commands "
    "with the `bash` tool; each runs in a new subshell in the working directory {cwd}, so "
    "prefix a command with `cd <dir> &&` to run it elsewhere. Work step by step. When the task "
    "is done, reply with your final answer without calling a tool."
)
NO_TOOLS_PROMPT = (
    "You are a helpful assistant. You have no tools in this conversation: answer from what "
    "you know."
)


@dataclass(frozen=True)
class TurnFiles:
    """What prepare() wrote, as the CLI sees it inside the sandbox."""

    home_dir: str
    turn_file: str


def home_dir(root: str) -> str:
    return str(PurePosixPath(root) / HOME_DIR)


def bash_enabled(turn: TurnSpec) -> bool:
    return BASH_TOOL not in set(turn.disabled_tools)


def system_prompt(turn: TurnSpec) -> str:
    """The standing prompt, the turn's own system prompt, and the skills it may read."""
    home = home_dir(turn.paths.home)
    if not bash_enabled(turn):
        parts = [NO_TOOLS_PROMPT]
    else:
        parts = [STANDING_PROMPT.format(cwd=turn.paths.workspace)]
        if turn.skills:
            how = "read a skill's SKILL.md with `cat`"
            parts.append(skills_note(turn.skills, lambda n: f"{home}/{SKILLS_DIR}/{n}", how))
    if turn.system_prompt.strip():
        parts.append(turn.system_prompt)
    return "\n\n".join(parts)


def session_known(turn: TurnSpec) -> bool:
    """Whether the conversation the turn continues is still in the agent home."""
    wanted = turn.native_session_id
    if not wanted or not _SESSION_ID.fullmatch(wanted):
        return False
    found = turn.host_home / HOME_DIR / SESSIONS_DIR / f"{wanted}.json"
    return found.is_file() and not found.is_symlink()


def turn_settings(turn: TurnSpec) -> dict:
    home = home_dir(turn.paths.home)
    return {
        "model": turn.model,
        "api_base": turn.gateway_url,
        "token_env": TOKEN_ENV,
        "system_prompt": system_prompt(turn),
        "sessions_dir": f"{home}/{SESSIONS_DIR}",
        # A lost conversation is asked for anyway: the driver says it could not be resumed.
        "session_id": turn.native_session_id if turn.native_session_id else None,
        "cwd": turn.paths.workspace,
        "command_timeout": COMMAND_TIMEOUT,
        "command_env": {"PAGER": "cat", "MANPAGER": "cat", "TQDM_DISABLE": "1"},
        "bash": bash_enabled(turn),
        "max_output_tokens": turn.max_output_tokens,
        "images": [{"path": i.path, "media_type": i.media_type} for i in turn.images],
    }


def write_turn_files(turn: TurnSpec) -> TurnFiles:
    """Write this turn's settings and skills into the agent home; the paths the CLI sees."""
    host = real_dir(turn.host_home, HOME_DIR)
    real_dir(host, SESSIONS_DIR)
    real_dir(host, CONFIG_DIR)
    where = real_dir(host, str(PurePosixPath(TURN_FILE).parent))
    settings = json.dumps(turn_settings(turn), indent=2, ensure_ascii=False)
    write_file(where / PurePosixPath(TURN_FILE).name, settings.encode("utf-8"), 0o600)
    write_skill_folders(host, SKILLS_DIR, _MANAGED_SKILLS, turn.skills)
    inside = home_dir(turn.paths.home)
    return TurnFiles(home_dir=inside, turn_file=f"{inside}/{TURN_FILE}")
