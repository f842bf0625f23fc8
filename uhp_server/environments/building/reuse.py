"""What a rebuild reuses from an earlier version of the same environment: an installed tree
(.venv, node_modules, apt/) whose inputs were the same, found by a key stamped in the tree.

A tree's key digests what decides its contents: the manifests, the declared specs, where it
is mounted (a virtual environment and npm's bin scripts hold absolute paths) and the system
it was made on (the interpreter, Node, the image). `pip install .` installs the project's own
code too, so with a pyproject.toml the key covers every file of the source.

Versions are read-only once built (the chapter makes them so, and sessions mount them
read-only), so a new version may share an earlier one's files by hard links: nothing writes
either copy afterwards. The one step of a build that could write into a reused tree is the
owner's setup.sh; when the project has one the tree is copied instead of linked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

STAMP = ".uhp-build-key"  # in the tree: the key it was made with
# Trees of the version that the source digest leaves out (they are what builds make).
_MADE = frozenset({".venv", "node_modules", "apt", ".git", "__pycache__"})


def key(**parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def file_digest(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """The digest of each named file at the folder's root that exists."""
    return {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in names
        if (folder / name).is_file()
    }


def source_digest(folder: Path) -> str:
    """Every file of the source (not what builds make), paths and contents."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _MADE)
        for name in sorted(files):
            path = Path(root, name)
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            if path.is_file() and not path.is_symlink():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True)
class Reused:
    version: int
    linked: bool  # hard links (else a copy)


def earlier_tree(folder: Path, tree: str, tree_key: str) -> tuple[int, Path] | None:
    """The newest earlier version (a sibling of `folder`, named by its number) whose `tree`
    was made with `tree_key`."""
    try:
        this = int(folder.name)
        siblings = [int(p.name) for p in folder.parent.iterdir() if p.name.isdigit()]
    except (OSError, ValueError):
        return None
    for number in sorted((n for n in siblings if n < this), reverse=True):
        candidate = folder.parent / str(number) / tree
        try:
            if (candidate / STAMP).read_text() == tree_key:
                return number, candidate
        except OSError:
            continue
    return None


def reuse(folder: Path, tree: str, tree_key: str, *, link: bool) -> Reused | None:
    """Put an earlier version's `tree` made with `tree_key` into `folder` (hard links when
    `link`, falling back to a copy across filesystems); None when there is none. A tree
    half-placed (the earlier version removed meanwhile) is removed again."""
    found = earlier_tree(folder, tree, tree_key)
    if found is None:
        return None
    number, source = found
    target = folder / tree
    shutil.rmtree(target, ignore_errors=True)
    try:
        if link:
            try:
                shutil.copytree(source, target, symlinks=True, copy_function=os.link)
            except shutil.Error:
                shutil.rmtree(target, ignore_errors=True)
                link = False
        if not link:
            shutil.copytree(source, target, symlinks=True)
    except (OSError, shutil.Error):
        shutil.rmtree(target, ignore_errors=True)
        return None
    return Reused(number, link)


def stamp(folder: Path, tree: str, tree_key: str) -> None:
    """Mark `tree` (once its step succeeded) as made with `tree_key`."""
    if (folder / tree).is_dir():
        (folder / tree / STAMP).write_text(tree_key)
