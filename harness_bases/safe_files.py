"""Writing into a session's agent home without following links the agent left there.

The home is writable by the agent, and the next turn's files are written from the host: a
symlink planted where a base writes its config or skills (`~/.codex/config.toml`,
`~/.claude/skills`, `~/.hermes/config.yaml`…) must not make the server write somewhere else
on the host. Links found on the way are removed, never followed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def remove(path: Path) -> None:
    """Remove a file, link or folder tree at path (a link itself, never its target)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif path.exists():  # a socket, fifo…
        path.unlink()


def remove_if_present(path: Path) -> None:
    """remove(path) when anything (a dangling link too) stands at path."""
    if path.is_symlink() or path.exists():
        remove(path)


def real_dir(root: Path, relative: str) -> Path:
    """root/relative as a real folder: each part below root is created, and any part that
    is a link or a non-folder is replaced by a folder."""
    current = root
    current.mkdir(parents=True, exist_ok=True)
    for part in Path(relative).parts:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            remove(current)
        current.mkdir(exist_ok=True)
    return current


def write_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create or replace path with data; a link or folder at path is replaced, not followed
    (a folder the agent made there would otherwise stop every later turn from starting)."""
    if path.is_symlink() or path.is_dir():
        remove(path)
    # O_NOFOLLOW: a link planted between the check above and this open is refused, not used.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    fd = os.open(path, flags, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)
