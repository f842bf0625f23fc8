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

import json
from pathlib import Path, PurePosixPath

from harness_bases.base import SkillBundle
from harness_bases.safe_files import real_dir, remove, write_file

SKILLS_DIR = "skills"
_MANAGED = "uhp-skills.json"  # in CODEX_HOME: the folders this base wrote last turn


def skill_folder(codex_home: str, name: str) -> str:
    """Where a skill's folder is, as a POSIX path under codex_home (host or sandbox view)."""
    return str(PurePosixPath(codex_home) / SKILLS_DIR / name)


def _previous(codex_home: Path) -> list[str]:
    try:
        names = json.loads((codex_home / _MANAGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and n[0] != "."]


def _mode(data: bytes) -> int:
    # The wire carries no file modes: scripts (a #! line) are made runnable.
    return 0o755 if data.startswith(b"#!") else 0o644


def materialise_skills(codex_home: Path, skills: tuple[SkillBundle, ...]) -> None:
    """Write every skill folder whole, replacing what the previous turn wrote."""
    root = real_dir(codex_home, SKILLS_DIR)
    for name in {*_previous(codex_home), *(s.name for s in skills)}:
        target = root / name
        if target.is_symlink() or target.exists():
            remove(target)
    for skill in skills:
        folder = real_dir(root, skill.name)
        for file in skill.files:
            relative = PurePosixPath(file.path)
            where = real_dir(folder, str(relative.parent))  # "." is the folder itself
            write_file(where / relative.name, file.data, _mode(file.data))
    write_file(codex_home / _MANAGED, json.dumps([s.name for s in skills]).encode())
