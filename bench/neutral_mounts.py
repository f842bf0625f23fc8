"""What do a turn's neutral mounts cost (sandbox/neutral_mounts.py)?

Mounts and unmounts, N times, the overlays a turn gets (workspace and home read-write, the
tools read-only) in a temporary data folder, and prints the median per turn and per overlay.
Needs root (CAP_SYS_ADMIN). Usage:

    python bench/neutral_mounts.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from uhp_server.sandbox.neutral_mounts import Folder, NeutralMounts


def timed(mounts: NeutralMounts, folders: dict[str, Folder], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        mounts.mount(folders).unmount()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    _smoke.add_flag(parser)
    runs = _smoke.shrink(parser.parse_args(), runs=1).runs
    with tempfile.TemporaryDirectory(prefix="uhp-bench-mounts-", dir=Path.home()) as tmp:
        data = Path(tmp)
        for name in ("sessions/s/workspace", "sessions/s/home", "tools"):
            (data / name).mkdir(parents=True)
        mounts = NeutralMounts.detect(data, "bench-neutral-mounts")
        if mounts is None:
            sys.exit("cannot mount overlays here (root? a data folder an overlay can sit on?)")
        turn = {
            "workspace": Folder(data / "sessions/s/workspace", writable=True),
            "home": Folder(data / "sessions/s/home", writable=True),
            "tools": Folder(data / "tools", writable=False),
        }
        one = {"workspace": turn["workspace"]}
        per_turn = timed(mounts, turn, runs)
        per_overlay = timed(mounts, one, runs)
    print(f"mount + unmount, median of {runs}:")
    print(f"  a turn's three overlays: {statistics.median(per_turn):.2f} ms")
    print(f"  one read-write overlay:  {statistics.median(per_overlay):.2f} ms")


if __name__ == "__main__":
    main()
