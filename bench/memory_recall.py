"""Recall over a large subtree on the embedded provider (Memories §6), with grants checked.

A tree of `--memories` memories (a root, branches, leaves) holding `--records` records in
all, of synthetic words and attributes; a second principal is granted `read` on the root and
a restricted branch is cut off from it, with one leaf inside granted again, so questions
decide access across a cutoff. Questions are asked through the facade
(`Memories.recall`, what the route calls: the tree and the caller's grants read, access
decided, the provider asked, references resolved) as that principal, at the root (capped at
200 memories, said in `degraded`), at a branch and at a leaf, by words, by fields, and by
both. Prints p50 and p99 per database (and, as `access`, the part that decides what each
question covers, timed on its own), against the targets p50 < 20 ms and p99 < 100 ms;
the write throughput (records through the facade one at a time, and in batches through the
provider), and the bytes on disk per record (the database file on SQLite, the tables and
indexes on PostgreSQL).

SQLite always; PostgreSQL where the local cluster of scripts/postgres.sh answers (else left
out loudly). Its smoke run belongs to the PostgreSQL pass, where both are measured.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from storage import memories as store
from storage.db import Database, Order
from storage.tables import MemoryGrantRow, MemoryRow
from uhp_server.engine.facade.memories import Memories, new_memory_rows
from uhp_server.engine.facade.memory_recall import scope
from uhp_server.engine.facade.memory_replays import Replays
from uhp_server.ids import new_id
from uhp_server.memories.access import READ, Caller
from uhp_server.memories.embedded import EMBEDDED, EmbeddedProvider
from uhp_server.memories.provider import NewRecord
from uhp_server.memories.records import Writer

NEEDS = ("postgresql",)  # bench/_smoke.py: the test runs it where it is
P50_TARGET_MS, P99_TARGET_MS = 20.0, 100.0
OWNER, READER = Caller("bench-owner"), Caller("bench-reader")
VOCABULARY = 5000  # distinct words; a record holds 12 of them
ACCOUNTS = 200
BATCH = 500


@dataclass
class Tree:
    root: str
    branches: list[str]  # the last one restricted: cut off from the root's grants
    leaves: list[str]
    readable_leaves: list[str]  # the reader's: outside the cut-off branch, and one inside

    @property
    def all(self) -> list[str]:
        return [self.root, *self.branches, *self.leaves]


# Zipf's law over the vocabulary (s = 1), as words are in text: the commonest is in about
# one word in nine, so it is in most records, as "the" is.
_WEIGHTS = [1 / rank for rank in range(1, VOCABULARY + 1)]
_CUMULATIVE = list(itertools.accumulate(_WEIGHTS))


def _word(rng: random.Random) -> str:
    return f"w{rng.choices(range(VOCABULARY), cum_weights=_CUMULATIVE)[0]}"


async def build_tree(db: Database, memories: int) -> Tree:
    now = store.now_ms()
    branches_n = max(2, round((memories - 1) ** 0.5 / 3))
    leaves_n = memories - 1 - branches_n
    rows: list[tuple[MemoryRow, MemoryGrantRow]] = []

    def memory(parent: str | None, name: str, restricted: bool = False) -> str:
        description = f"Bench memory {name}."
        row, grant = new_memory_rows(OWNER, parent, name, description, restricted, EMBEDDED)
        rows.append((row, grant))
        return row.id

    root = memory(None, "root")
    # The last branch is cut off from the root's grants.
    branches = [
        memory(root, f"branch-{i}", restricted=i == branches_n - 1) for i in range(branches_n)
    ]
    leaves = [memory(branches[i % branches_n], f"leaf-{i}") for i in range(leaves_n)]
    for row, grant in rows:
        await db.write(store.insert_memory, row, grant, order=Order.ANY)
    for memory_id in (root, leaves[branches_n - 1]):  # the root, and a leaf behind the cutoff
        reader = MemoryGrantRow(
            id=new_id("memory_grant"),
            memory_id=memory_id,
            principal=READER.principal,
            privileges=["read"],
            created_at_ms=now,
        )
        await db.write(store.put_grant, reader, "bench", order=Order.ANY)
    cut_off = branches_n - 1
    readable = [leaf for i, leaf in enumerate(leaves) if i % branches_n != cut_off]
    return Tree(root, branches, leaves, [*readable, leaves[cut_off]])


def _record(rng: random.Random, memory_id: str) -> NewRecord:
    words = " ".join(_word(rng) for _ in range(12))
    return NewRecord(
        memory_id=memory_id,
        type=rng.choice(("fact", "fact", "note", "episode")),
        title=None,
        content=[{"type": "text", "text": f"Record about {words}."}],
        attributes={"account": f"acct-{rng.randrange(ACCOUNTS)}", "seats": rng.randrange(500)},
        references=[],
        valid_from=None,
        valid_to=None,
        written_by=Writer("member", OWNER.member_id, "human"),
    )


async def fill(
    memories: Memories, provider: EmbeddedProvider, tree: Tree, records: int, through: int
) -> tuple[float, float]:
    """Records per second: `through` remembered one at a time through the facade (access
    checked), the rest in batches through the provider."""
    rng = random.Random(7)
    places = tree.all
    started = time.perf_counter()
    for i in range(through):
        record = _record(rng, places[i % len(places)])
        body = {"type": record.type, "content": record.content, "attributes": record.attributes}
        await memories.remember(OWNER, record.memory_id, body)
    facade_rate = through / (time.perf_counter() - started) if through else 0.0
    rest = records - through
    started = time.perf_counter()
    done = 0
    while done < rest:
        size = min(BATCH, rest - done)
        # Each batch spread over the memories, as the facade's writes are: every memory
        # holds records / memories of them.
        batch = [_record(rng, places[(through + done + i) % len(places)]) for i in range(size)]
        await provider.remember(batch)
        done += size
    bulk_rate = rest / (time.perf_counter() - started) if rest else 0.0
    return facade_rate, bulk_rate


def questions(rng: random.Random, tree: Tree, count: int) -> list[tuple[str, str, dict]]:
    asked: list[tuple[str, str, dict]] = []
    for i in range(count):
        where = (tree.root, rng.choice(tree.branches[:-1]), rng.choice(tree.readable_leaves))[i % 3]
        kind = ("text", "filters", "both")[(i // 3) % 3]
        account = {
            "field": "attributes.account",
            "op": "eq",
            "value": f"acct-{rng.randrange(ACCOUNTS)}",
        }
        body: dict = {"limit": 8}
        if kind in ("text", "both"):
            body["text"] = f"{_word(rng)} {_word(rng)}"
        if kind in ("filters", "both"):
            body["filters"] = account
        asked.append((where, kind, body))
    return asked


async def measure(
    memories: Memories, tree: Tree, count: int
) -> tuple[dict[str, list[float]], set[str]]:
    """Milliseconds per question, by kind (text, filters, both) and by where it was asked
    (root, branch, leaf), and all together."""
    rng = random.Random(11)
    timings: dict[str, list[float]] = {}
    degraded: set[str] = set()
    for where, kind, body in questions(rng, tree, count):
        started = time.perf_counter()
        result = await memories.recall(READER, where, body)
        took = (time.perf_counter() - started) * 1000
        place = "root" if where == tree.root else "branch" if where in tree.branches else "leaf"
        for key in ("all", kind, place):
            timings.setdefault(key, []).append(took)
        timings.setdefault("access", []).append(await access_alone(memories, where))
        degraded.update(result.degraded)
    return timings, degraded


async def access_alone(memories: Memories, where: str) -> float:
    """Milliseconds to decide what a question at `where` covers, as recall does (the memory
    and its ancestors, the nearest memories below, the reader's grants on them), without
    asking the provider: the part of a question issue 29 is about."""
    started = time.perf_counter()
    seen = await memories._requiring(READER, where, READ)
    await scope(seen, where, None)
    await seen.expand([where])
    return (time.perf_counter() - started) * 1000


def percentile(values: list[float], fraction: float) -> float:
    ordered_values = sorted(values)
    return ordered_values[min(len(ordered_values) - 1, int(fraction * len(ordered_values)))]


async def on(database: str | Path, label: str, args: argparse.Namespace) -> bool:
    db = Database(database)
    try:
        provider = EmbeddedProvider(db)
        memories = Memories(db, {EMBEDDED: provider}, EMBEDDED, Replays(db, 3600))
        tree = await build_tree(db, args.memories)
        facade_rate, bulk_rate = await fill(memories, provider, tree, args.records, args.through)
        await measure(memories, tree, max(3, args.questions // 10))  # warm
        timings, degraded = await measure(memories, tree, args.questions)
        size = on_disk(db, database)
        every = timings["all"]
        p50, p99 = percentile(every, 0.50), percentile(every, 0.99)
        met = p50 < P50_TARGET_MS and p99 < P99_TARGET_MS
        print(
            f"{label}: {len(tree.all)} memories, {args.records} records; recall as a reader "
            f"granted the root and a leaf behind a cutoff, {len(every)} questions: "
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, mean {statistics.mean(every):.1f} ms "
            f"(targets p50 < {P50_TARGET_MS:.0f}, p99 < {P99_TARGET_MS:.0f}: "
            f"{'met' if met else 'NOT met'}); degraded said: {sorted(degraded) or 'nothing'}"
        )
        for key in ("text", "filters", "both", "root", "branch", "leaf", "access"):
            part = timings.get(key, [])
            if part:
                print(
                    f"{label}:   {key:8} p50 {percentile(part, 0.5):.1f} ms, "
                    f"p99 {percentile(part, 0.99):.1f} ms ({len(part)})"
                )
        print(
            f"{label}: writes {facade_rate:.0f} records/s through the facade (one at a time, "
            f"{args.through}), {bulk_rate:.0f} records/s in batches of {BATCH} through the "
            f"provider; {size / max(1, args.records):.0f} bytes on disk per record"
        )
        return met
    finally:
        db.close()


def on_disk(db: Database, database: str | Path) -> int:
    if isinstance(database, Path):
        db.run(lambda tx: tx.rows("PRAGMA wal_checkpoint(TRUNCATE)"))
        return sum(
            p.stat().st_size for p in database.parent.glob(database.name + "*") if p.is_file()
        )
    rows = db.run(
        lambda tx: tx.rows(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
            " WHERE c.relname IN ('memory_record', 'memory_record_attribute', 'memory',"
            " 'memory_grant')"
        )
    )
    return int(rows[0][0] or 0)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--through", type=int, default=1000, help="records via the facade")
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--no-postgresql", action="store_true")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), memories=12, records=300, through=20, questions=9)
    met = []
    with tempfile.TemporaryDirectory(prefix="uhp-bench-recall-") as scratch:
        met.append(await on(Path(scratch) / "bench.sqlite3", "sqlite", args))
    if not args.no_postgresql:
        with _smoke.postgresql_databases("the PostgreSQL run") as fresh_database:
            if fresh_database:
                met.append(await on(fresh_database("bench"), "postgresql", args))
    if not args.smoke and not all(met):
        print("a target was not met", file=sys.stderr)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
