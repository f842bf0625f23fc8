"""The embedded provider's index of attributes (migration 0021), for recall by fields
(Memories §6.2 `filters`): each version's top-level attributes whose value is a string, one
row each (`memory_record_attribute`), written in the transaction that writes the version.

Without it, a question by fields read every version of every memory it covers and evaluated
its JSON: 20,000 versions for a question at the root of a large tree, most of the time of a
recall. With it, a condition `attributes.<name>` eq a string (or `in` strings) finds the
versions holding that value by an index, inside the memories covered, and only those are
read. It only narrows: every condition of the question is still evaluated on the versions
found, so a question finds exactly what reading every version would.

What is indexed and what a condition may look up are decided by one rule (`indexable`), so
the versions a lookup finds are always all those that can hold the value: a value that is
not indexed (a number, true, a string too long, a name no filter can spell) is never looked
up, and a question on it reads every version as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import col, delete

from storage.tables import MemoryAttributeRow, MemoryRecordRow
from storage.unit import Tx

# A name a filter can spell (memory_recall.py's `attributes.<name>`): a top-level one only.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# The longest string indexed, in characters: an index entry has a size limit (PostgreSQL's
# b-tree: about 2,700 bytes), and an attribute recall filters on is short (an id, a kind).
MAX_VALUE = 256


def indexable(name: object, value: object) -> bool:
    """Whether an attribute is kept in the index, and equally whether a condition on it may
    be looked up there."""
    if not isinstance(name, str) or not _NAME.match(name) or not isinstance(value, str):
        return False
    if len(value) > MAX_VALUE or "\x00" in value:  # no database text holds a NUL
        return False
    try:
        value.encode("utf-8")  # a lone surrogate (JSON's "\ud800") is kept only in the JSON
    except UnicodeEncodeError:
        return False
    return True


def rows_of(row: MemoryRecordRow) -> list[MemoryAttributeRow]:
    attributes = row.attributes if isinstance(row.attributes, dict) else {}
    return [
        MemoryAttributeRow(
            record_id=row.id, version=row.version, name=name, memory_id=row.memory_id, value=value
        )
        for name, value in attributes.items()
        if indexable(name, value)
    ]


def index_versions(tx: Tx, rows: Iterable[MemoryRecordRow]) -> None:
    for row in rows:
        for attribute in rows_of(row):
            tx.orm.add(attribute)


def unindex_records(tx: Tx, record_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryAttributeRow).where(col(MemoryAttributeRow.record_id).in_(record_ids)))


def unindex_memories(tx: Tx, memory_ids: list[str]) -> None:
    tx.orm.exec(delete(MemoryAttributeRow).where(col(MemoryAttributeRow.memory_id).in_(memory_ids)))


@dataclass(frozen=True)
class Lookup:
    """Versions whose attribute `name` is one of `values` (strings)."""

    name: str
    values: tuple[str, ...]


def narrowed(found: list[Lookup], memory_ids: Sequence[str]) -> tuple[str, list[Any]]:
    """The SQL condition on `memory_record r` that keeps the versions the lookups find in
    these memories, and its parameters."""
    within = ", ".join("?" for _ in memory_ids)
    selects: list[str] = []
    params: list[Any] = []
    for lookup in found:
        values = ", ".join("?" for _ in lookup.values)
        selects.append(
            "SELECT a.record_id, a.version FROM memory_record_attribute a"
            f" WHERE a.name = ? AND a.value IN ({values}) AND a.memory_id IN ({within})"
        )
        params += [lookup.name, *lookup.values, *memory_ids]
    return f"(r.id, r.version) IN ({' UNION ALL '.join(selects)})", params
