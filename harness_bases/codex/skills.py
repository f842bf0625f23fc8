"""Skills for Codex: each whole folder under `$CODEX_HOME/skills/<name>/`.

Codex 0.169.0 reads skills from `$CODEX_HOME/skills` (and `~/.agents/skills`) and lists
each one whose SKILL.md has `name` and `description` front matter in the model's
instructions (checked against the recorded provider request in tests). Because a SKILL.md
without front matter is not listed, the developer instructions also name every skill's
folder (instructions.py). Codex keeps its own skills in `skills/.system`; that is left alone.
Folders written for the previous turn are removed first, so a skill that was disabled or
deleted is gone.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from harness_bases.base import SkillBundle
from harness_bases.skill_folders import write_skill_folders

SKILLS_DIR = "skills"
_MANAGED = "uhp-skills.json"  # in CODEX_HOME: the folders this base wrote last turn


def skill_folder(codex_home: str, name: str) -> str:
    """Where a skill's folder is, as a POSIX path under codex_home (host or sandbox view)."""
    return str(PurePosixPath(codex_home) / SKILLS_DIR / name)


def materialise_skills(codex_home: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    write_skill_folders(codex_home, SKILLS_DIR, _MANAGED, skills)
