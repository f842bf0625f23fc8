"""Skills for Claude Code: each whole folder under `$CLAUDE_CONFIG_DIR/skills/<name>/`.

Claude Code 2.1.328 reads personal skills from `<config dir>/skills/<name>/SKILL.md`, lists
them in the `system/init` message and names each one with its description in the model's
context, so the agent knows they exist and loads one with its `Skill` tool (checked
against the live CLI in tests). Folders written for the previous turn are removed first, so
a skill that was disabled or deleted is gone; skills the agent made itself are left alone.
"""

from __future__ import annotations

from pathlib import Path

from harness_bases.base import SkillBundle
from harness_bases.skill_folders import write_skill_folders

SKILLS_DIR = "skills"
_MANAGED = "uhp-skills.json"  # in the config dir: the folders this base wrote last turn


def materialise_skills(config_dir: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    write_skill_folders(config_dir, SKILLS_DIR, _MANAGED, skills)
