"""A SKILL.md's YAML front matter, read one way wherever a skill is read: when a plugin's
skills are derived (uhp_server/harnesses/plugins/skills.py) and when a base names a turn's
skills to its agent (skill_notes.py).

Bounded: front matter is looked for in the first MAX_BYTES of the file only. Agent Skills'
fields fit in a few hundred bytes, and PyYAML reads pathological YAML at tens of kilobytes a
second, so what one author writes never costs the server more than a fraction of a second.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_BYTES = 16 * 1024
_BLOCK = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(\r?\n|\Z)", re.S)


class FrontMatterError(ValueError):
    """Why a SKILL.md has no front matter this server reads (one sentence)."""


def front_matter(data: bytes) -> dict[str, Any]:
    """The front matter's mapping; FrontMatterError with the reason otherwise."""
    try:
        text = data.decode("utf-8")  # the whole file: decoding is cheap, parsing is not
    except UnicodeDecodeError:
        raise FrontMatterError("SKILL.md is not UTF-8 text.") from None
    match = _BLOCK.match(text[: MAX_BYTES + 16])
    if match is None:
        raise FrontMatterError(
            "SKILL.md does not begin with YAML front matter between `---` lines "
            f"within its first {MAX_BYTES // 1024} KiB."
        )
    try:
        front: Any = yaml.safe_load(match.group(1))
    # Also what PyYAML lets through: an integer past Python's 4300 digits (ValueError),
    # nesting past the recursion limit.
    except (yaml.YAMLError, ValueError, RecursionError):
        raise FrontMatterError("SKILL.md's front matter is not valid YAML.") from None
    if not isinstance(front, dict):
        raise FrontMatterError("SKILL.md's front matter is not a mapping.")
    return front
