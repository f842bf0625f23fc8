"""The local sandboxes running on this machine, found by what they mount.

A sandbox's command line names the folders it binds: the session's own, or, when the server
mounts neutral overlays of them (sandbox/neutral_mounts.py), the turn's staging folder,
whose symlinks lead to the session's folders. A process counts for `marker` (a data folder,
a session id) when either names it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from uhp_server.sandbox import neutral_mounts

_STAGING = re.compile(re.escape(str(neutral_mounts.ROOT)) + r"/[^/\s]+/[^/\s]+")


def sandbox_processes(marker: str) -> list[str]:
    """Command lines (`pgrep -af` lines) of processes whose folders `marker` is part of."""
    out = subprocess.run(["pgrep", "-af", "."], capture_output=True, text=True)
    return [
        line
        for line in out.stdout.splitlines()
        if "pgrep" not in line and "uhp_server.cli" not in line and _names(line, marker)
    ]


def processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes that mention `text` (a sandbox's own
    included: its pid namespace is one of this machine's)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found


def _names(line: str, marker: str) -> bool:
    if marker in line:
        return True
    for staging in set(_STAGING.findall(line)):
        try:
            links = [entry.path for entry in os.scandir(staging) if entry.is_symlink()]
            if any(marker in os.readlink(link) for link in links):
                return True
        except OSError:  # the turn ended meanwhile
            continue
    return False
