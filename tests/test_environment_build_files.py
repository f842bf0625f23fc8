"""The builder's own file work on what a build's agent wrote (environments/building/): read
back without following links, only regular files, capped; a reused tree copied with its holes
and within the disk limit; hard links only where the earlier files are root's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uhp_server.environments.building import reuse
from uhp_server.environments.building.host_files import read_regular
from uhp_server.environments.layout import EnvironmentLayout
from uhp_server.sandbox.limits import disk_usage

MiB = 1024 * 1024


def test_a_report_is_read_only_from_a_regular_file_reached_without_links(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root's own\n")
    base = tmp_path / "workspace"
    (base / "real").mkdir(parents=True)
    (base / "real" / "report").write_text("fine")
    (base / "linked.json").symlink_to(secret)
    (base / "through").symlink_to(tmp_path)  # a folder on the way that is a link
    os.mkfifo(base / "fifo")  # read as root, it would block the build's thread
    (base / "zero").symlink_to("/dev/zero")
    (base / "big").write_bytes(b"x" * 2048)

    assert read_regular(base, "real", "report") == b"fine"
    assert read_regular(base, "linked.json") is None
    assert read_regular(base, "through", "secret") is None
    assert read_regular(base, "fifo") is None
    assert read_regular(base, "zero") is None
    assert read_regular(Path("/dev"), "zero") is None  # a device, even reached plainly
    assert read_regular(base, "big", cap=1024) is None
    assert read_regular(base, "big", cap=4096) == b"x" * 2048
    assert read_regular(base, "absent") is None


def _versions(tmp_path: Path) -> tuple[EnvironmentLayout, Path, Path]:
    """Version 1 of env_1 with a node_modules noted as made with "k", and a new version 2."""
    layout = EnvironmentLayout(tmp_path)
    first, second = layout.version("env_1", 1), layout.version("env_1", 2)
    tree = first / "node_modules"
    tree.mkdir(parents=True)
    second.mkdir(parents=True)
    reuse.stamp(first, layout.build_notes("env_1", 1), "node_modules", "k")
    return layout, tree, second


def test_a_copied_tree_keeps_its_holes_and_leaves_out_what_is_not_a_file(tmp_path: Path) -> None:
    layout, tree, second = _versions(tmp_path)
    with open(tree / "sparse.bin", "wb") as sparse:
        sparse.write(b"head")
        sparse.seek(64 * MiB)
        sparse.write(b"tail")
    (tree / "lib.js").write_text("module.exports = 1\n")
    (tree / "link").symlink_to("/etc/shadow")
    os.mkfifo(tree / "pipe")

    notes = layout.build_notes("env_1", 2)
    reused = reuse.reuse(second, notes, "node_modules", "k", link=False, disk_bytes=0)

    assert reused == reuse.Reused(1, linked=False)
    copy = second / "node_modules" / "sparse.bin"
    assert copy.stat().st_size == 64 * MiB + 4
    assert copy.stat().st_blocks * 512 < MiB  # the holes stayed holes
    with open(copy, "rb") as read:
        assert read.read(4) == b"head"
        read.seek(64 * MiB)
        assert read.read() == b"tail"
    assert (second / "node_modules" / "lib.js").read_text() == "module.exports = 1\n"
    assert os.readlink(second / "node_modules" / "link") == "/etc/shadow"
    assert not (second / "node_modules" / "pipe").exists()


def test_a_tree_whose_copy_would_pass_the_disk_limit_is_not_copied(tmp_path: Path) -> None:
    layout, tree, second = _versions(tmp_path)
    with open(tree / "sparse.bin", "wb") as sparse:
        sparse.truncate(64 * MiB)  # no block at all: only its size says what a copy takes

    notes = layout.build_notes("env_1", 2)
    assert reuse.reuse(second, notes, "node_modules", "k", link=False, disk_bytes=16 * MiB) is None
    assert not (second / "node_modules").exists()
    assert disk_usage([tree]).total_bytes < MiB
    assert disk_usage([tree], apparent=True).total_bytes >= 64 * MiB


def test_a_tree_planted_as_a_link_is_neither_reused_nor_followed(tmp_path: Path) -> None:
    layout, tree, second = _versions(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("root's own\n")
    tree.rmdir()
    tree.symlink_to(outside)  # the earlier build's agent replaced its tree by a link
    (second / "node_modules").symlink_to(outside)  # and this one's put one where it goes

    notes = layout.build_notes("env_1", 2)
    assert reuse.reuse(second, notes, "node_modules", "k", link=False, disk_bytes=0) is None
    assert (outside / "secret").read_text() == "root's own\n"


def test_reused_trees_share_inodes_only_on_a_root_server_without_setup_sh() -> None:
    # Not root: make_read_only cannot give the files to root, so a later build's agent (the
    # same user) could write an earlier version through a shared inode.
    assert reuse.may_link(setup_sh=False, root=True)
    assert not reuse.may_link(setup_sh=False, root=False)
    assert not reuse.may_link(setup_sh=True, root=True)
    assert not reuse.may_link(setup_sh=True, root=False)


@pytest.mark.parametrize("root", [True, False])
def test_the_builder_decides_on_links_by_who_the_server_runs_as(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, root: bool
) -> None:
    from uhp_server.environments.building import sandbox_builder

    asked: list[bool] = []

    def fake_reuse(*args: object, link: bool, disk_bytes: int) -> None:
        asked.append(link)

    monkeypatch.setattr(sandbox_builder.os, "geteuid", lambda: 0 if root else 1000)
    monkeypatch.setattr(sandbox_builder.reuse, "reuse", fake_reuse)
    build = object.__new__(sandbox_builder._Build)
    build.folder, build.notes = tmp_path, tmp_path
    build.limits = sandbox_builder.BuildLimits(0, 0, 0)
    tree = sandbox_builder._Tree("node_modules", "node packages", "k", False)
    project = type("P", (), {"setup_sh": False})()
    assert build._reuse(tree, project) is False
    assert asked == [root]
