"""The files a Gemini CLI turn reads, written into the session's agent home before it starts.

`~/.gemini/settings.json` (rewritten every turn) switches off what would go online or call the
model behind the agent's back (auto-update and its notice, usage statistics, telemetry, IDE
integration, checkpointing, the next-speaker check, model-driven loop detection, a ripgrep
download) or delete a conversation the server still holds (the session cleanup), caps a model
call at 2 attempts (10 with backoff would hold a failed turn), uses the `gemini-api-key` auth
(the key is `$GEMINI_API_KEY`, the turn token, read from the environment: never written into a
file), and lists the disabled tools in `tools.exclude`, which takes them out of the tool
registry. Shell commands run without a pseudo-terminal (`enableInteractiveShell: false`): only
then does the ACP tool update carry the command's output (a terminal rendering is dropped from
it).

The system prompt goes into `~/.gemini/GEMINI.md`, the user-level context file Gemini CLI
adds to every request (removed when the turn has none). Skills go whole into
`~/.gemini/skills/<name>/`, where it lists them to the model.

A node load hook (`acp_fixes.mjs`, copied beside it every turn and started with `--import`)
fixes five faults of the pinned CLI: tool calls without their arguments, a `session/load` that
overwrites the conversation it is about to read, one that answers before its replay of the
history is sent, a process that does not exit when its stdin ends while an MCP server's
stream is open, and a session cleanup that deletes conversations the server still holds
(which a workspace's own settings could switch back on); and it routes the CLI's own
`ask_user` to us.

MCP servers (the gateway's MCP proxy routes) are not in this file: they come through ACP's
`session/new` `mcpServers`, their bearer token in a header there, never written to disk; so do
a plugin's stdio servers (the launcher's command line, harness_bases/plugin_folders.py).

Gemini CLI passes its environment to every shell command: `BASH_ENV` names a script,
rewritten every turn, that each of those (non-interactive) bash shells runs first; it unsets
the credentials, so the commands the agent runs never see them.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from harness_bases.base import SkillBundle, TurnSpec
from harness_bases.safe_files import real_dir, remove, write_file
from harness_bases.skill_folders import write_skill_folders

CONFIG_DIR = ".gemini"
SKILLS_DIR = "skills"
CONTEXT_FILE = "GEMINI.md"
SCRUB_SCRIPT = "uhp/scrub-credentials.sh"
ACP_FIXES = "uhp/acp_fixes.mjs"
_MANAGED_SKILLS = "uhp/skills.json"
TOKEN_ENV = "GEMINI_API_KEY"
BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"

SCRUB = """# Written by uhp-server: shell commands never inherit the agent's credentials.
unset GEMINI_API_KEY GOOGLE_GEMINI_BASE_URL BASH_ENV
"""


def settings(turn: TurnSpec) -> dict:
    return {
        "general": {
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "checkpointing": {"enabled": False},
            # Its default, 10 attempts with backoff, holds a failed turn for minutes.
            "maxAttempts": 2,
            # The server decides how long a session lives. The CLI's own cleanup, run as each
            # process starts, deletes conversations idle past 30 days, and deletes every file
            # that shares a short id with a file that has no conversation in it. A
            # `session/load` in a later minute than the conversation's file leaves exactly
            # such a file, so the next start deleted the conversation it had just resumed.
            "sessionRetention": {"enabled": False},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False},
        "model": {"skipNextSpeakerCheck": True, "disableLoopDetection": True},
        "tools": {
            "exclude": list(turn.disabled_tools),
            "useRipgrep": False,
            "shell": {"enableInteractiveShell": False},
        },
        "security": {
            "auth": {"selectedType": "gemini-api-key"},
            "folderTrust": {"enabled": False},
        },
    }


def scrub_script_path(home: str) -> str:
    return str(PurePosixPath(home) / CONFIG_DIR / SCRUB_SCRIPT)


def acp_fixes_path(home: str) -> str:
    """The node `--import` module that fixes the CLI's ACP server (see the .mjs)."""
    return str(PurePosixPath(home) / CONFIG_DIR / ACP_FIXES)


def write_turn_files(turn: TurnSpec) -> None:
    host = real_dir(turn.host_home, CONFIG_DIR)
    data = json.dumps(settings(turn), indent=2, ensure_ascii=False).encode("utf-8")
    write_file(host / "settings.json", data)
    uhp = real_dir(host, "uhp")
    write_file(uhp / Path(SCRUB_SCRIPT).name, SCRUB.encode("utf-8"))
    hook = (Path(__file__).parent / Path(ACP_FIXES).name).read_bytes()
    write_file(uhp / Path(ACP_FIXES).name, hook)
    context = host / CONTEXT_FILE
    if turn.system_prompt.strip():
        write_file(context, turn.system_prompt.encode("utf-8"))
    elif context.is_symlink() or context.exists():
        remove(context)
    materialise_skills(host, turn.skills)


def materialise_skills(host_config: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    write_skill_folders(host_config, SKILLS_DIR, _MANAGED_SKILLS, skills)
