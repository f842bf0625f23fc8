"""A turn's skills named in the standing instructions, for a CLI whose own listing leaves out
where a skill is (Hermes, Qwen Code) or cuts its description short (Hermes, at 60
characters): each skill's SKILL.md path and its description whole, so the agent can choose a
skill on what its author wrote and read the files beside its SKILL.md (a plugin's skill
included: it is a skill folder like the harness's own).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import yaml

from harness_bases.base import SkillBundle

_FRONT_MATTER = re.compile(r"\A---\r?\n(.*?)\r?\n---", re.S)


def skill_description(skill: SkillBundle) -> str | None:
    """The `description` of the skill's SKILL.md front matter, on one line; None without."""
    data = next((f.data for f in skill.files if f.path == "SKILL.md"), b"")
    match = _FRONT_MATTER.match(data.decode("utf-8", "replace"))
    if match is None:
        return None
    try:
        front = yaml.safe_load(match.group(1))
    except (yaml.YAMLError, ValueError, RecursionError):  # as plugins/skills.py: never fatal
        return None
    described = front.get("description") if isinstance(front, dict) else None
    if not isinstance(described, str):
        return None
    return " ".join(described.split()) or None


def skills_note(skills: tuple[SkillBundle, ...], folder: Callable[[str], str], how: str) -> str:
    """The note: `folder(name)` is where the CLI sees a skill's folder; `how` says how the
    CLI's own tool loads one."""
    lines = [
        f"Skills are installed for you ({how}): each is a folder of instructions and "
        "resources for one kind of task. When a task matches a skill, read its SKILL.md "
        "first and use the files beside it as it says."
    ]
    for skill in skills:
        described = skill_description(skill)
        line = f"- {skill.name}: {folder(skill.name)}/SKILL.md"
        lines.append(f"{line} ({described})" if described else line)
    return "\n".join(lines)
