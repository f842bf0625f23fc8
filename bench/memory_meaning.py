"""Recall by meaning on the embedded provider (Memories §6.2 `query`): the exact ranking of a
scope's vectors, sqlite-vec on SQLite against pgvector on PostgreSQL.

`--memories` memories hold `--records` records in all, spread evenly, each version with a
random unit vector of `--dimensions` float32s (as an embedding model's, though without their
clusters: the cost of an exact ranking does not depend on where the vectors lie), kept by the
server's own code (storage/memory_vectors.py's `index_versions`). A question is what the
provider asks of the database for the `query` signal (uhp_server/memories/meaning.py's
StoredVectors): the scope's versions nearest to a vector, then how many versions of the scope
have none. Asked over a scope of one memory, of a tenth of them, and of 200 (recall's most
memories a question covers); prints p50 and p99 per scope and database, the vectors each
scope ranks, and the bytes on disk per vector. No target is set: the ranking is exact
(docs/memory-providers.md), so its time grows with the versions a question covers, and this
says how fast.

SQLite always; PostgreSQL where the local cluster of scripts/postgres.sh answers with pgvector
in its databases (else left out loudly). Its smoke run belongs to the PostgreSQL pass.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from storage import memories as store
from storage import memory_vectors
from storage.db import Database, Order
from storage.memory_search import Scope
from storage.memory_vectors import Meaning
from storage.tables import MemoryRecordRow
from uhp_server.engine.facade.memories import new_memory_rows
from uhp_server.memories.access import Caller
from uhp_server.memories.embedded import EMBEDDED, EmbeddedProvider
from uhp_server.memories.meaning import StoredVectors
from uhp_server.memories.provider import NewRecord
from uhp_server.memories.records import Writer

NEEDS = ("postgresql",)  # bench/_smoke.py: the test runs it where it is
OWNER = Caller("bench-owner")
MODEL = "bench-embedding"
BATCH = 500
LIMIT = 24  # recall's depth for `limit` 8: three times the results asked


def unit_vector(rng: random.Random, dimensions: int) -> list[float]:
    values = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


async def make_memories(db: Database, count: int) -> list[str]:
    ids = []
    for i in range(count):
        row, grant = new_memory_rows(OWNER, None, f"meaning-{i}", "Bench memory.", False, EMBEDDED)
        await db.write(store.insert_memory, row, grant, order=Order.ANY)
        ids.append(row.id)
    return ids


async def fill(db: Database, memory_ids: list[str], records: int, dimensions: int) -> float:
    """Records with their vectors per second, written in batches."""
    rng = random.Random(7)
    provider = EmbeddedProvider(db)  # no embedder: the vectors are given below
    writer = Writer("member", OWNER.member_id, "human")
    started = time.perf_counter()
    for start in range(0, records, BATCH):
        batch = [
            NewRecord(
                memory_id=memory_ids[i % len(memory_ids)],
                type="fact",
                title=None,
                content=[{"type": "text", "text": f"Record {i}."}],
                attributes={},
                references=[],
                valid_from=None,
                valid_to=None,
                written_by=writer,
            )
            for i in range(start, min(records, start + BATCH))
        ]
        kept = await provider.remember(batch)
        assert kept is not None
        rows = [
            MemoryRecordRow(
                id=v.id,
                version=v.version,
                memory_id=v.memory_id,
                type=v.record.type,
                status=v.status,
                written_at_ms=v.written_at_ms,
            )
            for v in kept
        ]
        meanings = [Meaning(MODEL, unit_vector(rng, dimensions)) for _ in rows]
        await db.write(memory_vectors.index_versions, rows, meanings, order=Order.ANY)
    return records / (time.perf_counter() - started)


async def measure(
    vectors: StoredVectors, memory_ids: list[str], dimensions: int, questions: int
) -> dict[str, list[float]]:
    """Milliseconds per question (nearest, then the count without a vector), by scope."""
    rng = random.Random(11)
    scopes = {
        "one memory": 1,
        "a tenth": max(1, len(memory_ids) // 10),
        "200 memories": min(200, len(memory_ids)),
    }
    timings: dict[str, list[float]] = {}
    for i in range(questions):
        label, size = list(scopes.items())[i % len(scopes)]
        start = rng.randrange(len(memory_ids) - size + 1)
        scope = Scope(memory_ids=tuple(memory_ids[start : start + size]))
        question = Meaning(MODEL, unit_vector(rng, dimensions))
        started = time.perf_counter()
        await vectors.nearest(question, scope, LIMIT)
        await vectors.without_meaning(scope, MODEL)
        timings.setdefault(label, []).append((time.perf_counter() - started) * 1000)
    return timings


def percentile(values: list[float], fraction: float) -> float:
    ordered_values = sorted(values)
    return ordered_values[min(len(ordered_values) - 1, int(fraction * len(ordered_values)))]


def vectors_on_disk(db: Database, database: str | Path) -> int:
    if isinstance(database, Path):
        rows = db.run(
            lambda tx: tx.rows(
                "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'memory_record_vector%'"
                " OR name = 'ix_memory_record_vector_memory'"
            )
        )
    else:
        rows = db.run(lambda tx: tx.rows("SELECT pg_total_relation_size('memory_record_vector')"))
    return int(rows[0][0] or 0)


async def on(database: str | Path, label: str, args: argparse.Namespace) -> None:
    db = Database(database)
    try:
        why_not = db.run(memory_vectors.searchable_by_meaning)
        if why_not is not None:
            raise SystemExit(f"{label}: cannot rank by meaning here: {why_not}")
        memory_ids = await make_memories(db, args.memories)
        rate = await fill(db, memory_ids, args.records, args.dimensions)
        vectors = StoredVectors(db)
        await measure(vectors, memory_ids, args.dimensions, max(3, args.questions // 10))
        timings = await measure(vectors, memory_ids, args.dimensions, args.questions)
        per_memory = args.records / args.memories
        print(
            f"{label}: {args.records} versions with {args.dimensions}-dimension vectors in "
            f"{args.memories} memories; written {rate:.0f}/s with their vectors; "
            f"{vectors_on_disk(db, database) / max(1, args.records):.0f} bytes on disk per vector"
        )
        sizes = {"one memory": 1, "a tenth": max(1, args.memories // 10)}
        sizes["200 memories"] = min(200, args.memories)
        for scope_label, part in timings.items():
            ranked = round(sizes[scope_label] * per_memory)
            print(
                f"{label}:   {scope_label:12} ({ranked} vectors ranked) "
                f"p50 {percentile(part, 0.5):.1f} ms, p99 {percentile(part, 0.99):.1f} ms "
                f"({len(part)} questions)"
            )
    finally:
        db.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--dimensions", type=int, default=768)
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--no-postgresql", action="store_true")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), memories=10, records=100, dimensions=8, questions=6)
    with tempfile.TemporaryDirectory(prefix="uhp-bench-meaning-") as scratch:
        await on(Path(scratch) / "bench.sqlite3", "sqlite", args)
    if not args.no_postgresql:
        with _smoke.postgresql_databases("the PostgreSQL run") as fresh_database:
            if fresh_database:
                await on(fresh_database("bench"), "postgresql", args)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
