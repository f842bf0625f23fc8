"""Built-in skills: the folders under the repository's `skills/`, inherited by every harness.

A harness suppresses one with `{"name": "<built-in>", "enabled": false}` or replaces it with a
skill of its own under the same name. Found next to the source tree (a checkout or an
editable install) or, for a wheel install, under `<prefix>/share/uhp-server/skills`
(pyproject's data-files).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from storage.skills import StoredFile

log = logging.getLogger(__name__)

_CANDIDATES = (
    Path(__file__).resolve().parents[2] / "skills",
    Path(sys.prefix) / "share" / "uhp-server" / "skills",
)


@dataclass(frozen=True)
class BuiltinSkill:
    name: str
    files: tuple[StoredFile, ...]


def skills_root() -> Path | None:
    return next((p for p in _CANDIDATES if p.is_dir()), None)


def _load_folder(folder: Path) -> BuiltinSkill:
    files = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
            continue
        data = path.read_bytes()
        try:
            data.decode("utf-8")
            encoding = "text"
        except UnicodeDecodeError:
            encoding = "base64"
        files.append(StoredFile(path.relative_to(folder).as_posix(), data, encoding))
    return BuiltinSkill(folder.name, tuple(files))


@cache
def builtin_skills() -> dict[str, BuiltinSkill]:
    """Every built-in skill by name (read once; they ship with the server)."""
    root = skills_root()
    if root is None:
        log.warning("builtin_skills_missing")
        return {}
    found = {}
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and (folder / "SKILL.md").is_file():
            found[folder.name] = _load_folder(folder)
    return found
