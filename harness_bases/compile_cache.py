"""Node's compile cache for the node CLIs: made once by `bases install`, read-only in turns.

Node keeps V8's compiled code of the modules it loads in the folder `NODE_COMPILE_CACHE`
names, and several CLIs turn that on themselves (Copilot CLI, Qwen Code), in the host's /tmp.
Run directly, such a CLI starts from a warm cache. In a sandbox /tmp is new every turn: it
compiles everything and serializes it for nothing at each start (Copilot CLI: about 200 ms of
a 500 ms turn), and a CLI that does not turn the cache on compiles everything at each start.

So the cache is made at install: each node base's CLI is started once (its version command,
`HarnessBase.compile_cache_warmup`) the way a sandbox starts it, with the tools folder at the
sandbox's path, since node keys each entry by the file's absolute path (node 22 has no
portable cache). A turn of a base warmed with that very command (the pinned CLI on the pinned
node) then reads the cache, read-only like the rest of the tools folder. A base not warmed
gets no `NODE_COMPILE_CACHE`: with a cache that misses, node would compile and serialize
everything at each start.

Node looks in a folder of the cache named for the user it runs as
(`v22.23.5-x64-9ac5647c-<uid>`), and a turn's agent runs as a user of its own: before a
user's turn, the sandbox gives it hard links to the entries made as this server's user
(`for_user`), the same root-owned read-only files.

Only `bases install` writes entries, and nothing of a tenant's runs then: an entry a turn
could write would be code a later turn, of anybody, runs. The warm-up itself runs with the
host read-only, no network and a home of its own, only the cache writable.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from harness_bases.base import HarnessBase, SandboxPaths, Warmup
from harness_bases.installing import VERSION_ENV, held_lock

log = logging.getLogger(__name__)

ENV = "NODE_COMPILE_CACHE"
FOLDER = "node-compile-cache"  # under the tools folder
WARMUP_TIMEOUT = 120.0
WARMUP_HOME = "/tmp/home"  # a tmpfs of the warm-up's own
GENERATION = ".generation"  # in the cache: a new token at each warm-up


def folder(tools_root: str) -> str:
    """The cache's folder under a tools root (the sandbox's view or the host's)."""
    return str(PurePosixPath(tools_root) / FOLDER)


def _warmup(base: HarnessBase) -> Warmup | None:
    return base.compile_cache_warmup(SandboxPaths().tools)


def _marker(tools_dir: Path, base: HarnessBase, warmup: Warmup) -> Path:
    """Keyed by the warm-up's command too: it names the pinned node, whose entries are not
    another node's."""
    digest = hashlib.sha256("\0".join(warmup.argv).encode()).hexdigest()[:16]
    return tools_dir / FOLDER / ".warmed" / f"{base.name}-{base.cli_version}-{digest}"


def warmed(tools_dir: Path, base: HarnessBase) -> bool:
    """Whether `bases install` made the cache for this base as it is pinned now."""
    warmup = _warmup(base)
    return warmup is not None and _marker(tools_dir, base, warmup).is_file()


def turn_env(tools_dir: Path, tools_root: str, base: HarnessBase) -> dict[str, str]:
    """What a turn's environment adds for the cache: the folder at the sandbox's path when
    the base was warmed, else nothing."""
    return {ENV: folder(tools_root)} if warmed(tools_dir, base) else {}


def warm(tools_dir: Path, base: HarnessBase) -> bool | None:
    """Start the base's warm-up once with the cache writable; True when the base is warmed,
    None for a base with no node CLI. Never fatal: without bubblewrap, or when the start
    fails, the base runs without the cache (logged)."""
    warmup = _warmup(base)
    if warmup is None:
        return None
    marker = _marker(tools_dir, base, warmup)
    if marker.is_file():
        return True
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        log.warning("compile_cache_not_made", extra={"base": base.name, "why": "no bwrap"})
        return False
    cache = tools_dir / FOLDER
    cache.mkdir(exist_ok=True)
    # One warm-up at a time: `bases install` installs side by side, and two node processes
    # writing one cache folder at once could leave an entry half written.
    with held_lock(cache / ".lock"):
        made = _run(bwrap, tools_dir, warmup, base.name)
        if made:
            _readable_by_all(cache)
            marker.parent.mkdir(exist_ok=True)
            marker.touch()
            # Written after the entries: a user given them before it is given them again.
            (cache / GENERATION).write_text(secrets.token_hex(8))
    return made


def _run(bwrap: str, tools_dir: Path, warmup: Warmup, name: str) -> bool:
    """The warm-up in bubblewrap: the host read-only, the tools folder read-only where a
    sandbox shows it with only the cache writable, no network, a home of its own."""
    inside = SandboxPaths().tools
    command = [
        bwrap,
        *("--ro-bind", "/", "/"),
        *("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", WARMUP_HOME),
        *("--tmpfs", str(PurePosixPath(inside).parent)),
        *("--ro-bind", str(tools_dir), inside),
        *("--bind", str(tools_dir / FOLDER), folder(inside)),
        *("--unshare-net", "--die-with-parent", "--chdir", "/tmp"),
        "--",
        *warmup.argv,
    ]
    environment = {**VERSION_ENV, "HOME": WARMUP_HOME, **warmup.env, ENV: folder(inside)}
    try:
        result = subprocess.run(
            command, env=environment, capture_output=True, timeout=WARMUP_TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("compile_cache_not_made", extra={"base": name, "why": str(exc)})
        return False
    if result.returncode not in warmup.exit_codes:
        why = (result.stderr or result.stdout).decode(errors="replace")[-500:]
        log.warning("compile_cache_not_made", extra={"base": name, "why": why})
        return False
    return True


def _own_folders(cache: Path) -> dict[str, Path]:
    """The cache's folders of entries made as this process's user, by the name node gives
    them without the user (`v22.23.5-x64-9ac5647c`)."""
    made_as = f"-{os.getuid()}"
    return {
        made.name.removesuffix(made_as): made
        for made in cache.iterdir()
        if not made.name.startswith(".") and made.name.endswith(made_as) and made.is_dir()
    }


def _readable_by_all(cache: Path) -> None:
    """Node writes its entries 0600: a turn's agent, a user of its own, could not read them."""
    for made in _own_folders(cache).values():
        for path in (made, *made.iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)


def for_user(tools_dir: Path, uid: int) -> None:
    """Give `uid` the entries `bases install` made as this process's user: hard links to the
    same files, in the folder node names for `uid` (about 1,400 entries for the node bases of
    today). Once given, a turn reads two small files (the last warm-up's generation, the one
    `uid` was given) rather than list them all. Never fatal: a turn whose user could not be
    given them runs, and node compiles what it misses."""
    cache = tools_dir / FOLDER
    if uid == os.getuid() or not cache.is_dir():
        return
    generation = _text(cache / GENERATION)
    given = cache / ".given" / str(uid)
    if generation and _text(given) == generation:
        return
    try:
        for name, made in _own_folders(cache).items():
            _link_folder(made, cache / f"{name}-{uid}")
        given.parent.mkdir(exist_ok=True)
        given.write_text(generation)
    except OSError as exc:  # e.g. EMLINK, a full disk, a tools folder that is read-only
        log.warning("compile_cache_not_given", extra={"uid": uid, "why": str(exc)})


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def _link_folder(made: Path, theirs: Path) -> None:
    """`theirs` as hard links to every entry of `made`: new ones linked, replaced ones (a new
    inode after a warm-up again) linked again, gone ones removed."""
    theirs.mkdir(exist_ok=True)
    theirs.chmod(0o755)  # whatever the umask
    entries = {e.name: e.inode() for e in os.scandir(made) if "." not in e.name}
    for entry in os.scandir(theirs):
        if "." in entry.name:  # another turn's link on its way in
            continue
        if entry.name not in entries:
            with contextlib.suppress(FileNotFoundError):  # a turn beside it removed it
                os.unlink(entry.path)
        elif entry.inode() == entries[entry.name]:
            del entries[entry.name]  # linked already
    for name in entries:
        staged = theirs / f".{name}.{secrets.token_hex(8)}"
        os.link(made / name, staged)
        os.replace(staged, theirs / name)  # atomic: a reader sees the old file or the new
