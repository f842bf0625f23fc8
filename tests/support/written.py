"""What a server wrote under a folder, read while its agent CLIs may still be winding down:
a turn's terminal event is recorded before its process exits, so a CLI can still create and
remove files (a lock directory, say) while the folder is read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path


def files_written(root: Path) -> Iterator[tuple[Path, bytes]]:
    """Each regular file under `root` with its contents. A file or folder gone before it could
    be read is skipped (what it held did not stay); links, sockets and pipes are not read."""
    for folder, _subfolders, names in os.walk(root):  # a vanished folder is skipped
        for name in names:
            path = Path(folder) / name
            try:
                if stat.S_ISREG(path.lstat().st_mode):  # not a link, a socket or a pipe
                    yield path, path.read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                continue


def everything_written(root: Path) -> bytes:
    """The contents of every file under `root`, run together."""
    return b"".join(contents for _path, contents in files_written(root))
