"""A turn's skills named in the standing instructions, for a CLI whose own listing leaves out
where a skill is (Hermes, Qwen Code) or cuts its description short (Hermes, at 60
characters): each skill's SKILL.md path and its description whole, so the agent can choose a
skill on what its author wrote and read the files beside its SKILL.md (a plugin's skill
included: it is a skill folder like the harness's own).
"""

from __future__ import annotations

from collections.abc import Callable

from harness_bases.base import SkillBundle
from harness_bases.front_matter import FrontMatterError, front_matter


def skill_description(skill: SkillBundle) -> str | None:
    """The `description` of the skill's SKILL.md front matter, on one line; None without."""
    data = next((f.data for f in skill.files if f.path == "SKILL.md"), b"")
    try:
        front = front_matter(data)
    except FrontMatterError:  # as for a plugin's skill: never fatal
        return None
    described = front.get("description")
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
