"""Client- and agent-chosen names made safe to write to disk and to send in a header."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

_UNSAFE = re.compile(r'[\x00-\x1f\x7f<>:"|?*\\/]')
MAX_NAME = 120
# A file system's limit is 255 bytes a name (NAME_MAX), and 120 characters of four bytes each
# would pass it; what is left over makes room for the " (2)" of a name already taken.
MAX_NAME_BYTES = 200


def safe_filename(name: str | None, fallback: str = "file") -> str:
    """One path component: no separators, no control characters, no leading dots, not empty.

    Only the last component of whatever the client sent is kept (`../../x.txt` is `x.txt`),
    so a name can never address anything but a file in the folder it is written to."""
    raw = unicodedata.normalize("NFC", name or "")
    raw = re.split(r"[\\/]", raw)[-1]
    cleaned = _UNSAFE.sub("_", raw).strip().lstrip(".").strip()
    if not cleaned:
        return fallback
    if len(cleaned) > MAX_NAME or _size(cleaned) > MAX_NAME_BYTES:
        stem, dot, ext = cleaned.rpartition(".")
        if not (dot and stem and 0 < len(ext) <= 16):
            stem, ext = cleaned, ""
        suffix = "." + ext if ext else ""
        stem = stem[: MAX_NAME - len(suffix)]
        while _size(stem + suffix) > MAX_NAME_BYTES:
            stem = stem[:-1]
        cleaned = stem + suffix
    return cleaned


def _size(name: str) -> int:
    return len(name.encode("utf-8", "surrogatepass"))


def content_disposition(filename: str) -> str:
    """`attachment` with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987)."""
    # The last component by either separator (a backslash is one on Windows: `..\evil.bat`
    # would be saved as `evil.bat` by one browser and climb out by another), no controls.
    base = re.sub(r"[\x00-\x1f\x7f]", "_", re.split(r"[\\/]", filename)[-1])
    ascii_name = safe_filename(base).encode("ascii", "replace").decode().replace("?", "_")
    ascii_name = ascii_name.replace('"', "_").replace(";", "_") or "file"
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(base, safe='')}"
