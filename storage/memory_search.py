"""Recall's reads over record versions (Memories §6.2), for the embedded provider: by words
(full-text, one index per dialect) and by fields (`type`, `attributes.*`, `time.*`), each a
ranked list of (record id, version) within the memories a question covers.

The index (migration 0014): every version's `search_text` (its title, text parts and file
parts' `text`, `searchable`) is indexed, so a question asked `as_of` an instant finds the
versions held then. SQLite: an FTS5 table `memory_record_fts` whose rowid is the number of
the version in `memory_record_search` (a table's implicit rowid is not stable), both kept by
triggers on `memory_record`. PostgreSQL: a generated `tsvector` column `search` with a GIN
index. Both stem English (`porter` / `english`).

Nothing here decides who may read what: the memory ids are given, decided by the server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import col, select

from storage import memory_attributes as attribute_index
from storage.memory_attributes import Lookup
from storage.tables import MemoryRecordRow
from storage.unit import Tx

ACTIVE, SUPERSEDED, FORGOTTEN = "active", "superseded", "forgotten"
# What migration 0014 makes that no model declares (each dialect indexes in its own way):
# SQLite's tables (FTS5 makes `memory_record_fts_*` beside its own), PostgreSQL's column and
# index. A comparison of the schema with the models leaves them out.
INDEX_TABLE_PREFIXES = ("memory_record_fts", "memory_record_search")
INDEX_COLUMN = ("memory_record", "search")
INDEX_NAME = "ix_memory_record_search"
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_WORDS = 32  # of a question's text: the rest is not looked for
# Conditions joined by `or` looked up in the index of attributes together, at most: past
# that, the question reads every version of the memories it covers.
MAX_LOOKUPS = 8


def searchable(title: str | None, content: Sequence[Any]) -> str:
    """The words recall by text matches: the title, then each part's text in order (a file
    part's `text` stands for the file, §4.3)."""
    said = [title] if title else []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            said.append(part["text"])
    return "\n".join(said)


def memory_token(memory_id: str) -> str:
    """A memory's id as the SQLite index keeps it: one token (`_` and `-` would split it,
    and `hmem` alone is in every row), as migration 0014's triggers write it."""
    return memory_id.replace("_", "").replace("-", "")


def words(text: str) -> list[str]:
    return _WORD.findall(text)[:MAX_WORDS]


@dataclass(frozen=True)
class Condition:
    """One field compared with a value (storage's form of a recall filter). `field` is
    `type`, `attributes.<a>[.<b>…]`, `time.valid_from`, `time.valid_to` (text),
    `time.written_at` or `time.invalidated_at` (ms); op eq, ne, gt, gte, lt, lte, in."""

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class AllOf:
    conditions: tuple[Condition | AllOf | AnyOf, ...]


@dataclass(frozen=True)
class AnyOf:
    conditions: tuple[Condition | AllOf | AnyOf, ...]


Filter = Condition | AllOf | AnyOf


@dataclass(frozen=True)
class Scope:
    """Which versions a question reads: of these memories, current (active, or forgotten
    ones too) or held at `as_of` (ms), of these types."""

    memory_ids: tuple[str, ...]
    types: tuple[str, ...] | None = None
    as_of: int | None = None
    include_forgotten: bool = False


Hit = tuple[str, int]  # (record id, version)


def by_text(tx: Tx, scope: Scope, text: str, limit: int) -> list[Hit]:
    """The versions whose words match any word of `text`, best first."""
    terms = words(text)
    if not terms or not scope.memory_ids:
        return []
    if tx.dialect.name == "sqlite":
        return _sqlite_text(tx, scope, terms, limit)
    where, params = _scope(tx, scope)
    # plainto_tsquery stems and drops stop words; its & become | so any word matches, and
    # ts_rank_cd ranks the versions that hold more of them higher.
    query = "CAST(replace(CAST(plainto_tsquery('english', ?) AS text), '&', '|') AS tsquery)"
    rows = tx.rows(
        f"SELECT r.id, r.version FROM memory_record r, {query} q"
        f" WHERE r.search @@ q AND {where}"
        " ORDER BY ts_rank_cd(r.search, q) DESC, r.written_at_ms DESC LIMIT ?",
        (" ".join(terms), *params, limit),
    )
    return [(str(row[0]), int(row[1])) for row in rows]


def _sqlite_text(tx: Tx, scope: Scope, terms: list[str], limit: int) -> list[Hit]:
    """FTS5, narrowed inside the index to the memories covered (and, for the current
    records, to their status): only a question `as_of` an instant or of some `types` looks
    at memory_record for each match."""
    said = " OR ".join(_quoted(term) for term in terms)
    within = " OR ".join(_quoted(memory_token(m)) for m in scope.memory_ids)
    match = f"body : ({said}) AND memory : ({within})"
    rank = "bm25(memory_record_fts, 1.0, 0.0, 0.0)"
    if scope.as_of is None and scope.types is None:
        # The current versions as those that are not superseded (nor forgotten, unless
        # asked): the same rows as `status : active`, whose list holds nearly every row of
        # the index and would be walked for each question; these lists are short.
        left_out = SUPERSEDED if scope.include_forgotten else f"{SUPERSEDED} OR {FORGOTTEN}"
        # Ranked inside the index, then only the best looked up: joined first, every match
        # was (a common word's thousands, a fifth of the question's time).
        rows = tx.rows(
            "SELECT s.id, s.version FROM"
            f" (SELECT f.rowid AS n, {rank} AS score FROM memory_record_fts f"
            "  WHERE memory_record_fts MATCH ? ORDER BY score LIMIT ?) best"
            " JOIN memory_record_search s ON s.n = best.n ORDER BY best.score",
            (f"{match} NOT status : ({left_out})", limit),
        )
    else:
        where, params = _scope(tx, scope)
        rows = tx.rows(
            "SELECT s.id, s.version FROM memory_record_fts f"
            " JOIN memory_record_search s ON s.n = f.rowid"
            " JOIN memory_record r ON r.id = s.id AND r.version = s.version"
            f" WHERE memory_record_fts MATCH ? AND {where} ORDER BY {rank} LIMIT ?",
            (match, *params, limit),
        )
    return [(str(row[0]), int(row[1])) for row in rows]


def _quoted(term: str) -> str:
    return '"' + term.replace('"', "") + '"'


def by_fields(tx: Tx, scope: Scope, conditions: Sequence[Filter], limit: int) -> list[Hit]:
    """The versions for which every condition holds, the most recently written first. When
    a condition can be looked up in the index of attributes (memory_attributes.py), only
    the versions it finds are read; else every version of the memories covered."""
    if not scope.memory_ids:
        return []
    where, params = _scope(tx, scope)
    held, more = _all(tx, conditions)
    found = lookups(conditions)
    if found is not None:
        narrowing, among = attribute_index.narrowed(found, scope.memory_ids)
        where, params = f"{narrowing} AND {where}", [*among, *params]
    rows = tx.rows(
        f"SELECT r.id, r.version FROM memory_record r WHERE {where} AND {held}"
        " ORDER BY r.written_at_ms DESC, r.id LIMIT ?",
        (*params, *more, limit),
    )
    return [(str(row[0]), int(row[1])) for row in rows]


def lookups(conditions: Sequence[Filter]) -> list[Lookup] | None:
    """Lookups in the index of attributes that find every version for which all
    `conditions` hold (and maybe more: the conditions still decide); None when none can."""
    for condition in conditions:  # all must hold: one condition that narrows is enough
        found = _lookups_of(condition)
        if found is not None:
            return found
    return None


def _lookups_of(condition: Filter) -> list[Lookup] | None:
    if isinstance(condition, AllOf):
        return lookups(condition.conditions)
    if isinstance(condition, AnyOf):  # one holds: each must narrow, the versions all found
        together: list[Lookup] = []
        for member in condition.conditions:
            found = _lookups_of(member)
            if found is None:
                return None
            together += found
        return together if 0 < len(together) <= MAX_LOOKUPS else None
    path = condition.field.split(".")
    if len(path) != 2 or path[0] != "attributes":  # a top-level attribute only
        return None
    values = condition.value if condition.op == "in" else [condition.value]
    if condition.op not in ("eq", "in") or not values:
        return None
    if not all(attribute_index.indexable(path[1], value) for value in values):
        return None
    return [Lookup(path[1], tuple(values))]


def versions(tx: Tx, hits: Sequence[Hit]) -> dict[Hit, MemoryRecordRow]:
    """The rows of these versions."""
    found: dict[Hit, MemoryRecordRow] = {}
    ids = sorted({record_id for record_id, _ in hits})
    if not ids:
        return found
    wanted = set(hits)
    for row in tx.orm.exec(select(MemoryRecordRow).where(col(MemoryRecordRow.id).in_(ids))):
        if (row.id, row.version) in wanted:
            found[(row.id, row.version)] = row
    return found


# -- the SQL --------------------------------------------------------------------------------
def _scope(tx: Tx, scope: Scope) -> tuple[str, list[Any]]:
    return scope_condition(scope)


def scope_condition(scope: Scope) -> tuple[str, list[Any]]:
    """The SQL condition on `memory_record r` that holds for the versions a scope reads, and
    its parameters (storage/memory_vectors.py reads the same versions)."""
    marks = ", ".join("?" for _ in scope.memory_ids)
    where = [f"r.memory_id IN ({marks})"]
    params: list[Any] = list(scope.memory_ids)
    if scope.as_of is not None:
        where.append(
            "r.written_at_ms <= ? AND (r.invalidated_at_ms IS NULL OR r.invalidated_at_ms > ?)"
        )
        params += [scope.as_of, scope.as_of]
    elif scope.include_forgotten:
        where.append("r.status IN (?, ?)")
        params += [ACTIVE, FORGOTTEN]
    else:
        where.append("r.status = ?")
        params.append(ACTIVE)
    if scope.types is not None:
        where.append(
            f"r.type IN ({', '.join('?' for _ in scope.types)})" if scope.types else "1 = 0"
        )
        params += list(scope.types)
    return " AND ".join(where), params


def _all(tx: Tx, conditions: Sequence[Filter]) -> tuple[str, list[Any]]:
    return _joined(tx, conditions, " AND ", "1 = 1")


def _joined(tx: Tx, conditions: Sequence[Filter], joiner: str, empty: str) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    for condition in conditions:
        sql, more = _filter(tx, condition)
        parts.append(f"({sql})")
        params += more
    return (joiner.join(parts) if parts else empty), params


def _filter(tx: Tx, condition: Filter) -> tuple[str, list[Any]]:
    if isinstance(condition, AllOf):
        return _joined(tx, condition.conditions, " AND ", "1 = 1")
    if isinstance(condition, AnyOf):
        return _joined(tx, condition.conditions, " OR ", "1 = 0")
    if condition.op == "in":
        return _joined(
            tx,
            [Condition(condition.field, "eq", value) for value in condition.value],
            " OR ",
            "1 = 0",
        )
    return _compare(tx, condition)


_OPS = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_COLUMNS = {
    "type": "r.type",
    "time.valid_from": "r.valid_from",
    "time.valid_to": "r.valid_to",
    "time.written_at": "r.written_at_ms",
    "time.invalidated_at": "r.invalidated_at_ms",
}


def _compare(tx: Tx, condition: Condition) -> tuple[str, list[Any]]:
    op = _OPS[condition.op]
    value = condition.value
    if condition.field in _COLUMNS:
        column = _COLUMNS[condition.field]
        if value is None:
            return (f"{column} IS NULL" if op == "=" else f"{column} IS NOT NULL"), []
        return f"{column} {op} ?", [value]
    path = condition.field.split(".")[1:]  # attributes.<a>.<b>
    if tx.dialect.name == "sqlite":
        return _sqlite_attribute(path, op, value)
    return _postgres_attribute(path, op, value)


def _sqlite_attribute(path: list[str], op: str, value: Any) -> tuple[str, list[Any]]:
    at = "$" + "".join(f'."{key}"' for key in path)
    # Only where the stored attributes are valid JSON: SQLite's JSON functions fail the whole
    # statement on one malformed row (one kept before NaN was refused, say), which would
    # answer every recall covering it with an error. The CASE keeps them from reading it.
    kind = "CASE WHEN json_valid(r.attributes) THEN json_type(r.attributes, ?) END"
    if value is None or isinstance(value, bool):
        said = "null" if value is None else ("true" if value else "false")
        if op == "=":
            return f"{kind} = ?", [at, said]
        return f"{kind} IS NOT NULL AND {kind} <> ?", [at, at, said]
    kinds = "('text')" if isinstance(value, str) else "('integer', 'real')"
    extract = "CASE WHEN json_valid(r.attributes) THEN json_extract(r.attributes, ?) END"
    return f"{kind} IN {kinds} AND {extract} {op} ?", [at, at, value]


def _postgres_attribute(path: list[str], op: str, value: Any) -> tuple[str, list[Any]]:
    node = "(r.attributes #> CAST(? AS text[]))"
    kind = f"json_typeof{node}"
    if value is None or isinstance(value, bool):
        if value is None:
            return (
                (f"{kind} = 'null'", [path])
                if op == "="
                else (
                    f"{kind} IS NOT NULL AND {kind} <> 'null'",
                    [path, path],
                )
            )
        said = "true" if value else "false"
        text = "(r.attributes #>> CAST(? AS text[]))"
        if op == "=":
            return f"{kind} = 'boolean' AND {text} = ?", [path, path, said]
        return f"{kind} IS NOT NULL AND ({kind} <> 'boolean' OR {text} <> ?)", [
            path,
            path,
            path,
            said,
        ]
    text = "(r.attributes #>> CAST(? AS text[]))"
    if isinstance(value, str):
        return f"{kind} = 'string' AND {text} {op} ?", [path, path, value]
    # The cast only where the value is a number: CASE keeps it from reading any other.
    number = f"CASE WHEN {kind} = 'number' THEN CAST({text} AS double precision) END"
    return f"{kind} = 'number' AND {number} {op} ?", [path, path, path, float(value)]
