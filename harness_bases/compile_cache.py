"""Node's compile cache for the node CLIs: made once by `bases install`, read-only in turns.

Node keeps V8's compiled code of the modules it loads in the folder `NODE_COMPILE_CACHE`
names, and several CLIs turn that on themselves (Copilot CLI, Qwen Code), in the host's /tmp.
Run directly, such a CLI starts from a warm cache. In a sandbox /tmp is new every turn: it
compiles everything and serializes it for nothing at each start (Copilot CLI: about 200 ms of
a 500 ms turn), and a CLI that does not turn the cache on compiles everything at each start.

So the cache is made at install: each node base's CLI is started once (its version command,
`HarnessBase.compile_cache_warmup`) the way a sandbox starts it, with the tools folder at the
sandbox's path, since node keys each entry by the file's absolute path (node 22 has no
portable cache). A turn of a base warmed for its pinned version then reads that cache,
read-only like the rest of the tools folder. Node looks in a folder of it named for the user
it runs as (`v22.23.5-x64-9ac5647c-<uid>`), and a turn's agent runs as a user of its own: a
sandbox gives that user, before its first turn, hard links to the entries made as this
server's user (`for_user`). A base not warmed gets no `NODE_COMPILE_CACHE`:
with a cache that misses, node would compile and serialize everything at each start.

Only `bases install` writes the cache, and nothing of a tenant's runs then: an entry a turn
could write would be code a later turn, of anybody, runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from harness_bases.base import SandboxPaths, Warmup
from harness_bases.installing import VERSION_ENV, held_lock

log = logging.getLogger(__name__)

ENV = "NODE_COMPILE_CACHE"
FOLDER = "node-compile-cache"  # under the tools folder
WARMUP_TIMEOUT = 120.0


def folder(tools_root: str) -> str:
    """The cache's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / FOLDER)


def _marker(tools_dir: Path, base: str, version: str) -> Path:
    return tools_dir / FOLDER / ".warmed" / f"{base}-{version}"


def warmed(tools_dir: Path, base: str, version: str) -> bool:
    """Whether `bases install` made the cache for this base at this version."""
    return _marker(tools_dir, base, version).is_file()


def turn_env(tools_dir: Path, tools_root: str, base: str, version: str) -> dict[str, str]:
    """What a turn's environment adds for the cache: the folder at the sandbox's path when
    the base was warmed, else nothing."""
    return {ENV: folder(tools_root)} if warmed(tools_dir, base, version) else {}


def warm(tools_dir: Path, base: str, version: str, warmup: Warmup) -> bool:
    """Start the warm-up (paths as the sandbox sees them) once with the cache writable, the
    tools folder mounted at the sandbox's path by bubblewrap; True when the base is warmed.
    Never fatal: without bubblewrap, or when the start fails, the base runs without it."""
    if warmed(tools_dir, base, version):
        return True
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        log.warning("compile_cache_not_made", extra={"base": base, "why": "no bwrap"})
        return False
    inside = SandboxPaths().tools
    cache = tools_dir / FOLDER
    cache.mkdir(exist_ok=True)
    command = [
        bwrap,
        *("--dev-bind", "/", "/"),
        *("--tmpfs", str(PurePosixPath(inside).parent)),
        *("--bind", str(tools_dir), inside),
        *("--tmpfs", "/tmp"),
        "--die-with-parent",
        "--",
        *warmup.argv,
    ]
    environment = {**VERSION_ENV, "HOME": "/nonexistent", **warmup.env, ENV: folder(inside)}
    # One warm-up at a time: `bases install` installs side by side, and two node processes
    # writing one cache folder at once could leave an entry half written.
    with held_lock(cache / ".lock"):
        try:
            result = subprocess.run(
                command,
                env=environment,
                capture_output=True,
                timeout=WARMUP_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("compile_cache_not_made", extra={"base": base, "why": str(exc)})
            return False
        if result.returncode not in warmup.exit_codes:
            why = (result.stderr or result.stdout).decode(errors="replace")[-500:]
            log.warning("compile_cache_not_made", extra={"base": base, "why": why})
            return False
        _readable_by_all(cache)
        marker = _marker(tools_dir, base, version)
        marker.parent.mkdir(exist_ok=True)
        marker.touch()
    return True


def _readable_by_all(cache: Path) -> None:
    """Node writes its entries 0600: a turn's agent, a user of its own, could not read them."""
    for path in (cache, *cache.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


def for_user(tools_dir: Path, uid: int) -> None:
    """Give `uid` the entries `bases install` made as this process's user: the same files,
    hard links in the folder node names for `uid` (a directory listing when they are there;
    the first turn of a user links about twenty files). Read-only in the sandbox either way."""
    cache = tools_dir / FOLDER
    made_as = f"-{os.getuid()}"
    if uid == os.getuid() or not cache.is_dir():
        return
    for made in cache.iterdir():
        if made.name.startswith(".") or not made.name.endswith(made_as) or not made.is_dir():
            continue
        theirs = cache / f"{made.name.removesuffix(made_as)}-{uid}"
        theirs.mkdir(mode=0o755, exist_ok=True)
        have = set(os.listdir(theirs))
        for entry in os.listdir(made):
            if entry not in have:
                with contextlib.suppress(FileExistsError):  # a turn beside it linked it
                    os.link(made / entry, theirs / entry)
