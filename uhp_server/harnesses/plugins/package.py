"""A plugin's package as a body carries it (Plugins §2.1).

`files` are relative to the plugin root: text in `content`, bytes in `content_b64`. Instead,
a client may pass back the `blob` a GET returned; a file listed without content is taken from
it. Paths follow the rules skill folders follow (skill_paths.py) and a path that breaks one
is refused with `plugin_invalid`, as is a package without `plugin.json` at its root; one past
the size limit is refused with `file_too_large`, never truncated.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from storage import skills as bundle_store
from storage.skills import StoredFile
from uhp_server.harnesses.file_entries import file_with_content
from uhp_server.harnesses.plugins.manifest import MANIFEST_FILE
from uhp_server.harnesses.plugins.problems import package_too_large, plugin_invalid
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.skill_paths import check_unique, normalise_path
from uhp_server.harnesses.writes import PendingWrites

MAX_FILES = 1000
MAX_BYTES = 20 * 1024 * 1024  # one package, all its files
_INDEX = re.compile(r"\[(\d+)\]\.path$")


def package_files(writes: PendingWrites, item: dict[str, Any], at: str) -> list[StoredFile]:
    """The package `item` carries, whole and checked (`at`: the item's param)."""
    files_raw, blob = item.get("files"), item.get("blob")
    if files_raw is None:
        if blob is None:
            invalid(f"{at}.files", "A plugin needs `files` (its package) or the `blob` a GET gave.")
        files = stored_package(writes, blob, f"{at}.blob")
    else:
        files = _listed(writes, files_raw, blob, at)
    _check_unique([f.path for f in files], f"{at}.files")
    if MANIFEST_FILE not in {f.path for f in files}:
        plugin_invalid(f"{at}.files", MANIFEST_FILE, "The package has no plugin.json at its root.")
    return files


def stored_package(writes: PendingWrites, blob: Any, param: str) -> list[StoredFile]:
    files = (
        bundle_store.read_bundle(writes.tx, writes.principal_id, blob)
        if isinstance(blob, str) and blob.startswith(bundle_store.PACKAGE_PREFIX)
        else None
    )
    if files is None:
        invalid(param, "Unknown plugin `blob`: pass back the handle a GET returned, unchanged.")
    return files


def _listed(writes: PendingWrites, raw: Any, blob: Any, at: str) -> list[StoredFile]:
    if not isinstance(raw, list):
        invalid(f"{at}.files", "`files` must be an array.")
    if len(raw) > MAX_FILES:
        invalid(f"{at}.files", f"A plugin may have at most {MAX_FILES} files.", max_files=MAX_FILES)
    from_blob: dict[str, StoredFile] | None = None
    files: list[StoredFile] = []
    total = 0
    for index, entry in enumerate(raw):
        param = f"{at}.files[{index}]"
        if not isinstance(entry, dict):
            invalid(param, "A package file must be an object with `path` and `content`.")
        path = _path(entry.get("path"), f"{param}.path")
        if entry.get("content") is None and entry.get("content_b64") is None:
            if blob is None:
                invalid(f"{param}.content", "A package file needs `content` or `content_b64`.")
            if from_blob is None:
                from_blob = {f.path: f for f in stored_package(writes, blob, f"{at}.blob")}
            if path not in from_blob:
                invalid(f"{param}.content", "This file is not in the plugin's `blob`; send it.")
            file = from_blob[path]
        else:
            file = file_with_content(path, entry, param, MAX_BYTES - total, _too_large)
        total += len(file.data)
        if total > MAX_BYTES:
            package_too_large(f"{at}.files", MAX_BYTES)
        files.append(file)
    return files


def _path(raw: Any, param: str) -> str:
    """A regular file's path inside the root; `plugin_invalid` naming it otherwise."""

    def refuse(param: str, message: str) -> NoReturn:
        plugin_invalid(param, str(raw), message)

    if isinstance(raw, str) and raw.endswith("/"):
        refuse(param, "A package file path must name a regular file, not a folder.")
    return normalise_path(raw, param, refuse)


def _check_unique(paths: list[str], param: str) -> None:
    """One spelling per file, no file that is also a folder (skill_paths.check_unique)."""

    def refuse(at: str, message: str) -> NoReturn:  # at: `<param>[<index>].path`
        found = _INDEX.search(at)
        plugin_invalid(at, paths[int(found.group(1))] if found else at, message)

    check_unique(paths, param, refuse)


def _too_large(param: str) -> NoReturn:
    package_too_large(param, MAX_BYTES)
