"""The vector functions recall by meaning uses (storage/memory_vectors.py), one per database,
and the column a vector is kept in.

SQLite: sqlite-vec (PyPI `sqlite-vec`), loaded on each connection the server opens
(storage/dialect.py's `sqlite_pragmas`); a vector is its float32s, little-endian, in a BLOB.

PostgreSQL: pgvector (the `vector` extension; scripts/postgres.sh builds Debian's source of it
where the cluster lacks it). A vector is kept as `real[]`, not as pgvector's own type, and cast
to `vector` where it is compared: so the table does not depend on the extension (a database
whose user may not create extensions keeps its vectors all the same, and they are ranked as
soon as an administrator creates it there), and the migrations run on a cluster without it.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import struct
from collections.abc import Sequence
from typing import Any

from sqlalchemy import LargeBinary
from sqlalchemy.dialects.postgresql import ARRAY, REAL
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

log = logging.getLogger(__name__)

# The most dimensions pgvector's `vector` holds; a vector longer than this is not kept on
# PostgreSQL (its version counts as one meaning does not cover).
PGVECTOR_MAX_DIMENSIONS = 16_000


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


def packed(vector: Sequence[float]) -> bytes:
    """float32s, little-endian: sqlite-vec's form of a vector."""
    return struct.pack(f"<{len(vector)}f", *vector)


def unpacked(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def as_float32(vector: Sequence[float]) -> list[float]:
    """The values as float32 holds them, as SQLite's BLOB keeps them: `real` and pgvector
    refuse a value float32 cannot hold (`1e-50`: "underflow") where float32 rounds it to 0.
    Only for a vector keepable_on_postgresql (an overflow raises OverflowError)."""
    return unpacked(packed(vector))


def pgvector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of a vector, `[1.5,-2.0]` (cast with CAST(? AS vector))."""
    return "[" + ",".join(repr(value) for value in as_float32(vector)) + "]"


def keepable_on_postgresql(vector: Sequence[float]) -> bool:
    """Whether pgvector can hold this vector: it refuses NaN, infinities and more than
    PGVECTOR_MAX_DIMENSIONS values (a float32 overflow is an infinity)."""
    return len(vector) <= PGVECTOR_MAX_DIMENSIONS and all(
        math.isfinite(value) and abs(value) <= 3.4e38 for value in vector
    )


class Embedding(TypeDecorator[list[float]]):
    """A vector's column: a BLOB of float32s on SQLite, `real[]` on PostgreSQL."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(REAL()))
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: list[float] | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return as_float32(value)
        return packed(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> list[float] | None:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return [float(item) for item in value]
        return unpacked(value)


def pgvector_missing(rows: Any) -> str | None:
    """None when pgvector is created in the database `rows` (a Tx's `rows`) reads; else why
    not, and what an administrator does about it."""
    if rows("SELECT 1 FROM pg_extension WHERE extname = 'vector'"):
        return None
    if rows("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        return (
            "pgvector is installed on the PostgreSQL server but not created in this database; "
            "a superuser runs `CREATE EXTENSION vector` in it (it is not a trusted extension: "
            "the server's own user may not), then the server is restarted"
        )
    return (
        "pgvector is not installed on the PostgreSQL server (Debian's "
        "postgresql-NN-pgvector, or its source built as scripts/postgres.sh does); then a "
        "superuser runs `CREATE EXTENSION vector` in this database and the server is restarted"
    )
