"""What file handling needs to know of a stored file: its name, its type, when it was written
and where its bytes are (their hash in the blob store)."""

from __future__ import annotations

from typing import Protocol


class StoredFile(Protocol):
    @property
    def filename(self) -> str: ...

    @property
    def media_type(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def created_at(self) -> int: ...
