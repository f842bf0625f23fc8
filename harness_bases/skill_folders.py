"""Skill folders written where a CLI looks for them: `<skills dir>/<name>/SKILL.md` and the
rest of each folder, the layout Claude Code, Codex, OpenCode, Pi and Qwen Code all read.

Every turn writes each skill's folder whole. The folders written the turn before (named in a
record file the base chooses) are removed first, so a skill that was disabled or deleted is
gone; folders the agent made itself are left alone. Plugin packages are written the same way
(plugin_folders.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol

from harness_bases.base import SkillFile
from harness_bases.safe_files import real_dir, remove_if_present, write_file


class Folder(Protocol):
    """A named folder of files: a SkillBundle, a PluginPackage."""

    @property
    def name(self) -> str: ...

    @property
    def files(self) -> tuple[SkillFile, ...]: ...


def write_skill_folders(home: Path, skills_dir: str, record: str, skills: Sequence[Folder]) -> None:
    """Write `skills` under `home/skills_dir`, replacing what the previous turn wrote; the
    names written are kept in `home/record` for the next turn."""
    root = real_dir(home, skills_dir)
    for name in {*_previous(home / record), *(s.name for s in skills)}:
        if _plain_name(name):
            remove_if_present(root / name)
    written = []
    for skill in skills:
        if not _plain_name(skill.name):
            continue
        write_folder(real_dir(root, skill.name), skill.files)
        written.append(skill.name)
    record_path = PurePosixPath(record)
    write_file(
        real_dir(home, str(record_path.parent)) / record_path.name, json.dumps(written).encode()
    )


def write_folder(folder: Path, files: Sequence[SkillFile]) -> None:
    """Write `files` into `folder` (a real folder), each at its relative path."""
    for file in files:
        relative = PurePosixPath(file.path)
        if not _inside(relative):
            continue
        where = real_dir(folder, str(relative.parent))  # "." is the folder itself
        write_file(where / relative.name, file.data, _mode(file))


def _previous(record: Path) -> list[str]:
    try:
        names = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and _plain_name(n)]


def _plain_name(name: str) -> bool:
    """One folder name, not hidden (Codex keeps its own skills in `.system`)."""
    return bool(name) and "/" not in name and name[0] != "."


def _inside(relative: PurePosixPath) -> bool:
    """A relative path that stays inside its folder (the engine validated it already;
    checked again because a wrong path here writes on the host)."""
    return not relative.is_absolute() and ".." not in relative.parts and relative.name != ""


def _mode(file: SkillFile) -> int:
    # The wire carries no file modes: scripts (a #! line) are made runnable, and so is a
    # plugin's stdio server command.
    return 0o755 if file.executable or file.data.startswith(b"#!") else 0o644
