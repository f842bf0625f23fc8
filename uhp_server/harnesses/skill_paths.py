"""Paths inside a skill folder (or a plugin package): relative, inside the folder, one
spelling per file.

A path is normalised as a POSIX path ("./a//b" is "a/b") and refused when it could mean a
file outside the folder or a second name for another file: absolute, `..` anywhere, a
backslash (a separator on Windows clients: `..\\x`), NUL or control characters, a
bidirectional control (U+202E before `txt.exe` shows it as `exe.txt`), a Windows drive (`C:`),
or a name repeated, also differing only in case (one file on case-insensitive filesystems) or
used both as a file and as a folder.

How a refusal is raised is the caller's: a skill's is `invalid_input`, a plugin's is
`plugin_invalid` (plugins/problems.py), each from `refuse(param, message)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import NoReturn

from uhp_server.files.filenames import has_bidi_control
from uhp_server.harnesses.problems import invalid

Refusal = Callable[[str, str], NoReturn]  # (param, message)

MAX_PATH_BYTES = 240
MAX_SEGMENT_BYTES = 255
MAX_DEPTH = 16
SKILL_FILE = "SKILL.md"
_DRIVE = re.compile(r"[A-Za-z]:")


def normalise_path(raw: object, param: str, refuse: Refusal = invalid) -> str:
    """The normalised relative path, or a refusal naming `param`."""
    if not isinstance(raw, str) or not raw.strip():
        refuse(param, "A file needs a non-empty `path`.")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw) or "\\" in raw:
        refuse(param, "A file path may not contain backslashes or control characters.")
    if has_bidi_control(raw):
        refuse(param, "A file path may not contain bidirectional control characters.")
    if raw.startswith("/") or _DRIVE.match(raw):
        refuse(param, "A file path must be relative to its folder.")
    parts = PurePosixPath(raw).parts
    if ".." in parts:
        refuse(param, "A file path may not leave its folder (`..`).")
    normalised = "/".join(p for p in parts if p != ".")
    if not normalised:
        refuse(param, "A file path must name a file.")
    if len(normalised.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        refuse(param, f"A file path may be at most {MAX_PATH_BYTES} bytes.")
    if len(parts) > MAX_DEPTH or any(len(p.encode()) > MAX_SEGMENT_BYTES for p in parts):
        refuse(param, "A file path is nested too deeply or has too long a name.")
    return normalised


def check_unique(paths: list[str], param: str, refuse: Refusal = invalid) -> None:
    """Refuse repeated paths (also case-insensitively) and a file that is also a folder.

    `param` is the files array; the offending entry's index is appended."""
    seen: dict[str, int] = {}
    for index, path in enumerate(paths):
        key = path.casefold()
        if key in seen:
            refuse(f"{param}[{index}].path", f"The path '{path}' appears more than once.")
        seen[key] = index
    folders = {"/".join(p.split("/")[:i]) for p in seen for i in range(1, p.count("/") + 1)}
    for key, index in seen.items():
        if key in folders:
            refuse(f"{param}[{index}].path", "A path is used both as a file and as a folder.")
