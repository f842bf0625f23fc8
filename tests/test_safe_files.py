"""harness_bases.safe_files, which every base writes its agent-home files with: whatever the
agent left in its home (links, folders, fifos) is replaced, never followed. Each base's own
tests check that its config and skills go through it."""

from __future__ import annotations

import os
from pathlib import Path

from harness_bases.safe_files import real_dir, remove, remove_if_present, write_file


def outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file")
    return outside / "keep.txt"


def test_write_file_replaces_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    target = outside_file(tmp_path)
    path = tmp_path / "config.toml"
    path.symlink_to(target)
    write_file(path, b"ours", 0o600)
    assert not path.is_symlink() and path.read_bytes() == b"ours"
    assert path.stat().st_mode & 0o777 == 0o600
    assert target.read_text() == "host file"


def test_write_file_replaces_a_folder_and_a_dangling_link(tmp_path: Path) -> None:
    folder = tmp_path / "settings.json"
    (folder / "inside").mkdir(parents=True)
    write_file(folder, b"{}")
    assert folder.is_file() and folder.read_bytes() == b"{}"
    dangling = tmp_path / "gone"
    dangling.symlink_to(tmp_path / "nowhere")
    write_file(dangling, b"x")
    assert not dangling.is_symlink() and not (tmp_path / "nowhere").exists()


def test_real_dir_replaces_links_and_files_on_the_way(tmp_path: Path) -> None:
    target = outside_file(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cli").symlink_to(target.parent)
    (home / "plain").write_text("not a folder")
    made = real_dir(home, ".cli/skills/s")
    assert made == home / ".cli" / "skills" / "s" and made.is_dir()
    assert not (home / ".cli").is_symlink()
    assert real_dir(home, "plain").is_dir()
    assert sorted(p.name for p in target.parent.iterdir()) == ["keep.txt"]


def test_remove_takes_the_link_never_its_target(tmp_path: Path) -> None:
    target = outside_file(tmp_path)
    link = tmp_path / "skills"
    link.symlink_to(target.parent)
    remove(link)
    assert not link.is_symlink() and target.read_text() == "host file"
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    remove(tree)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    remove(fifo)
    assert not tree.exists() and not fifo.exists()


def test_remove_if_present_is_quiet_when_nothing_is_there(tmp_path: Path) -> None:
    remove_if_present(tmp_path / "missing")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    remove_if_present(dangling)
    assert not dangling.is_symlink()
