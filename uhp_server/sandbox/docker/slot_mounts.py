"""The folders a ready pool's containers mount: empty until a turn is bound to the slot.

A slot's container must be created before its turn's folders are known, and Docker fixes a
container's binds at create. So each slot binds three empty folders of its own
(<root>/<slot>/{workspace,home,tools}) on a tmpfs that is a shared mount, with `rslave`
propagation: when the turn starts, the server bind-mounts the turn's overlays
(neutral_mounts.py) on those folders, and the kernel propagates the mounts into the running
container, at /workspace, the home and the tools folder. The agent sees the same overlay
lines in its mount table as in a container created for the turn, plus the empty folder's
line beneath, which shows only `/<slot>/<name>` within the tmpfs (a random name).

The tmpfs is the server's own (ROOT/<server id>) and gone at close; a killed server's is
replaced at the next start. Needs CAP_SYS_ADMIN and an engine in the server's mount
namespace, as the neutral mounts do; without them there is no pool (every turn is cold).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/run/uhp-server/pool")
NAMES = ("workspace", "home", "tools")
_MS_BIND = 4096
_MS_SHARED = 1 << 20
_MNT_DETACH = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _unmount(target: Path) -> None:
    if _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        if errno not in (22, 2):  # EINVAL: not a mount point (any more); ENOENT: gone
            log.warning("slot_unmount_failed", extra={"target": str(target), "errno": errno})


class SlotMounts:
    """The shared tmpfs of one server's slots."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def open(cls, server_id: str, root: Path = ROOT) -> SlotMounts:
        """Mount the server's tmpfs, shared (raises OSError when it cannot)."""
        mounts = cls(root / server_id)
        mounts.root.mkdir(parents=True, exist_ok=True, mode=0o755)
        if os.path.ismount(mounts.root):  # a killed server's, with its slots' folders
            _unmount(mounts.root)
        target = os.fsencode(mounts.root)
        _check(_libc.mount(b"tmpfs", target, b"tmpfs", 0, b"size=1m,mode=0755"), "mount tmpfs")
        try:
            _check(_libc.mount(None, target, None, _MS_SHARED, None), "make the tmpfs shared")
        except OSError:
            _unmount(mounts.root)
            raise
        return mounts

    def close(self) -> None:
        _unmount(self.root)
        with contextlib.suppress(OSError):
            self.root.rmdir()

    def make_slot(self, name: str) -> dict[str, Path]:
        """The slot's empty folders, by name (NAMES)."""
        points = {folder: self.root / name / folder for folder in NAMES}
        for point in points.values():
            point.mkdir(parents=True, mode=0o755)
        return points

    def bind(self, points: Mapping[str, Path], sources: Mapping[str, Path]) -> None:
        """Bind each of `sources` (a turn's overlays, by name) on the slot's folder of that
        name: the slot's container sees them at once. Undoes what it did when one fails."""
        try:
            for name, point in points.items():
                source = os.fsencode(sources[name])
                _check(_libc.mount(source, os.fsencode(point), None, _MS_BIND, None), "bind")
        except BaseException:
            self.unbind(points)
            raise

    def unbind(self, points: Mapping[str, Path]) -> None:
        for point in points.values():
            _unmount(point)

    def remove_slot(self, points: Mapping[str, Path]) -> None:
        """Unbind and remove the slot's folders. Never recursive: a folder still mounted
        (its unmount failed) refuses rmdir, so nothing is deleted through it."""
        self.unbind(points)
        for point in points.values():
            with contextlib.suppress(OSError):
                point.rmdir()
        with contextlib.suppress(OSError, StopIteration):
            next(iter(points.values())).parent.rmdir()
