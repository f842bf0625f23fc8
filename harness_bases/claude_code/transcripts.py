"""Whether a Claude Code conversation can be resumed: its transcript is still on disk.

The CLI keeps each conversation in `<config dir>/projects/<folder per cwd>/<session id>.jsonl`
and resumes by id from any folder. `--resume` of a missing transcript fails the whole turn,
so the base looks first, and starts a fresh conversation (saying so) when it is gone.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness_bases.claude_code.config import CONFIG_DIR

_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def transcript_exists(host_home: Path, session_id: str | None) -> bool:
    """True when `session_id` is a Claude Code session id whose transcript is in host_home.
    Links are not followed: the home is the agent's to write."""
    if not session_id or not _SESSION_ID.fullmatch(session_id):
        return False
    projects = host_home / CONFIG_DIR / "projects"
    if projects.is_symlink() or not projects.is_dir():
        return False
    for folder in projects.iterdir():
        transcript = folder / f"{session_id}.jsonl"
        if folder.is_symlink() or transcript.is_symlink():
            continue
        if transcript.is_file() and transcript.stat().st_size > 0:
            return True
    return False
