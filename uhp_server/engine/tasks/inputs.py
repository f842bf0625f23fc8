"""Task input (Tasks §2, Files §1): a bare string or a list of items, flattened into one prompt.

Text parts become the prompt. `input_file` and `input_image` parts become attachments: inline
bytes (a data URL) or a reference to an uploaded file (`file_id`). Either way the stored input
item names a File object, so inline bytes are kept once, in the blob store, not in the log.
"""

from __future__ import annotations

import binascii
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from storage.tables import FileRow
from uhp_server.errors import ApiError
from uhp_server.files.filenames import safe_filename
from uhp_server.ids import new_id

_TEXT_PARTS = {"input_text", "output_text", "text"}
_FILE_PARTS = {"input_file", "input_image"}

FileLookup = Callable[[str], FileRow | None]


@dataclass
class Attachment:
    """A file the task brings. `data` holds inline bytes not yet stored; an upload has none."""

    file_id: str
    filename: str
    media_type: str
    size: int
    data: bytes | None = None
    sha256: str | None = None
    image: bool = False  # an input_image: also shown to the model, where the base can


@dataclass
class NormalizedInput:
    items: list[dict[str, Any]]  # as GET /v1/responses/{id}/input_items returns them
    prompt: str
    instructions: list[str] = field(default_factory=list)  # system/developer messages
    attachments: list[Attachment] = field(default_factory=list)


def _invalid(message: str, param: str) -> ApiError:
    return ApiError(400, "invalid_input", message, param=param)


def _too_large(limit: int, param: str) -> ApiError:
    return ApiError(
        413,
        "file_too_large",
        f"The file is larger than this server accepts ({limit} bytes).",
        param=param,
        detail={"max_bytes": limit},
    )


# Each file is a row written with the task's acceptance and a file placed in its workspace: a
# bound keeps one request from holding acceptance up for everyone else (storage/acceptance.py).
MAX_FILES_PER_TASK = 1000


@dataclass
class _Reader:
    """Reads one input's parts, resolving file references against the caller's own files."""

    lookup: FileLookup
    max_file_bytes: int
    attachments: list[Attachment] = field(default_factory=list)

    def part(self, part: Any, role: str, where: str) -> tuple[str | None, dict[str, Any]]:
        """(text or None, the part as stored) for one content part."""
        if not isinstance(part, dict):
            raise _invalid("Each content part must be an object.", where)
        kind = part.get("type")
        if not isinstance(kind, str):
            raise _invalid("A content part needs a string 'type'.", f"{where}.type")
        if kind in _FILE_PARTS:
            if role != "user":
                raise _invalid("Files can only be attached to a user message.", f"{where}.type")
            return None, self._file_part(part, kind, where)
        if kind not in _TEXT_PARTS:
            raise _invalid(f"Unknown content part type '{kind}'.", f"{where}.type")
        if not isinstance(part.get("text"), str):
            raise _invalid("A text part needs a string 'text'.", f"{where}.text")
        return part["text"], {}

    def _file_part(self, part: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
        if len(self.attachments) >= MAX_FILES_PER_TASK:
            raise _invalid(f"A task may bring at most {MAX_FILES_PER_TASK} files.", where)
        data_key = "file_data" if kind == "input_file" else "image_url"
        file_id, inline = part.get("file_id"), part.get(data_key)
        if (file_id is None) == (inline is None):
            raise _invalid(f"An {kind} part needs exactly one of 'file_id' or '{data_key}'.", where)
        if file_id is not None:
            attachment = self._uploaded(file_id, f"{where}.file_id")
        else:
            attachment = self._inline(inline, part.get("filename"), kind, f"{where}.{data_key}")
        if kind == "input_image" and not attachment.media_type.startswith("image/"):
            raise _invalid("An input_image must be an image.", where)
        attachment.image = kind == "input_image"
        self.attachments.append(attachment)
        stored = {"type": kind, "file_id": attachment.file_id, "filename": attachment.filename}
        if kind == "input_image" and isinstance(part.get("detail"), str):
            stored["detail"] = part["detail"]
        return stored

    def _uploaded(self, file_id: Any, param: str) -> Attachment:
        row = self.lookup(file_id) if isinstance(file_id, str) else None
        if row is None:
            raise ApiError(404, "file_not_found", "No file with that id.", param=param)
        return Attachment(row.id, row.filename, row.media_type, row.bytes, sha256=row.sha256)

    def _inline(self, value: Any, filename: Any, kind: str, param: str) -> Attachment:
        if not isinstance(value, str):
            raise _invalid("Inline file data must be a data URL string.", param)
        media_type, data = _decode_data_url(value, self.max_file_bytes, param)
        if filename is not None and not isinstance(filename, str):
            raise _invalid("'filename' must be a string.", param.rsplit(".", 1)[0] + ".filename")
        fallback = ("image" if kind == "input_image" else "file") + _extension(media_type)
        name = safe_filename(filename, fallback) if filename else fallback
        if media_type == "application/octet-stream":
            media_type = mimetypes.guess_type(name)[0] or media_type
        return Attachment(new_id("file"), name, media_type, len(data), data=data)


def _extension(media_type: str) -> str:
    return mimetypes.guess_extension(media_type) or ".bin"


def _decode_data_url(value: str, limit: int, param: str) -> tuple[str, bytes]:
    """(media type, bytes) of a `data:` URL; 400 when malformed, 413 past the size limit."""
    if not value.startswith("data:") or "," not in value:
        raise _invalid(
            "Inline files must be data URLs (data:<type>;base64,...); upload anything else.",
            param,
        )
    header, payload = value[5:].split(",", 1)
    params = header.split(";")
    media_type = params[0].strip().lower() or "text/plain"
    if "/" not in media_type or len(media_type) > 127 or not media_type.isprintable():
        # (A control character, NUL above all, no database text column holds.)
        raise _invalid("The data URL's media type is not valid.", param)
    is_base64 = "base64" in (p.strip().lower() for p in params[1:])
    if is_base64 and len(payload) // 4 * 3 > limit + 3:
        raise _too_large(limit, param)  # refused before decoding a single byte
    try:
        data = _base64_bytes(payload) if is_base64 else unquote_to_bytes(payload)
    except (binascii.Error, ValueError):
        raise _invalid("The data URL's base64 content is not valid.", param) from None
    if len(data) > limit:
        raise _too_large(limit, param)
    return media_type, data


def _base64_bytes(payload: str) -> bytes:
    """Strict base64 (whitespace allowed), decoded straight from the str: b64decode would
    first copy the whole payload into bytes. Non-ASCII text raises ValueError."""
    if any(c in payload for c in " \t\r\n\f\v"):
        payload = "".join(payload.split())
    return binascii.a2b_base64(payload, strict_mode=True)


def _message(role: str, parts: list[tuple[str | None, dict[str, Any]]]) -> dict[str, Any]:
    part_type = "output_text" if role == "assistant" else "input_text"
    content = [{"type": part_type, "text": text} if text is not None else p for text, p in parts]
    return {"id": new_id("message"), "type": "message", "role": role, "content": content}


def _no_files(_file_id: str) -> FileRow | None:
    return None


def normalize_input(
    raw: str | list[dict[str, Any]],
    lookup: FileLookup = _no_files,
    max_file_bytes: int = 50 * 1024 * 1024,
) -> NormalizedInput:
    if isinstance(raw, str):
        if not raw.strip():
            raise _invalid("The input is empty.", "input")
        return NormalizedInput(items=[_message("user", [(raw, {})])], prompt=raw)
    if not raw:
        raise _invalid("The input is empty.", "input")
    reader = _Reader(lookup, max_file_bytes)
    items: list[dict[str, Any]] = []
    turns: list[tuple[str, str]] = []
    instructions: list[str] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        kind = item.get("type", "message")
        if kind != "message":
            raise _invalid(
                f"Input items of type '{kind}' are not accepted: the harness runs its own tools.",
                f"{where}.type",
            )
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise _invalid("A message needs a role: user, assistant, system or developer.", where)
        parts = _parts(reader, item.get("content"), role, f"{where}.content")
        items.append(_message(role, parts))
        text = "\n".join(t for t, _ in parts if t is not None)
        if role in ("system", "developer"):
            instructions.append(text)
        elif text.strip() or role != "user":
            turns.append((role, text))
    if not reader.attachments and not any(r == "user" and t.strip() for r, t in turns):
        raise _invalid("The input has no user text.", "input")
    if all(role == "user" for role, _ in turns):
        prompt = "\n\n".join(text for _, text in turns)
    else:
        prompt = "\n\n".join(f"{role.capitalize()}: {text}" for role, text in turns)
    return NormalizedInput(
        items=items, prompt=prompt, instructions=instructions, attachments=reader.attachments
    )


def _parts(
    reader: _Reader, content: Any, role: str, param: str
) -> list[tuple[str | None, dict[str, Any]]]:
    if isinstance(content, str):
        return [(content, {})]
    if not isinstance(content, list):
        raise _invalid("Message content must be a string or a list of parts.", param)
    return [reader.part(part, role, f"{param}[{i}]") for i, part in enumerate(content)]
