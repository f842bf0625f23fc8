"""Session folders as the sandbox's mount table shows them: neutral names, never host paths.

A bind mount's line in /proc/self/mountinfo carries its source's path within the source's
filesystem, so binding the session's folders would show the data folder's path and the
session id to the agent. Instead, each turn mounts an overlay per folder and the sandbox
binds that: an overlay is a filesystem of its own (its root shows as "/"), and the kernel
shows its layers as the paths given to mount(2). Those are relative names in a per-turn
staging folder whose symlinks lead to the real folders, so the line reads
`overlay /workspace … - overlay overlay rw,lowerdir=empty,upperdir=workspace,…`.

The writable folders (workspace, home) are the overlay's upper layer over an empty lower
one: every file is an upper file, so whatever the agent writes, renames or deletes lands in
the real folder at once (no whiteouts, no copy-up). One trace: a directory renamed into the
folder's top level carries a `trusted.overlay.opaque` attribute (only root reads trusted.*).
The read-only folders (the CLIs) are a lower-only overlay. The server must not change a
layer while its overlay is mounted (overlayfs leaves that undefined); during a turn it only
adds to the tools folder the compile-cache folder of an agent user about to run its turn
(harness_bases/compile_cache.py: names no running turn's node looks up, since each looks only
in its own user's folder).

Needs CAP_SYS_ADMIN and a data folder an overlay can sit on (ext4, xfs, btrfs, tmpfs; not
overlayfs itself, as in a container): NeutralMounts.detect() tries once and says why not;
then the sandbox binds the folders themselves, as before.

Layout: <root>/<server id>/<random>/ (the server's folder there only while a turn runs)
holds `empty/`, the symlinks, and one mount point per folder; each writable folder's
overlay work folder is `<folder's parent>/.overlay/<random>-<name>` (it must be on the
upper layer's filesystem). Both go when the turn ends; a starting
server removes what a killed one left.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from uhp_server.sandbox.base import SessionMounts

log = logging.getLogger(__name__)

ROOT = Path("/run/uhp-server/mounts")
WORK_FOLDER = ".overlay"  # beside the writable folders: an overlay's work folder's parent
_MNT_DETACH = 2
_MS_RDONLY = 1
_CLONE_FS = 0x200
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class MountError(OSError):
    pass


@dataclass(frozen=True)
class Folder:
    source: Path
    writable: bool


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise MountError(errno, f"{what}: {os.strerror(errno)}")


def _mount_overlay(cwd: Path, options: str, target: Path, flags: int) -> None:
    """mount(2) an overlay whose layer paths are relative to `cwd`. Runs on a thread of its
    own that first unshares its cwd (CLONE_FS): the server's other threads keep theirs."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            _check(_libc.unshare(_CLONE_FS), "unshare(CLONE_FS)")
            os.chdir(cwd)
            _check(
                _libc.mount(b"overlay", os.fsencode(target), b"overlay", flags, options.encode()),
                f"mount overlay on {target}",
            )
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="uhp-overlay-mount")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def mount_tmpfs(target: Path) -> None:
    """A small tmpfs of its own at `target` (made if missing; what was there is kept beneath
    and back after unmount()): a bind of a folder in it shows that folder's path within the
    tmpfs, not the host's path. For folders that hold Unix sockets, which an overlay cannot
    pass on (a connect() through one is refused)."""
    target.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(target):  # a killed server's
        _unmount(target)
    _check(
        _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", 0, b"size=1m,mode=0755"),
        f"mount tmpfs on {target}",
    )


def unmount(target: Path) -> None:
    """Unmount what mount_tmpfs() mounted (nothing when it is not a mount point)."""
    _unmount(target)


def _unmount(target: Path) -> None:
    # Detached: a sandbox's namespace that lingers a moment keeps its own copy alive.
    if _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        if errno not in (22, 2):  # EINVAL: not a mount point (any more); ENOENT: gone
            log.warning("neutral_unmount_failed", extra={"target": str(target), "errno": errno})


class TurnMounts:
    """One turn's overlays: `paths` maps each folder's name to the mount point to bind."""

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self.paths: dict[str, Path] = {}

    def unmount(self) -> None:
        """Idempotent; also clears what a killed server left (it reads the symlinks)."""
        for point in self.staging.glob("mnt-*"):
            _unmount(point)
            if os.path.ismount(point):
                # Still mounted (the unmount failed): removing the staging folder would
                # delete through it, into the session's own folders. Leave it all for the
                # next start's clean-up.
                return
        for link in self.staging.glob("work-*"):
            with contextlib.suppress(OSError):
                work = Path(os.readlink(link))
                shutil.rmtree(work, ignore_errors=True)
                work.parent.rmdir()  # the .overlay folder, when no other turn uses it
        shutil.rmtree(self.staging, ignore_errors=True)
        with contextlib.suppress(OSError):  # the server's folder, when no other turn uses it
            self.staging.parent.rmdir()


class NeutralMounts:
    """The overlays of one server's turns, under ROOT/<server id>."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def detect(cls, data_dir: Path, server_id: str, root: Path = ROOT) -> NeutralMounts | None:
        """The server's NeutralMounts, or None (logged) when it cannot mount overlays of
        folders in `data_dir`: found out by mounting one."""
        mounts = cls(root / server_id)
        probe_dir = data_dir / f".overlay-probe-{secrets.token_hex(4)}"
        try:
            mounts.clear_stale()
            (probe_dir / "folder").mkdir(parents=True)
            mounts.mount({"probe": Folder(probe_dir / "folder", writable=True)}).unmount()
        except OSError as exc:
            log.warning(
                "sandbox_mount_table_shows_host_paths",
                extra={"reason": f"cannot mount an overlay in the data folder: {exc}"},
            )
            return None
        finally:
            shutil.rmtree(probe_dir, ignore_errors=True)
        log.info("sandbox_neutral_mounts", extra={"root": str(mounts.root)})
        return mounts

    def clear_stale(self) -> None:
        """What a killed server left: no turn of this server runs yet."""
        if self.root.is_dir():
            for staging in self.root.iterdir():
                TurnMounts(staging).unmount()

    def mount(self, folders: Mapping[str, Folder]) -> TurnMounts:
        """Mount an overlay of each folder; raises MountError (having undone what it did)."""
        turn = secrets.token_hex(6)
        staging = self.root / turn
        for attempt in range(3):  # the last turn's unmount may remove the root meanwhile
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                staging.mkdir(mode=0o700)
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        (staging / "empty").mkdir()
        mounts = TurnMounts(staging)
        try:
            for name, folder in folders.items():
                point = staging / f"mnt-{name}"
                point.mkdir()
                (staging / name).symlink_to(folder.source)
                if folder.writable:
                    work = folder.source.parent / WORK_FOLDER / f"{turn}-{name}"
                    work.mkdir(parents=True)
                    (staging / f"work-{name}").symlink_to(work)
                    # uuid=off: no origin attribute written to the real folder.
                    options = f"lowerdir=empty,upperdir={name},workdir=work-{name},uuid=off"
                else:
                    options = f"lowerdir={name}:empty"
                _mount_overlay(staging, options, point, 0 if folder.writable else _MS_RDONLY)
                mounts.paths[name] = point
        except BaseException:
            mounts.unmount()
            raise
        return mounts


async def mounted_off_loop(mount: Callable[[], TurnMounts | None]) -> TurnMounts | None:
    """`mount()` on a worker thread. A caller cancelled meanwhile never leaves the overlays
    the thread goes on to make mounted: they are unmounted before the cancel goes on."""
    job = asyncio.ensure_future(asyncio.to_thread(mount))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            made = await job
            if made is not None:
                await asyncio.to_thread(made.unmount)
        raise


def mount_session(neutral: NeutralMounts | None, mounts: SessionMounts) -> TurnMounts | None:
    """A turn's overlays of its session's folders, or None: the sandbox binds the folders
    themselves (the server cannot mount, or this mount failed, logged)."""
    if neutral is None:
        return None
    try:
        return neutral.mount(
            {
                "workspace": Folder(mounts.workspace, writable=True),
                "home": Folder(mounts.home, writable=True),
                "tools": Folder(mounts.tools, writable=False),
                **{
                    f"extra-{i}": Folder(extra.source, writable=extra.writable)
                    for i, extra in enumerate(mounts.extra)
                },
            }
        )
    except OSError as exc:
        log.warning("sandbox_neutral_mount_failed", extra={"reason": str(exc)})
        return None


def bound(mounts: SessionMounts, turn: TurnMounts | None) -> SessionMounts:
    """The folders a sandbox binds: the turn's overlays of them, or (None) themselves."""
    if turn is None:
        return mounts
    paths = turn.paths
    return replace(
        mounts,
        workspace=paths["workspace"],
        home=paths["home"],
        tools=paths["tools"],
        extra=tuple(
            replace(extra, source=paths[f"extra-{i}"]) for i, extra in enumerate(mounts.extra)
        ),
    )
