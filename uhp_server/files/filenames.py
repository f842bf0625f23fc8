"""Client- and agent-chosen names made safe to write to disk and to send in a header."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

# Unicode's bidirectional controls (marks, embeddings, overrides, isolates) change the order a
# name is shown in without being seen: "report\u202efdp.exe" shows as "reportexe.pdf".
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # as a regex class's body
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")
_UNSAFE = re.compile(f'[\\x00-\\x1f\\x7f<>:"|?*\\\\/{BIDI_CONTROLS}]')
MAX_NAME = 120
# A file system's limit is 255 bytes a name (NAME_MAX), and 120 characters of four bytes each
# would pass it; what is left over makes room for the " (2)" of a name already taken.
MAX_NAME_BYTES = 200


def safe_filename(name: str | None, fallback: str = "file") -> str:
    """One path component: no separators, no control or bidirectional control characters, no
    leading dots, not empty.

    Only the last component of whatever the client sent is kept (`../../x.txt` is `x.txt`),
    so a name can never address anything but a file in the folder it is written to."""
    raw = _last_component(unicodedata.normalize("NFC", name or ""))
    cleaned = _UNSAFE.sub("_", raw).strip().lstrip(".").strip()
    if not cleaned:
        return fallback
    if len(cleaned) > MAX_NAME or _size(cleaned) > MAX_NAME_BYTES:
        stem, suffix = split_suffix(cleaned)
        if not 1 < len(suffix) <= 17:  # no extension, or too long to be one: cut anywhere
            stem, suffix = cleaned, ""
        stem = stem[: MAX_NAME - len(suffix)]
        while _size(stem + suffix) > MAX_NAME_BYTES:
            stem = stem[:-1]
        cleaned = stem + suffix
    return cleaned


def split_suffix(name: str) -> tuple[str, str]:
    """(stem, ".ext" or ""): a name that starts with its only dot has no extension."""
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        return name, ""
    return stem, f".{ext}" if ext else ""


def _size(name: str) -> int:
    return len(name.encode("utf-8", "surrogatepass"))


def _last_component(name: str) -> str:
    """After the last separator of either kind (a backslash is one on Windows)."""
    return re.split(r"[\\/]", name)[-1]


# Backslash is a separator to Windows extractors and browsers (`..\x` would climb out of the
# folder; zip names allow only `/`); a control character breaks a terminal or a file dialog,
# and a bidirectional one disguises the name (its extension) in either.
_NOT_PORTABLE = re.compile(f"[\\\\\\x00-\\x1f\\x7f{BIDI_CONTROLS}]")


def has_bidi_control(text: str) -> bool:
    """Whether `text` holds a character that reorders how it is shown (BIDI_CONTROLS)."""
    return _BIDI.search(text) is not None


def portable(name: str) -> str:
    """The name with backslashes, control and bidirectional control characters as `_`
    (folders by `/` kept)."""
    return _NOT_PORTABLE.sub("_", name)


def content_disposition(filename: str) -> str:
    """`attachment` with an ASCII fallback and the exact UTF-8 name (RFC 6266 / 5987)."""
    # The last component by either separator (`..\evil.bat` would be saved as `evil.bat` by
    # one browser and climb out by another), without controls.
    base = portable(_last_component(filename))
    ascii_name = safe_filename(base).encode("ascii", "replace").decode().replace("?", "_")
    ascii_name = ascii_name.replace('"', "_").replace(";", "_") or "file"
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(base, safe='')}"
