"""Skills for Claude Code: each whole folder under `$CLAUDE_CONFIG_DIR/skills/<name>/`.

Claude Code 2.1.328 reads personal skills from `<config dir>/skills/<name>/SKILL.md`, lists
them in the `system/init` message and names each one with its description in the model's
context, so the agent knows they exist and loads one with its `Skill` tool (checked
against the live CLI in tests). Folders written for the previous turn are removed first, so
a skill that was disabled or deleted is gone; skills the agent made itself are left alone.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from harness_bases.base import SkillBundle
from harness_bases.safe_files import real_dir, remove_if_present, write_file

SKILLS_DIR = "skills"
_MANAGED = "uhp-skills.json"  # in the config dir: the folders this base wrote last turn


def _previous(config_dir: Path) -> list[str]:
    try:
        names = json.loads((config_dir / _MANAGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and n[0] != "."]


def _mode(data: bytes) -> int:
    # The wire carries no file modes: scripts (a #! line) are made runnable.
    return 0o755 if data.startswith(b"#!") else 0o644


def _inside(relative: PurePosixPath) -> bool:
    """A relative path that stays inside its folder (the engine validated it already;
    checked again because a wrong path here writes on the host)."""
    return not relative.is_absolute() and ".." not in relative.parts and relative.name != ""


def materialise_skills(config_dir: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    root = real_dir(config_dir, SKILLS_DIR)
    for name in {*_previous(config_dir), *(s.name for s in skills)}:
        remove_if_present(root / name)
    written = []
    for skill in skills:
        if "/" in skill.name or skill.name in ("", ".", ".."):
            continue
        folder = real_dir(root, skill.name)
        for file in skill.files:
            relative = PurePosixPath(file.path)
            if not _inside(relative):
                continue
            where = real_dir(folder, str(relative.parent))  # "." is the folder itself
            write_file(where / relative.name, file.data, _mode(file.data))
        written.append(skill.name)
    write_file(config_dir / _MANAGED, json.dumps(written).encode())
