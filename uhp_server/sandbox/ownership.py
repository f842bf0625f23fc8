"""Hand the session's folders to the agent's uid, so a non-root CLI can write them.

Needed when the server runs as root (files it creates, such as the CLI config written by
`base.prepare()` before every turn, are root's) while the agent runs as an unprivileged uid.
Only entries that are not already the agent's are changed, so a turn costs one walk.
"""

from __future__ import annotations

import os
from pathlib import Path


def hand_over(uid: int, gid: int, *roots: Path) -> int:
    """lchown everything under `roots` (not following symlinks) to uid:gid. Returns how many
    entries changed. A no-op unless this process may change owners (it runs as root)."""
    if os.geteuid() != 0:
        return 0
    changed = 0
    for root in roots:
        changed += _fix(root, uid, gid)
    return changed


def _fix(path: Path | str, uid: int, gid: int) -> int:
    changed = 0
    stat = os.lstat(path)
    if (stat.st_uid, stat.st_gid) != (uid, gid):
        os.lchown(path, uid, gid)
        changed += 1
    stack = [str(path)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:  # removed while we walked, or past PATH_MAX (an agent nests that deep)
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if (info.st_uid, info.st_gid) != (uid, gid):
                    os.lchown(entry.path, uid, gid)
                    changed += 1
            except OSError:
                # Gone meanwhile, or too deep to name: what lies that deep the agent made
                # there itself, so it is already the agent's.
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return changed
