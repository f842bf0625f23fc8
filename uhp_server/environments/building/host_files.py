"""The server's reads of what a build wrote: never through a link the build's agent planted.

A build's agent owns its workspace, its home, the version's folder and the principal's
cache while it runs, and may put a symbolic link, a FIFO or a device where the server
expects a file. The server runs as root, so following one would let a build read (or block,
or exhaust) anything on the host. Every folder on the way is opened with O_NOFOLLOW from a
folder the server made, and only a regular file no larger than its cap is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

REPORT_CAP = 16 * 1024 * 1024  # a package report past this is no report

_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_regular(base: Path, *parts: str, cap: int = REPORT_CAP) -> bytes | None:
    """The file at base/parts..., where `base` is a folder the server made and each part a
    single name; None when any part is a link or not what it should be (a folder on the way,
    a regular file at the end) or the file is larger than `cap`."""
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    except OSError:
        return None
    try:
        for name in parts[:-1]:
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        inner = os.open(parts[-1], os.O_RDONLY | _NO_FOLLOW, dir_fd=fd)
        os.close(fd)
        fd = inner
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, cap + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:  # it grew since fstat
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
