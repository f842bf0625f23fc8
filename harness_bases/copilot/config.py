"""The files a Copilot CLI turn reads, written into the session's agent home before it starts.

`COPILOT_HOME` is `<agent home>/.copilot`; in it, rewritten every turn:

- `uhp/instructions/.github/instructions/uhp.instructions.md`: the turn's system prompt, in
  a folder named by `COPILOT_CUSTOM_INSTRUCTIONS_DIRS` (the CLI reads `*.instructions.md`
  there; the workspace's own AGENTS.md is the user's and is never touched).
- `skills/<name>/`: each enabled skill folder whole (its personal skills folder).
- `uhp/mcp.json`: the MCP servers (`--additional-mcp-config`), each the gateway's MCP proxy
  route with the turn token as its bearer token, written out: the pinned CLI expands no
  variable in an MCP header (`${VAR}`, `$VAR` and `${env:VAR}` were sent as they are). The
  token is the turn's own (useless outside its sandbox, revoked when the turn ends); the
  file is mode 600 in the agent home (never an artifact) and removed by the next turn
  without MCP servers.
- `uhp/session.json`: the conversation this turn runs in (`--session-id` for a new one, a
  UUID chosen here; `--resume` for one whose state is still in `session-state/`), read by
  the turn to report it.

The CLI keeps its conversations in `session-state/<id>/`, `session-store.db` and `logs/`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness_bases.base import TurnSpec
from harness_bases.safe_files import real_dir, remove_if_present, write_file
from harness_bases.skill_folders import write_skill_folders

HOME_DIR = ".copilot"
INSTRUCTIONS_DIR = "uhp/instructions"
INSTRUCTIONS_FILE = ".github/instructions/uhp.instructions.md"
SKILLS_DIR = "skills"
MCP_FILE = "uhp/mcp.json"
SESSION_FILE = "uhp/session.json"
SESSIONS_DIR = "session-state"
_MANAGED_SKILLS = "uhp/skills.json"
_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class TurnFiles:
    """What prepare() wrote, as the CLI sees it inside the sandbox."""

    home_dir: str
    instructions_dir: str
    mcp_config: str | None  # None: no MCP servers this turn
    session_id: str
    resume: bool  # True: `--resume` an existing conversation


def home_dir(root: str) -> str:
    return str(PurePosixPath(root) / HOME_DIR)


def session_known(host_home: Path, session_id: str | None) -> bool:
    """Whether the CLI's state for `session_id` is still in the agent home."""
    if not session_id or not _SESSION_ID.fullmatch(session_id):
        return False
    state = host_home / HOME_DIR / SESSIONS_DIR / session_id
    return state.is_dir() and not state.is_symlink()


def mcp_config(turn: TurnSpec) -> dict:
    servers = {
        server.name: {
            "type": "http" if server.transport == "http" else "sse",
            "url": server.url,
            "headers": {"Authorization": f"Bearer {server.bearer_token}"},
            "tools": ["*"],
        }
        for server in turn.mcp_servers
    }
    return {"mcpServers": servers}


def write_turn_files(turn: TurnSpec) -> TurnFiles:
    """Write this turn's config into the agent home; returns the paths the CLI sees."""
    host = real_dir(turn.host_home, HOME_DIR)
    inside = home_dir(turn.paths.home)
    instructions = PurePosixPath(INSTRUCTIONS_DIR) / INSTRUCTIONS_FILE
    where = real_dir(host, str(instructions.parent))
    if turn.system_prompt.strip():
        write_file(where / instructions.name, turn.system_prompt.encode("utf-8"))
    else:
        remove_if_present(where / instructions.name)
    write_skill_folders(host, SKILLS_DIR, _MANAGED_SKILLS, turn.skills)
    uhp = real_dir(host, "uhp")
    mcp = None
    if turn.mcp_servers:
        write_file(host / MCP_FILE, _json(mcp_config(turn)), 0o600)
        mcp = f"{inside}/{MCP_FILE}"
    else:
        remove_if_present(host / MCP_FILE)
    resume = session_known(turn.host_home, turn.native_session_id)
    session_id = turn.native_session_id if resume and turn.native_session_id else str(uuid.uuid4())
    record = {"id": session_id, "asked": turn.native_session_id, "resume": resume}
    write_file(uhp / PurePosixPath(SESSION_FILE).name, _json(record))
    return TurnFiles(
        home_dir=inside,
        instructions_dir=f"{inside}/{INSTRUCTIONS_DIR}",
        mcp_config=mcp,
        session_id=session_id,
        resume=resume,
    )


def read_session(host_home: Path) -> dict:
    """What prepare() chose for this turn's conversation."""
    try:
        found = json.loads((host_home / HOME_DIR / SESSION_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _json(value: dict) -> bytes:
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")
