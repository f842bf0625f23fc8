"""A hostile agent against a read-only folder (an environment's version, Environments §6,
§9): it reads, then tries to write, create, chmod, rename, remove, make a folder and remount
the folder read-write, printing `name=ok` or `name=refused` for each.

`project` makes the folder: its file and its folder world-writable, so that only the mount
itself can refuse the agent (a permission bit would refuse it anyway)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

# MS_REMOUNT | MS_BIND: what `mount -o remount,bind,rw` asks of the kernel.
_REMOUNT = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.mount(None, sys.argv[1].encode(), None, 32 | 4096, None) == 0 else 1)
"""


def project(folder: Path) -> Path:
    """A folder with one world-writable file, as a version's source would be."""
    folder.mkdir(parents=True)
    (folder / "data.txt").write_text("from the project\n")
    os.chmod(folder / "data.txt", 0o666)
    os.chmod(folder, 0o777)
    return folder


def command(target: str) -> str:
    """The probe against `target`, the folder's path inside the sandbox."""
    t = shlex.quote(target)
    attempts = {
        "write": f"echo more >> {t}/data.txt",
        "create": f"touch {t}/new.txt",
        "chmod": f"chmod 600 {t}/data.txt",
        "rename": f"mv {t}/data.txt {t}/moved.txt",
        "remove": f"rm {t}/data.txt",
        "mkdir": f"mkdir {t}/made",
        "remount": f"/usr/bin/python3 -c {shlex.quote(_REMOUNT)} {t}",
    }
    lines = [f"cat {t}/data.txt"]
    lines += [
        f"if ( {attempt} ) 2>/dev/null; then echo {name}=ok; else echo {name}=refused; fi"
        for name, attempt in attempts.items()
    ]
    return "\n".join(lines)


# What the agent meets: it reads the file; every change is refused.
EXPECTED = [
    "from the project",
    *(
        f"{name}=refused"
        for name in ("write", "create", "chmod", "rename", "remove", "mkdir", "remount")
    ),
]
