"""Files a task brings (Files §1), stored once and placed in the session's workspace.

Placement rule: each file goes in the workspace root under its own safe name. A name already
taken by anything else (a user file, a folder, a link the agent planted) is never overwritten
or followed: the file gets the next free name `stem-2.ext`, `stem-3.ext`, ... — unless the
taken name already holds exactly these bytes, in which case it is reused. The prompt then
says where each file is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from storage.acceptance import InputFile
from storage.blobs import BlobStore
from uhp_server.engine.tasks.inputs import Attachment
from uhp_server.files.filenames import split_suffix

_MAX_NAME_TRIES = 1000


@dataclass(frozen=True)
class Placed:
    """Where an attachment landed, relative to the workspace."""

    name: str
    media_type: str
    size: int
    image: bool = False  # came as an input_image


def write_inline_blobs(blobs: BlobStore, items: list[Attachment]) -> list[Attachment]:
    """Put inline bytes in the blob store so the turn can place them (hashing and writing up
    to UHP_MAX_FILE_BYTES: run it off the event loop); returns the inline attachments.
    Content-addressed, so it may run before the task is accepted: a blob nothing refers to is
    harmless."""
    inline = []
    for attachment in items:
        if attachment.data is None:
            continue
        attachment.sha256 = blobs.put_bytes(attachment.data)
        attachment.data = None
        inline.append(attachment)
    return inline


def input_files(inline: list[Attachment]) -> list[InputFile]:
    """The inline files, as the principal's File objects a kept task's input makes (ids
    already in the stored input items), so a later task can reference them by file_id."""
    files = []
    for attachment in inline:
        assert attachment.sha256 is not None, "write_inline_blobs stored it first"
        files.append(
            InputFile(
                attachment.file_id,
                attachment.filename,
                attachment.size,
                attachment.media_type,
                attachment.sha256,
            )
        )
    return files


def place_all(workspace: Path, blobs: BlobStore, items: tuple[Attachment, ...]) -> list[Placed]:
    placed = []
    for attachment in items:
        if attachment.sha256 is None:
            continue
        name = _place(workspace, blobs, attachment.filename, attachment.sha256)
        placed.append(Placed(name, attachment.media_type, attachment.size, attachment.image))
    return placed


def prompt_note(placed: list[Placed]) -> str:
    if not placed:
        return ""
    listed = ", ".join(f"./{p.name} ({p.media_type}, {p.size} bytes)" for p in placed)
    return f"Attached files (in the working directory): {listed}"


def _candidates(filename: str) -> list[str]:
    stem, suffix = split_suffix(filename)
    return [filename] + [f"{stem}-{n}{suffix}" for n in range(2, _MAX_NAME_TRIES)]


def _place(workspace: Path, blobs: BlobStore, filename: str, sha256: str) -> str:
    for name in _candidates(filename):
        target = workspace / name
        if _holds(target, sha256):
            return name
        if _create(target, blobs, sha256):
            return name
    raise RuntimeError("no free name for an attachment")


def _holds(path: Path, sha256: str) -> bool:
    """Whether path is a regular file (not a link) with exactly these bytes."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest() == sha256


def _same_owner_as_folder(fd: int, folder: Path) -> None:
    """The file belongs to whoever owns the workspace (a sandbox may run the agent as another
    user than the server), so the agent can change it like any file of its own."""
    if os.geteuid() != 0:
        return
    owner = os.stat(folder)
    os.fchown(fd, owner.st_uid, owner.st_gid)


def _create(path: Path, blobs: BlobStore, sha256: str) -> bool:
    """Write a new file; False when the name exists in any form (O_EXCL never follows a link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:
        return False
    try:
        _same_owner_as_folder(fd, path.parent)
        with os.fdopen(fd, "wb") as handle:
            for chunk in blobs.read_chunks(sha256):
                handle.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return True
