"""One file of a folder a harness body carries (a skill's, a plugin package's): text in
`content`, bytes in `content_b64`, kept byte for byte. Whoever reads the folder says how many
bytes the file may still take and what to answer past that."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any, NoReturn

from storage.skills import StoredFile
from uhp_server.harnesses.problems import invalid

_WHITESPACE = re.compile(rb"\s+")


def file_with_content(
    path: str,
    entry: dict[str, Any],
    param: str,
    room: int,
    too_large: Callable[[str], NoReturn],
) -> StoredFile:
    """The file as sent. Base64 past `room` bytes is refused (`too_large(param)`) before it is
    decoded; text is measured by whoever adds it up."""
    text, b64 = entry.get("content"), entry.get("content_b64")
    if text is not None and b64 is not None:
        invalid(param, "Give either `content` or `content_b64`, not both.")
    if text is not None:
        if not isinstance(text, str):
            invalid(f"{param}.content", "`content` must be a string; use `content_b64` for bytes.")
        return StoredFile(path, utf8(text, f"{param}.content"), "text")
    if not isinstance(b64, str):
        invalid(f"{param}.content_b64", "`content_b64` must be a base64 string.")
    if len(b64) * 3 // 4 > room + 3:
        too_large(param)
    try:
        data = base64.b64decode(_WHITESPACE.sub(b"", b64.encode("ascii")), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        invalid(f"{param}.content_b64", "`content_b64` is not valid base64.")
    return StoredFile(path, data, "base64")


def utf8(text: str, param: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate JSON let through
        invalid(param, "Text content is not valid Unicode; send bytes as `content_b64`.")
