"""A turn's overlays of the session's folders (sandbox/neutral_mounts.py), on the host."""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from uhp_server.sandbox.neutral_mounts import Folder, NeutralMounts, TurnMounts, mounted_off_loop

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting overlays needs root")


@pytest.fixture
def neutral(tmp_path: Path) -> Iterator[NeutralMounts]:
    mounts = NeutralMounts.detect(tmp_path, f"test-{secrets.token_hex(4)}")
    assert mounts is not None, "root on ext4 or tmpfs: an overlay can sit in the data folder"
    yield mounts
    mounts.clear_stale()


def session(tmp_path: Path) -> dict[str, Folder]:
    folder = tmp_path / "sessions" / "sess_0123456789abcdef"
    (folder / "workspace").mkdir(parents=True)
    (folder / "workspace" / "old.txt").write_text("old\n")
    (tmp_path / "tools").mkdir()
    return {
        "workspace": Folder(folder / "workspace", writable=True),
        "tools": Folder(tmp_path / "tools", writable=False),
    }


def test_the_mount_table_names_no_host_path(neutral: NeutralMounts, tmp_path: Path) -> None:
    turn = neutral.mount(session(tmp_path))
    try:
        lines = [
            line
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if str(turn.staging) in line
        ]
    finally:
        turn.unmount()
    assert len(lines) == 2
    for line in lines:
        assert line.split()[3] == "/"  # the overlay's own root, not a path in the data folder
        assert str(tmp_path) not in line and "sess_" not in line


def test_writes_renames_and_deletes_land_in_the_real_folder_at_once(
    neutral: NeutralMounts, tmp_path: Path
) -> None:
    folders = session(tmp_path)
    real = folders["workspace"].source
    turn = neutral.mount(folders)
    try:
        inside = turn.paths["workspace"]
        assert (inside / "old.txt").read_text() == "old\n"
        (inside / "made" / "deep").mkdir(parents=True)
        (inside / "made" / "deep" / "new.txt").write_text("new\n")
        (inside / "made").rename(inside / "moved")
        (inside / "old.txt").unlink()
        # Seen on the host while the overlay is still mounted; no whiteout left behind.
        assert sorted(p.name for p in real.iterdir()) == ["moved"]
        assert (real / "moved" / "deep" / "new.txt").read_text() == "new\n"
        with pytest.raises(OSError):
            (turn.paths["tools"] / "x").write_text("")
    finally:
        turn.unmount()
    assert not turn.staging.exists()
    assert not (real.parent / ".overlay").exists()  # the work folder went with the overlay
    assert os.listxattr(real) == []


def test_a_starting_server_clears_what_a_killed_one_left(tmp_path: Path) -> None:
    server = f"test-{secrets.token_hex(4)}"
    first = NeutralMounts.detect(tmp_path, server)
    assert first is not None
    folders = session(tmp_path)
    left = first.mount(folders)  # the server is killed: nobody unmounts
    assert os.path.ismount(left.paths["workspace"])
    second = NeutralMounts.detect(tmp_path, server)
    assert second is not None
    assert not os.path.ismount(left.paths["workspace"])
    assert not left.staging.exists()
    assert not (folders["workspace"].source.parent / ".overlay").exists()


class RecordingMounts(TurnMounts):
    unmounted = 0

    def unmount(self) -> None:
        self.unmounted += 1


async def test_a_turn_cancelled_while_mounting_leaves_nothing_mounted(tmp_path: Path) -> None:
    release = threading.Event()
    made = RecordingMounts(tmp_path / "staging")

    def mount() -> TurnMounts:
        release.wait(10)  # the thread goes on after its caller is cancelled
        return made

    starting = asyncio.create_task(mounted_off_loop(mount))
    await asyncio.sleep(0.05)
    starting.cancel()
    await asyncio.sleep(0.05)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert made.unmounted == 1
