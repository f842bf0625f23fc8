"""One tenant's memories never slow another's (issue 29): tenant B's requests with tenant A
holding nothing, side by side with the same requests while A holds `--memories` memories.

Two databases are built alike: in each, B owns a small tree (a root, `--b-memories` below
it, records in each) and grants nothing to anyone; in the second, A also owns a tree of
`--memories` memories (a root, branches, leaves, each with A's owner grant, written in bulk
as the server's own inserts would leave them), and both are then vacuumed and analyzed (a
server's steady state). Then rounds alternate between the two (so a
machine's drift hits both alike), each round asking as B, through the facade as the routes
do (its tree and grants read, access decided, the provider asked): get its root, list where
it enters, list the root's children, recall at the root by words, remember a record, list
the root's grants. Prints each request's median alone and with A, and the ratio; the target
is about 1.0 (at most 1.2 here: the two databases differ in size on disk and in cache).

SQLite always; PostgreSQL where the local cluster of scripts/postgres.sh answers (else left
out loudly).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from sqlalchemy.engine import make_url

from bench import _smoke
from storage import memories as store
from storage.db import Database
from storage.unit import Tx
from uhp_server.engine.facade.memories import Memories
from uhp_server.engine.facade.memory_replays import Replays
from uhp_server.ids import new_id
from uhp_server.memories.access import ALL, Caller, ordered
from uhp_server.memories.embedded import EMBEDDED, EmbeddedProvider

NEEDS = ("postgresql",)  # bench/_smoke.py: the test runs it where it is (SQLite and PostgreSQL)
TARGET_RATIO = 1.2
TENANT_A, TENANT_B = Caller("tenant-a"), Caller("tenant-b")
INSERT_BATCH = 5000


async def tenant_b(memories: Memories, below: int, records: int) -> str:
    """B's tree, made through the facade as B's requests would: its root's id."""
    root = await memories.create(TENANT_B, {"name": "B's root"})
    places = [root.id]
    for i in range(below):
        kid = await memories.create(TENANT_B, {"name": f"B {i}", "parent_id": root.id})
        places.append(kid.id)
    for i in range(records):
        body = {"content": f"Ledger entry {i} about invoices and the quarterly close."}
        await memories.remember(TENANT_B, places[i % len(places)], body)
    return root.id


def tenant_a(db: Database, count: int) -> None:
    """A's tree of `count` memories, in bulk: one root, about √count branches, the rest
    leaves; each with A's owner grant, as the facade's create leaves it."""
    branches = max(1, round(count**0.5))
    now = store.now_ms()
    root = new_id("memory")
    nodes: list[tuple[str, str | None]] = [(root, None)]
    branch_ids = [new_id("memory") for _ in range(min(branches, count - 1))]
    nodes += [(b, root) for b in branch_ids]
    for i in range(count - len(nodes)):
        nodes.append((new_id("memory"), branch_ids[i % len(branch_ids)]))
    for start in range(0, len(nodes), INSERT_BATCH):
        chunk = nodes[start : start + INSERT_BATCH]
        db.run(_insert_memories, chunk, now)


def _insert_memories(tx: Tx, nodes: list[tuple[str, str | None]], now: int) -> None:
    tx.executemany(
        "INSERT INTO memory (id, parent_id, name, description, restricted, provider, owner_id,"
        " created_at_ms, updated_at_ms) VALUES (?, ?, ?, '', ?, ?, ?, ?, ?)",
        [
            (node, parent, f"A {i}", False, EMBEDDED, TENANT_A.member_id, now, now)
            for i, (node, parent) in enumerate(nodes)
        ],
    )
    privileges = "[" + ", ".join(f'"{p}"' for p in ordered(ALL)) + "]"
    tx.executemany(
        "INSERT INTO memory_grant (id, memory_id, principal, privileges, created_at_ms)"
        " VALUES (?, ?, ?, ?, ?)",
        [(new_id("memory_grant"), node, TENANT_A.principal, privileges, now) for node, _ in nodes],
    )


def settle(database: str | Path) -> None:
    """Both databases vacuumed and analyzed, as a server's are in its steady state, so that
    maintenance of the bulk insert (PostgreSQL's autovacuum) does not fall inside the
    measured rounds of one side only."""
    if isinstance(database, Path):
        with sqlite3.connect(database) as connection:
            connection.execute("ANALYZE")
        return
    url = make_url(database).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE memory, memory_grant, memory_record")


Request = Callable[[], Awaitable[Any]]


def requests(memories: Memories, root: str) -> dict[str, Request]:
    """What B asks, each round."""
    return {
        "get": lambda: memories.get(TENANT_B, root),
        "list entries": lambda: memories.listing(TENANT_B),
        "list children": lambda: memories.listing(TENANT_B, parent=root),
        "recall": lambda: memories.recall(TENANT_B, root, {"text": "invoices", "limit": 8}),
        "remember": lambda: memories.remember(
            TENANT_B, root, {"content": "Another ledger entry about invoices."}
        ),
        "grants": lambda: memories.grants(TENANT_B, root),
    }


async def timed(request: Request) -> float:
    started = time.perf_counter()
    await request()
    return (time.perf_counter() - started) * 1000


async def on(
    alone_db: str | Path, with_db: str | Path, label: str, args: argparse.Namespace
) -> bool:
    alone, crowded = Database(alone_db), Database(with_db)
    try:
        facades = [
            Memories(db, {EMBEDDED: EmbeddedProvider(db)}, EMBEDDED, Replays(db, 3600))
            for db in (alone, crowded)
        ]
        roots = [await tenant_b(m, args.b_memories, args.b_records) for m in facades]
        started = time.perf_counter()
        tenant_a(crowded, args.memories)
        for database in (alone_db, with_db):
            settle(database)
        print(
            f"{label}: tenant A's {args.memories} memories written in "
            f"{time.perf_counter() - started:.1f} s"
        )
        asked = [requests(m, root) for m, root in zip(facades, roots, strict=True)]
        times: list[dict[str, list[float]]] = [{}, {}]
        for round_ in range(args.rounds + 1):  # the first round warms both, and is not kept
            for side in (0, 1) if round_ % 2 == 0 else (1, 0):
                for name, request in asked[side].items():
                    took = await timed(request)
                    if round_:
                        times[side].setdefault(name, []).append(took)
        ratios = []
        for name in asked[0]:
            a, b = statistics.median(times[0][name]), statistics.median(times[1][name])
            ratios.append(b / a)
            print(f"{label}:   {name:14} alone {a:7.2f} ms, with A {b:7.2f} ms, ratio {b / a:.2f}")
        every = [sum(step) for step in zip(*times[0].values(), strict=True)]
        crowded_every = [sum(step) for step in zip(*times[1].values(), strict=True)]
        ratio = statistics.median(crowded_every) / statistics.median(every)
        met = ratio <= TARGET_RATIO
        print(
            f"{label}: B's round of {len(asked[0])} requests, {args.rounds} rounds: alone "
            f"{statistics.median(every):.1f} ms, with A's {args.memories} memories "
            f"{statistics.median(crowded_every):.1f} ms: ratio {ratio:.2f} "
            f"(target ≤ {TARGET_RATIO}: {'met' if met else 'NOT met'}; worst request "
            f"{max(ratios):.2f})"
        )
        return met
    finally:
        alone.close()
        crowded.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=175_000, help="tenant A's memories")
    parser.add_argument("--b-memories", type=int, default=20, help="below tenant B's root")
    parser.add_argument("--b-records", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--no-postgresql", action="store_true")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), memories=50, b_memories=2, b_records=6, rounds=2)
    met = []
    with tempfile.TemporaryDirectory(prefix="uhp-bench-isolation-") as scratch:
        met.append(
            await on(
                Path(scratch) / "alone.sqlite3", Path(scratch) / "with.sqlite3", "sqlite", args
            )
        )
    if not args.no_postgresql:
        with _smoke.postgresql_databases("the PostgreSQL run") as fresh_database:
            if fresh_database:
                alone, with_a = fresh_database("alone"), fresh_database("with")
                met.append(await on(alone, with_a, "postgresql", args))
    if not args.smoke and not all(met):
        print("a target was not met", file=sys.stderr)
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
