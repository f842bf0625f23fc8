"""A package's skills (Agent Plugins §7.1): each immediate child folder of `skills/` with a
`SKILL.md`, never deeper. Each must conform to Agent Skills: front matter whose `name` is
its folder's name (1-64 lowercase letters, digits and single hyphens) and a `description`
(1-1024 characters). One that does not is skipped, with the reason; the rest still load."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness_bases.front_matter import FrontMatterError, front_matter
from storage.skills import StoredFile
from uhp_server.harnesses.plugins.skipped import Skipped

SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
MAX_DESCRIPTION = 1024
_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass(frozen=True)
class PluginSkill:
    name: str
    description: str

    def wire(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}


def find_skills(files: list[StoredFile]) -> tuple[list[PluginSkill], list[Skipped]]:
    """The package's skills, in folder order, and the folders that are not one."""
    by_path = {f.path: f for f in files}
    if SKILLS_DIR in by_path:  # a file where the folder belongs (§6.2)
        return [], [Skipped(SKILLS_DIR, "`skills` is a file, not a folder; no skill loaded.")]
    # A folder is what has files below it; a file directly under skills/ is no skill.
    parts = (f.path.split("/") for f in files)
    folders = sorted({p[1] for p in parts if len(p) > 2 and p[0] == SKILLS_DIR})
    skills: list[PluginSkill] = []
    skipped: list[Skipped] = []
    for folder in folders:
        where = f"{SKILLS_DIR}/{folder}"
        skill_md = by_path.get(f"{where}/{SKILL_FILE}")
        if skill_md is None:
            skipped.append(Skipped(where, "The folder has no SKILL.md; it is not a skill."))
            continue
        found = _skill(folder, skill_md.data)
        if isinstance(found, str):
            skipped.append(Skipped(where, found))
        else:
            skills.append(found)
    return skills, skipped


def _skill(folder: str, data: bytes) -> PluginSkill | str:
    """The skill, or why it does not conform to Agent Skills."""
    try:
        front = front_matter(data)
    except FrontMatterError as exc:
        return str(exc)
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or len(name) > 64 or not _NAME.fullmatch(name):
        return (
            "The skill's `name` must be 1-64 lowercase letters, digits and single hyphens, "
            "not starting or ending with one."
        )
    if name != folder:
        return f"The skill's `name` ({name}) must be its folder's name ({folder})."
    if not isinstance(description, str) or not description.strip():
        return "The skill has no `description`."
    if len(description) > MAX_DESCRIPTION:
        return f"The skill's `description` is longer than {MAX_DESCRIPTION} characters."
    return PluginSkill(name, description.strip())
