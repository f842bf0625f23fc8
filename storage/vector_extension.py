"""sqlite-vec, the vector functions recall by meaning uses on SQLite (storage/memory_vectors.py),
loaded on each connection the server opens (storage/dialect.py's `sqlite_pragmas`)."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

log = logging.getLogger(__name__)


def load(dbapi_connection: Any) -> bool:
    """sqlite-vec on this SQLite connection; False (and nothing loaded) when the package is
    not installed or Python's sqlite3 was built without extension loading (pyenv's builds,
    unless configured with --enable-loadable-sqlite-extensions)."""
    if not hasattr(dbapi_connection, "enable_load_extension"):
        return False
    try:
        import sqlite_vec  # type: ignore[import-untyped]  # no stubs
    except ImportError:
        return False
    try:
        dbapi_connection.enable_load_extension(True)
        try:
            sqlite_vec.load(dbapi_connection)
        finally:
            dbapi_connection.enable_load_extension(False)
    except sqlite3.Error as exc:
        log.warning("sqlite_vec_not_loaded", extra={"reason": str(exc)})
        return False
    return True
