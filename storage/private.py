"""The data directory and the database files are the server's alone.

They hold the sessions' conversations, the agents' homes, uploaded files and (in
`secrets.key`) the key that opens every stored secret: another user of the machine reads
none of it. The data directory is made 0700 when the server makes it for the SQLite
database or the key file (a PostgreSQL server with UHP_SECRETS_KEY set makes neither: make it
0700 yourself), and the SQLite files 0600 (SQLite makes its WAL
and shared-memory files with the database file's mode). A sandboxed agent reaches its own
session's folders through the sandbox's bind mounts, made as root (bubblewrap under a root
server, the docker engine), or runs as the server's own uid: the directory's mode never
stands in its way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

# The directories already warned of: a start makes the key file and the database in the same
# one, and the advice is said once.
_warned: set[Path] = set()

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> None:
    """Make `path` (and its missing parents) if there is none, the last one 0700. One that
    exists is left as it is, with a warning when other users can enter it: it may be shared
    on purpose, and tightening it is the operator's call."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            path.mkdir(mode=PRIVATE_DIR)
        os.chmod(path, PRIVATE_DIR)  # whatever the umask
        return
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077 and path.resolve() not in _warned:
        _warned.add(path.resolve())
        log.warning(
            "data_dir_readable_by_others",
            extra={"path": str(path), "mode": f"{mode:04o}", "hint": f"chmod 700 {path}"},
        )


def private_file(path: Path) -> None:
    """Make the file `path` 0600 (empty when there is none), before anything writes it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE)
    os.close(fd)
    if stat.S_IMODE(path.stat().st_mode) != PRIVATE_FILE:
        os.chmod(path, PRIVATE_FILE)
