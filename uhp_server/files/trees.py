"""Removing a folder an agent filled: at any depth, following no link.

`shutil.rmtree` recurses once per level and fails past Python's recursion limit, and a path
past PATH_MAX cannot even be named; an agent makes either with a one-line loop. GNU `rm`
walks with directory descriptors (fts), so neither stops it.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)
REMOVE_TIMEOUT_SECONDS = 600


def remove_tree(path: Path) -> bool:
    """Delete `path` and everything under it (never what a link points at, never another
    file system). Blocking: call it off the event loop. False, and logged, when something
    stayed."""
    if not os.path.lexists(path):
        return True
    try:
        result = subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", str(path)],
            capture_output=True,
            text=True,
            timeout=REMOVE_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("remove_tree_failed", extra={"path": str(path), "why": str(exc)})
        return False
    if result.returncode != 0:
        log.warning("remove_tree_failed", extra={"path": str(path), "why": result.stderr[-500:]})
    return result.returncode == 0
