"""What the scripts that start servers and CLIs share: their log, a scratch folder, and how a
run that did not finish ends (an exit status, with everything it started already stopped by
the `with` blocks it unwound)."""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

Result = TypeVar("Result")


class BenchError(RuntimeError):
    """A run did not do what it asked; its timing would mean nothing."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def scratch_folder(prefix: str = "bench-") -> Iterator[Path]:
    """A folder removed at the end. Not under /tmp: Codex skips some start-up work for homes
    in temporary folders, and the server's sandbox homes are never there either."""
    cache = Path.home() / ".cache" / "uhp-server"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=cache) as scratch:
        yield Path(scratch)


def finished(run: Callable[[], Result]) -> Result | int:
    """`run`'s result, or the exit status of a run that did not finish: 130 interrupted
    (SIGTERM unwinds like Ctrl-C, so what it started is stopped either way), 1 a BenchError."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run()
    except KeyboardInterrupt:
        log("interrupted; everything the bench started has been stopped")
        return 130
    except BenchError as exc:
        log(f"bench failed: {exc}")
        return 1
