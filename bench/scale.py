"""Short-task throughput on PostgreSQL ÷ SQLite, and of two replicas ÷ one behind haproxy, and
the delay of an event to a client of the other replica, side by side in one run.

The whole server in process (tests/support/in_process.py: the real app, engine, event log
and storage; a FakeBase whose turns answer at once and a FakeSandbox), so what differs
between the two columns is the database: every task is a submit transaction, its events
(group-committed), its final row and the session release. Rounds alternate between the two
databases so that a busy machine slows both alike. Issue 13's target: PostgreSQL at least 0.9 x
SQLite. Needs the local cluster and role of scripts/postgres.sh.

Then real replicas behind haproxy (bench/_scale_replicas.py: the real server processes and
Codex CLI; scripts/haproxy.sh installs haproxy): short-task throughput with two replicas ÷ one
(report it: what it can reach depends on the cores), and the p99 time from an event's append on
one replica to a client of the other (target < 50 ms).

Usage:

    python bench/scale.py [--tasks N] [--concurrency C] [--rounds R] [--threads]
        [--replica-tasks N] [--replica-concurrency C] [--streams S] [--no-replicas] [--smoke]

`--threads` adds a third column: PostgreSQL with every statement sent from threads through
psycopg, none from the event loop through asyncpg (storage/loop_link.py): its URL carries
`channel_binding=prefer`, libpq's default, which asyncpg cannot honour, so the server keeps
its threads for it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _scale_replicas, _smoke
from tests.conftest import MODELS, PROVIDER_KEY
from tests.scripted_provider import start_provider
from tests.support.fakes import answer
from tests.support.in_process import in_process
from tests.support.postgres import Databases

NEEDS = ("postgresql", "haproxy")  # bench/_smoke.py: the test runs it where they are
THREADS = "postgresql-threads"  # --threads: PostgreSQL without the loop's link


async def one_round(database: str, data_dir: Path, url: str, tasks: int, concurrency: int) -> float:
    """Tasks per second: `tasks` short tasks, `concurrency` at a time."""
    async with in_process(data_dir, url, PROVIDER_KEY, database_url=database) as server:
        server.base.script("short", answer("done"))
        warm = await server.submit("short")
        assert warm.status_code == 200, warm.text
        gate = asyncio.Semaphore(concurrency)

        async def task() -> None:
            async with gate:
                done = await server.submit("short")
                assert done.status_code == 200 and done.json()["status"] == "completed"

        started = time.perf_counter()
        await asyncio.gather(*(task() for _ in range(tasks)))
        return tasks / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replica-tasks", type=int, default=40)
    parser.add_argument("--replica-concurrency", type=int, default=8)
    parser.add_argument("--streams", type=int, default=5, help="streamed tasks per delay round")
    parser.add_argument("--no-replicas", action="store_true", help="the in-process half only")
    parser.add_argument(
        "--threads", action="store_true", help="also PostgreSQL without the loop's link"
    )
    _smoke.add_flag(parser)
    args = _smoke.shrink(
        parser.parse_args(),
        tasks=4,
        concurrency=2,
        rounds=1,
        replica_tasks=2,
        replica_concurrency=2,
        streams=1,
        threads=True,
    )
    why = _smoke.postgresql_absent()
    if why:
        _smoke.left_out(_smoke.POSTGRESQL, "the whole bench: it measures PostgreSQL", why)
        raise SystemExit(0 if args.smoke else 2)
    why = "" if args.no_replicas else _smoke.haproxy_absent()
    if why:
        _smoke.left_out(_smoke.HAPROXY, "the replicas half", why)
        args.no_replicas = True
    provider = start_provider(PROVIDER_KEY, MODELS)
    databases = Databases()
    rates: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
    if args.threads:
        rates[THREADS] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(args.rounds):
                # Which database goes first alternates, so neither always follows the other's
                # leftovers (its garbage, its files in the page cache).
                for kind in list(rates)[:: 1 if n % 2 == 0 else -1]:
                    data_dir = Path(tmp) / f"{kind}-{n}"
                    if kind == "sqlite":
                        database = f"sqlite:///{data_dir / 'uhp.sqlite3'}"
                    else:
                        database = databases.url_for(data_dir)
                    if kind == THREADS:
                        database += "?channel_binding=prefer"
                    rate = await one_round(
                        database, data_dir, provider.base_url, args.tasks, args.concurrency
                    )
                    rates[kind].append(rate)
                    print(f"round {n + 1} {kind:18} {rate:7.1f} tasks/s", flush=True)
        replicas = (
            ""
            if args.no_replicas
            else await asyncio.to_thread(
                _scale_replicas.run,
                provider,
                args.replica_tasks,
                args.replica_concurrency,
                args.rounds,
                args.streams,
            )
        )
    finally:
        databases.drop_all()
        provider.stop()
    sqlite, postgres = (statistics.median(rates[k]) for k in ("sqlite", "postgresql"))
    # Each round's two figures ran back to back: their ratio is spared the machine's slower
    # drifts, which the ratio of the medians is not. Both are printed.
    paired = statistics.median(
        p / s for s, p in zip(rates["sqlite"], rates["postgresql"], strict=True)
    )
    print(
        f"median in process: sqlite {sqlite:.1f} tasks/s, postgresql {postgres:.1f} tasks/s; "
        f"postgresql ÷ sqlite = {postgres / sqlite:.2f}, median of the rounds' ratios "
        f"{paired:.2f} (target ≥ 0.9)"
    )
    if args.threads:
        threads = statistics.median(rates[THREADS])
        paired = statistics.median(
            t / s for s, t in zip(rates["sqlite"], rates[THREADS], strict=True)
        )
        print(
            f"median in process: {THREADS} {threads:.1f} tasks/s; {THREADS} ÷ sqlite = "
            f"{threads / sqlite:.2f}, median of the rounds' ratios {paired:.2f}"
        )
    if replicas:
        print(replicas)


if __name__ == "__main__":
    asyncio.run(main())
