"""What does a `store: false` task's set-aside cost (engine/turns/unkept.py)? A session home
holds one conversation file of --mib MiB, sparse (data in its first and last MiB only) or
dense; set_aside then put_back copy it aside and back. Printed for each: the seconds, the
Python heap's peak while copying (tracemalloc) and what the copy takes on disk. Target: the
peak stays about one copy chunk (1 MiB), whatever the file's size, and a sparse file's copy
stays sparse.

Usage:

    python bench/unkept_copy.py [--mib 300]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from uhp_server.engine.turns import unkept

PATTERNS = (".cli/sessions",)
MIB = 1 << 20


def make(home: Path, size: int, sparse: bool) -> Path:
    path = home / ".cli" / "sessions" / "big.jsonl"
    path.parent.mkdir(parents=True)
    with path.open("wb") as out:
        if sparse:
            out.write(b"x" * MIB)
            out.seek(size - MIB)
            out.write(b"x" * MIB)
        else:
            for _ in range(size // MIB):
                out.write(b"x" * MIB)
    return path


def measured(work: Callable[..., object], *args: object) -> tuple[float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        work(*args)
        return time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=300)
    _smoke.add_flag(parser)
    # Above two MiB: the sparse file's hole (data in its first and last MiB) is still there.
    size = _smoke.shrink(parser.parse_args(), mib=4).mib * MIB
    for sparse in (True, False):
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder) / "session" / "home"
            make(home, size, sparse)
            aside = Path(folder) / "session" / unkept.ASIDE / "files" / ".cli/sessions/big.jsonl"
            seconds, peak = measured(unkept.set_aside, home, PATTERNS, None, size)
            on_disk = aside.stat().st_blocks * 512
            back_seconds, back_peak = measured(unkept.put_back, home, PATTERNS)
            kind = "sparse" if sparse else "dense"
            print(
                f"{kind:6} {size // MIB} MiB: set_aside {seconds:.2f} s, peak {peak / MIB:.2f} "
                f"MiB, copy on disk {on_disk / MIB:.1f} MiB; put_back {back_seconds:.2f} s, "
                f"peak {back_peak / MIB:.2f} MiB"
            )


if __name__ == "__main__":
    main()
