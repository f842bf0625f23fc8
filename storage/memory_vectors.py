"""Recall by meaning (Memories §6.2 `query`) for the embedded provider: each record version's
vector (`memory_record_vector`, migrations 0018 and 0020), written with the version, and the
versions of a scope nearest to a question's vector.

Both databases rank the same way: the scope's vectors by cosine distance, exactly (no
approximate index: the scope, decided by the server, is applied before any distance is
computed, so a memory another principal holds is never even compared), nearest first, the
newer version first at an equal distance, none less alike than MIN_SIMILARITY.
SQLite: sqlite-vec's `vec_distance_cosine` (storage/vector_extension.py loads it on every
connection when Python's sqlite3 allows extensions). PostgreSQL: pgvector's `<=>` on the
`real[]` kept, cast to `vector` (the extension created in the server's database by migration
0020 or by an administrator); without it the embedded provider declares no `query`.

A vector is kept with the embedding model that made it: a question is compared only with
vectors of the model configured now (a model change leaves the older vectors unused, never
compared with vectors of another space), and the versions of the scope that have words but
no vector of that model are counted, so that recall says in `degraded` that meaning did not
cover them.

Nothing here decides who may read what: the memory ids are given, decided by the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import col, delete

from storage import memory_search as search
from storage import vector_extension as extension
from storage.tables import MemoryRecordRow, MemoryVectorRow
from storage.unit import Tx

# A version is near in meaning when its cosine similarity with the question is at least this:
# below it the two texts share next to nothing, and counting such a version as found would
# leave recall unable to abstain (every version is at some distance from every question).
MIN_SIMILARITY = 0.2


@dataclass(frozen=True)
class Meaning:
    """What a version's words mean to one embedding model."""

    model: str
    vector: list[float]


def searchable_by_meaning(tx: Tx) -> str | None:
    """None when this database can rank by meaning; else why not (said at start-up)."""
    if tx.dialect.name != "sqlite":
        return extension.pgvector_missing(tx.rows)
    try:
        tx.rows("SELECT vec_version()")
    except Exception:  # the function is missing: the extension is not loaded
        return (
            "sqlite-vec is not loaded: install the `sqlite-vec` package and run the server on a "
            "Python whose sqlite3 allows extensions (Debian's python3 does)"
        )
    return None


def index_versions(
    tx: Tx, rows: Sequence[MemoryRecordRow], meanings: Sequence[Meaning | None]
) -> None:
    """Each version's vector, beside it (None: it has none; nor has one pgvector cannot
    hold, on PostgreSQL)."""
    on_sqlite = tx.dialect.name == "sqlite"
    for row, meaning in zip(rows, meanings, strict=True):
        if meaning is None:
            continue
        if not on_sqlite and not extension.keepable_on_postgresql(meaning.vector):
            continue
        tx.orm.add(
            MemoryVectorRow(
                id=row.id,
                version=row.version,
                memory_id=row.memory_id,
                model=meaning.model,
                dimensions=len(meaning.vector),
                embedding=list(meaning.vector),
            )
        )


def unindex_records(tx: Tx, record_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryVectorRow).where(col(MemoryVectorRow.id).in_(record_ids)))


def unindex_memories(tx: Tx, memory_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryVectorRow).where(col(MemoryVectorRow.memory_id).in_(memory_ids)))


def nearest(tx: Tx, scope: search.Scope, question: Meaning, limit: int) -> list[search.Hit]:
    """The scope's versions nearest to the question's vector, nearest first, among those
    with a vector of the question's model at least MIN_SIMILARITY alike."""
    if not scope.memory_ids:
        return []
    if tx.dialect.name == "sqlite":
        return _nearest_on_sqlite(tx, scope, question, limit)
    return _nearest_on_postgresql(tx, scope, question, limit)


def _nearest_on_sqlite(
    tx: Tx, scope: search.Scope, question: Meaning, limit: int
) -> list[search.Hit]:
    where, params = search.scope_condition(scope)
    distance = "vec_distance_cosine(v.embedding, ?)"
    rows = tx.rows(
        f"SELECT r.id, r.version FROM memory_record r"
        " JOIN memory_record_vector v ON v.id = r.id AND v.version = r.version"
        f" WHERE {where} AND v.model = ? AND v.dimensions = ? AND {distance} <= ?"
        f" ORDER BY {distance}, r.written_at_ms DESC LIMIT ?",
        (
            *params,
            question.model,
            len(question.vector),
            extension.packed(question.vector),
            1.0 - MIN_SIMILARITY,
            extension.packed(question.vector),
            limit,
        ),
    )
    return [(str(row[0]), int(row[1])) for row in rows]


def _nearest_on_postgresql(
    tx: Tx, scope: search.Scope, question: Meaning, limit: int
) -> list[search.Hit]:
    if not extension.keepable_on_postgresql(question.vector):
        return []  # no version holds a vector of it (index_versions kept none)
    where, params = search.scope_condition(scope)
    # The CASE: PostgreSQL may test the conditions in any order, and `<=>` fails on vectors
    # of other dimensions, so it is computed only for those of the question's. OFFSET 0 keeps
    # the inner query whole, so each distance is computed once, not again for ORDER BY.
    rows = tx.rows(
        "SELECT id, version FROM ("
        "  SELECT r.id, r.version, r.written_at_ms,"
        "   CASE WHEN v.dimensions = ? THEN CAST(v.embedding AS vector) <=> CAST(? AS vector)"
        "   END AS distance"
        "  FROM memory_record r"
        "  JOIN memory_record_vector v ON v.id = r.id AND v.version = r.version"
        f"  WHERE {where} AND v.model = ? AND v.dimensions = ? OFFSET 0"
        ") near WHERE distance <= ? ORDER BY distance, written_at_ms DESC LIMIT ?",
        (
            len(question.vector),
            extension.pgvector_literal(question.vector),
            *params,
            question.model,
            len(question.vector),
            1.0 - MIN_SIMILARITY,
            limit,
        ),
    )
    return [(str(row[0]), int(row[1])) for row in rows]


def without_meaning(tx: Tx, scope: search.Scope, model: str) -> int:
    """How many versions of the scope have words but no vector of `model`: written while no
    embedder answered, before one was configured, or under another model."""
    if not scope.memory_ids:
        return 0
    where, params = search.scope_condition(scope)
    rows = tx.rows(
        f"SELECT count(*) FROM memory_record r WHERE {where}"
        " AND coalesce(r.search_text, '') <> ''"
        " AND NOT EXISTS (SELECT 1 FROM memory_record_vector v"
        "  WHERE v.id = r.id AND v.version = r.version AND v.model = ?)",
        (*params, model),
    )
    return int(rows[0][0])
