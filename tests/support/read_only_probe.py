"""A hostile agent against a read-only folder (an environment's version, Environments §6,
§9): it reads, then tries to write, create, chmod, rename, remove, make a folder and remount
the folder read-write, printing `name=ok` or `name=refused` for each.

`project` makes the folder: its file and its folder world-writable, so that only the mount
itself can refuse the agent (a permission bit would refuse it anyway)."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path

from uhp_server.sandbox.base import ExtraMount, SessionMounts

# A sandbox's test runner: `sh -c script` in the sandbox with those folders; exit code, lines.
Run = Callable[[SessionMounts, str], Awaitable[tuple[int, list[str]]]]

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


async def check_extra_mounts(run: Run, mounts: SessionMounts, tmp_path: Path) -> None:
    """A sandbox's further folders: a read-only one refuses a hostile agent every change, a
    writable one takes a build's writes (the same assertions for every sandbox)."""
    folder = project(tmp_path / "project")
    build = tmp_path / "build"
    build.mkdir()
    build.chmod(0o777)  # (a build hands its folder to the agent's uid)
    extra = (ExtraMount(folder, "/env/project"), ExtraMount(build, "/env/build", writable=True))
    mounts = dataclasses.replace(mounts, extra=extra)
    code, out = await run(mounts, command("/env/project"))
    assert (code, out) == (0, EXPECTED)
    assert (folder / "data.txt").read_text() == "from the project\n"
    assert sorted(p.name for p in folder.iterdir()) == ["data.txt"]
    code, _ = await run(mounts, "echo built > /env/build/out.txt")
    assert code == 0 and (build / "out.txt").read_text() == "built\n"
