"""Skills of a harness: validated folders, stored out of line, rendered back without loss.

Stored config entries are small: `{"name", "enabled", "blob"}` for a harness's own skill
(the bundle lives in storage.skills) and `{"name", "enabled": false, "builtin": true}` for a
suppressed built-in. On the wire each skill carries its `blob` handle and its file list;
bundles up to INLINE_BYTES also carry their contents, so a GET→PUT round trip is lossless
either way: a file listed without content is taken from the `blob` it came with.
"""

from __future__ import annotations

import base64
import re
from typing import Any, NoReturn

from storage import skills as skill_store
from storage.skills import StoredFile
from storage.unit import Tx
from uhp_server.harnesses.builtin_skills import builtin_skills
from uhp_server.harnesses.file_entries import file_with_content, utf8
from uhp_server.harnesses.problems import invalid
from uhp_server.harnesses.skill_paths import SKILL_FILE, check_unique, normalise_path
from uhp_server.harnesses.writes import PendingWrites

MAX_SKILLS = 32
MAX_FILES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_BUNDLE_BYTES = 5 * 1024 * 1024
MAX_HARNESS_SKILL_BYTES = 20 * 1024 * 1024
INLINE_BYTES = 256 * 1024  # bundles up to this size come back with their contents
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def parse_skills(writes: PendingWrites, raw: Any, param: str) -> list[dict[str, Any]]:
    """Validate and store the skills of a POST/PUT body; returns the config entries."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        invalid(param, "`skills` must be an array.")
    if len(raw) > MAX_SKILLS:
        invalid(param, f"A harness may have at most {MAX_SKILLS} skills.", max_skills=MAX_SKILLS)
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    total = 0
    for index, item in enumerate(raw):
        at = f"{param}[{index}]"
        entry, size = _parse_skill(writes, item, at)
        if entry["name"].casefold() in seen:
            invalid(f"{at}.name", f"The skill '{entry['name']}' appears more than once.")
        seen.add(entry["name"].casefold())
        total += size
        if total > MAX_HARNESS_SKILL_BYTES:
            invalid(
                at,
                "The harness's skills together exceed the size limit.",
                max_harness_skill_bytes=MAX_HARNESS_SKILL_BYTES,
            )
        if entry.get("store", True):
            entries.append({k: v for k, v in entry.items() if k != "store"})
    return entries


def _name(raw: Any, param: str) -> str:
    if not isinstance(raw, str) or not _NAME.fullmatch(raw):
        invalid(
            param,
            "A skill name must be 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit.",
        )
    return raw


def _enabled(raw: Any, param: str) -> bool:
    if raw is None:
        return True
    if not isinstance(raw, bool):
        invalid(param, "`enabled` must be true or false.")
    return raw


def _carries_content(item: dict[str, Any]) -> bool:
    files = item.get("files")
    in_files = isinstance(files, list) and any(
        isinstance(f, dict) and (f.get("content") is not None or f.get("content_b64") is not None)
        for f in files
    )
    return item.get("content") is not None or in_files


def _parse_skill(writes: PendingWrites, item: Any, at: str) -> tuple[dict[str, Any], int]:
    """(config entry, bundle bytes). `store: False` marks an inherited built-in left as is."""
    if not isinstance(item, dict):
        invalid(at, "A skill must be an object.")
    name = _name(item.get("name"), f"{at}.name")
    enabled = _enabled(item.get("enabled"), f"{at}.enabled")
    no_bundle = item.get("content") is None and item.get("files") is None
    if item.get("builtin") is True or (no_bundle and item.get("blob") is None):
        return _builtin_entry(item, name, enabled, at), 0
    files = _bundle_files(writes, item, at)
    size = sum(len(f.data) for f in files)
    blob = writes.bundle(files)
    return {"name": name, "enabled": enabled, "blob": blob}, size


def _builtin_entry(item: dict[str, Any], name: str, enabled: bool, at: str) -> dict[str, Any]:
    """An entry about an inherited built-in: only `enabled` can be set."""
    if name not in builtin_skills():
        if item.get("builtin") is True:
            invalid(f"{at}.builtin", f"'{name}' is not a built-in skill of this server.")
        invalid(f"{at}.files", "A skill needs `files` (a folder with a SKILL.md) or `content`.")
    if _carries_content(item):
        invalid(
            f"{at}.files",
            f"'{name}' is a built-in skill and its files cannot be changed here; drop "
            "`builtin` to replace it with a skill of your own.",
        )
    if enabled:
        return {"name": name, "store": False}  # inherited as shipped: nothing to store
    return {"name": name, "enabled": False, "builtin": True}


def _bundle_files(writes: PendingWrites, item: dict[str, Any], at: str) -> list[StoredFile]:
    files_raw, content, blob = item.get("files"), item.get("content"), item.get("blob")
    if content is not None:
        if files_raw is not None:
            invalid(f"{at}.content", "Give either `content` or `files`, not both.")
        if not isinstance(content, str):
            invalid(f"{at}.content", "`content` must be a string (the SKILL.md).")
        files = [StoredFile(SKILL_FILE, utf8(content, f"{at}.content"), "text")]
        if len(files[0].data) > MAX_FILE_BYTES:  # the shorthand is a file like any other
            invalid(
                f"{at}.content",
                "A skill file exceeds the size limit.",
                max_file_bytes=MAX_FILE_BYTES,
            )
    elif files_raw is None:
        files = _blob_files(writes, blob, f"{at}.blob")
    else:
        files = _listed_files(writes, files_raw, blob, at)
    _check_bundle(files, at)
    return files


def _blob_files(writes: PendingWrites, blob: Any, param: str) -> list[StoredFile]:
    files = (
        skill_store.read_bundle(writes.tx, writes.principal_id, blob)
        if isinstance(blob, str) and blob.startswith(skill_store.BUNDLE_PREFIX)
        else None
    )
    if files is None:
        invalid(param, "Unknown skill `blob`: pass back the handle a GET returned, unchanged.")
    return files


def _listed_files(writes: PendingWrites, raw: Any, blob: Any, at: str) -> list[StoredFile]:
    if not isinstance(raw, list):
        invalid(f"{at}.files", "`files` must be an array.")
    if len(raw) > MAX_FILES:
        invalid(f"{at}.files", f"A skill may have at most {MAX_FILES} files.", max_files=MAX_FILES)
    from_blob: dict[str, StoredFile] | None = None
    files: list[StoredFile] = []
    for index, entry in enumerate(raw):
        param = f"{at}.files[{index}]"
        if not isinstance(entry, dict):
            invalid(param, "A skill file must be an object with `path` and `content`.")
        path = normalise_path(entry.get("path"), f"{param}.path")
        if entry.get("content") is None and entry.get("content_b64") is None:
            if blob is None:
                invalid(f"{param}.content", "A skill file needs `content` or `content_b64`.")
            if from_blob is None:
                listed = _blob_files(writes, blob, f"{at}.blob")
                from_blob = {f.path: f for f in listed}
            if path not in from_blob:
                invalid(f"{param}.content", "This file is not in the skill's `blob`; send it.")
            files.append(StoredFile(path, from_blob[path].data, from_blob[path].encoding))
        else:
            files.append(file_with_content(path, entry, param, MAX_FILE_BYTES, _file_too_large))
        if len(files[-1].data) > MAX_FILE_BYTES:
            _file_too_large(param)
    return files


def _file_too_large(param: str) -> NoReturn:
    invalid(param, "A skill file exceeds the size limit.", max_file_bytes=MAX_FILE_BYTES)


def _check_bundle(files: list[StoredFile], at: str) -> None:
    check_unique([f.path for f in files], f"{at}.files")
    if SKILL_FILE not in {f.path for f in files}:
        invalid(f"{at}.files", "A skill folder must contain a SKILL.md at its top level.")
    if sum(len(f.data) for f in files) > MAX_BUNDLE_BYTES:
        invalid(
            f"{at}.files",
            "The skill folder exceeds the size limit.",
            max_bundle_bytes=MAX_BUNDLE_BYTES,
        )


# -- back to the wire -----------------------------------------------------------------------


def file_wire(file: StoredFile, with_content: bool) -> dict[str, Any]:
    wire: dict[str, Any] = {"path": file.path, "size": len(file.data)}
    if with_content:
        if file.encoding == "text":
            wire["content"] = file.data.decode("utf-8")
        else:
            wire["content_b64"] = base64.b64encode(file.data).decode("ascii")
    return wire


def _own_skill_wire(tx: Tx, principal_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    manifest = skill_store.get_manifest(tx, principal_id, entry["blob"]) or []
    wire = {"name": entry["name"], "enabled": entry["enabled"], "blob": entry["blob"]}
    if sum(m.size for m in manifest) <= INLINE_BYTES:
        files = skill_store.read_bundle(tx, principal_id, entry["blob"]) or []
        wire["files"] = [file_wire(f, with_content=True) for f in files]
    else:
        wire["files"] = [{"path": m.path, "size": m.size} for m in manifest]
    return wire


def render_skills(tx: Tx, principal_id: str, stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What was written to the harness's `skills`, and nothing else (Harnesses §4.4): its own
    skills and its suppressions of built-ins (`builtin: true, enabled: false`). The built-ins
    it inherits are `inherited_builtin_skills`, a field of their own, so that a GET→PUT round
    trip writes back exactly what it read."""
    wire: list[dict[str, Any]] = []
    for entry in stored:
        if entry.get("builtin"):
            wire.append(_builtin_wire(entry["name"], enabled=False))
        else:
            wire.append(_own_skill_wire(tx, principal_id, entry))
    return wire


def inherited_builtin_skills(stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The built-in skills the harness inherits, each `enabled` unless the harness suppresses
    it, listed without contents (GET .../skills/{name}/files has them). One the harness
    replaces with a skill of its own under the same name (case ignored, as skill names are)
    is not inherited."""
    own = {e["name"].casefold() for e in stored if not e.get("builtin")}
    suppressed = {e["name"].casefold() for e in stored if e.get("builtin")}
    return [
        _builtin_wire(name, enabled=name.casefold() not in suppressed)
        for name in builtin_skills()
        if name.casefold() not in own
    ]


def _builtin_wire(name: str, enabled: bool) -> dict[str, Any]:
    skill = builtin_skills().get(name)
    files = [file_wire(f, with_content=False) for f in skill.files] if skill else []
    return {"name": name, "enabled": enabled, "builtin": True, "files": files}


def skill_folder(
    tx: Tx, principal_id: str, stored: list[dict[str, Any]], name: str
) -> dict[str, Any] | None:
    """The whole folder of one skill of the harness (own or inherited), with contents."""
    own = next((e for e in stored if e["name"] == name and not e.get("builtin")), None)
    if own is not None:
        files = skill_store.read_bundle(tx, principal_id, own["blob"]) or []
        head = {"name": name, "enabled": own["enabled"], "builtin": False, "blob": own["blob"]}
    elif name in builtin_skills():
        files = list(builtin_skills()[name].files)
        suppressed = any(e["name"] == name for e in stored)
        head = {"name": name, "enabled": not suppressed, "builtin": True}
    else:
        return None
    return {"object": "list", **head, "files": [file_wire(f, with_content=True) for f in files]}
