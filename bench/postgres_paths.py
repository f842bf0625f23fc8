"""Does PostgreSQL's second path matter once turns are real? Real `uhp-server serve`
processes running the real Codex CLI in the local sandbox against the scripted model, side by
side in one run:

- postgresql: PostgreSQL with its hot statements (a task's acceptance, the default harnesses'
  read, the event log's commits) sent from the event loop through asyncpg
  (storage/loop_link.py), as a server binds it;
- postgresql-threads: the same on a database whose URL carries `channel_binding=prefer`
  (libpq's default, which asyncpg cannot honour): every statement goes through psycopg on
  threads;
- sqlite: for reference.

Each server gets a fresh database; rounds alternate between them (the order reversed every
other round), so a busy machine slows each alike. A round measures, per server: streamed
`SAY hello world` turns one after another (milliseconds to `response.created` and to the
terminal event), then short blocking tasks `--concurrency` at a time (tasks per second).
bench/scale.py measures the same question on turns that answer at once (no CLI). Needs the
local cluster and role of scripts/postgres.sh.

Usage:

    python bench/postgres_paths.py [--rounds R] [--turns N] [--tasks N] [--concurrency C]
        [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

# tests/ is not an installed package: the bench borrows the test suite's helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import _smoke
from bench._runs import sse_events
from bench.overhead import wait_children_gone
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, installed_tools, server_env
from tests.scripted_provider import start_provider
from tests.support.postgres import Databases
from tests.support.server import ServerProcess

NEEDS = ("postgresql",)  # bench/_smoke.py: the test runs it where it is
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
KINDS = ("postgresql", "postgresql-threads", "sqlite")
TIMEOUT = 300.0


def streamed_turn(client: httpx.Client) -> tuple[float, float]:
    """Milliseconds from the request to `response.created`, and to the terminal event."""
    started = time.perf_counter()
    created = None
    body = {"input": "SAY hello world", "stream": True}
    with client.stream("POST", "/v1/responses", json=body) as response:
        assert response.status_code == 200, response.read()
        for event in sse_events(response.iter_lines()):
            if event["type"] == "response.created":
                created = time.perf_counter() - started
            elif event["type"] in ("response.completed", "response.failed"):
                assert event["type"] == "response.completed", event
                break
    assert created is not None
    return created * 1000, (time.perf_counter() - started) * 1000


def throughput(client: httpx.Client, tasks: int, concurrency: int) -> float:
    """Tasks per second: `tasks` short blocking tasks, `concurrency` at a time."""

    def one(_: int) -> None:
        answer = client.post("/v1/responses", json={"input": "SAY done"})
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(tasks)))
    return tasks / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5, help="streamed turns a round")
    parser.add_argument("--tasks", type=int, default=24, help="blocking tasks a round")
    parser.add_argument("--concurrency", type=int, default=6)
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), rounds=1, turns=1, tasks=2, concurrency=2)
    why = _smoke.postgresql_absent()
    if why:
        _smoke.left_out(_smoke.POSTGRESQL, "the whole bench: it measures PostgreSQL", why)
        return 0 if args.smoke else 2
    installed_tools("codex")
    created: dict[str, list[float]] = {kind: [] for kind in KINDS}
    total: dict[str, list[float]] = {kind: [] for kind in KINDS}
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cache = Path.home() / ".cache" / "uhp-server"  # not /tmp: as in bench/overhead.py
    cache.mkdir(parents=True, exist_ok=True)
    databases = Databases()
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=cache)))
        stack.callback(databases.drop_all)
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        servers: dict[str, ServerProcess] = {}
        for kind in KINDS:
            data_dir = scratch / kind
            env = server_env(provider, UHP_BASES="codex", UHP_SANDBOX="local")
            if kind != "sqlite":
                url = databases.url_for(data_dir)
                binding = "?channel_binding=prefer" if kind == "postgresql-threads" else ""
                env["UHP_DATABASE_URL"] = url + binding
            server = ServerProcess(data_dir, env)
            stack.callback(server.stop)
            servers[kind] = server.start()
        clients = {
            kind: stack.enter_context(
                httpx.Client(base_url=server.url, headers=HEADERS, timeout=TIMEOUT)
            )
            for kind, server in servers.items()
        }
        for kind, client in clients.items() if not args.smoke else ():  # warm: the CLI's
            streamed_turn(client)  # first start reads its files
            wait_children_gone(servers[kind].pid)
        for n in range(args.rounds):
            for kind in KINDS if n % 2 == 0 else KINDS[::-1]:
                client, pid = clients[kind], servers[kind].pid
                for _ in range(args.turns):
                    first, last = streamed_turn(client)
                    created[kind].append(first)
                    total[kind].append(last)
                    wait_children_gone(pid)
                rates[kind].append(throughput(client, args.tasks, args.concurrency))
                wait_children_gone(pid)
                print(
                    f"round {n + 1} {kind:19}"
                    f" created {statistics.median(created[kind][-args.turns :]):6.1f} ms"
                    f"  turn {statistics.median(total[kind][-args.turns :]):7.1f} ms"
                    f"  {rates[kind][-1]:5.2f} tasks/s",
                    flush=True,
                )
        # (the server logs a warning when its URL keeps the statements on threads)
        on_threads = {kind: "stay on threads" in server.log() for kind, server in servers.items()}
    summary = {
        kind: {
            "created_ms": round(statistics.median(created[kind]), 1),
            "turn_ms": round(statistics.median(total[kind]), 1),
            "tasks_per_s": round(statistics.median(rates[kind]), 2),
        }
        for kind in KINDS
    }
    print(json.dumps(summary))
    loop, threads = summary["postgresql"], summary["postgresql-threads"]
    print(
        f"medians over {args.rounds} rounds: postgresql ÷ postgresql-threads: created "
        f"{loop['created_ms'] / threads['created_ms']:.2f}, turn "
        f"{loop['turn_ms'] / threads['turn_ms']:.2f}, tasks/s "
        f"{loop['tasks_per_s'] / threads['tasks_per_s']:.2f} (on threads, by the servers' logs: "
        f"{on_threads})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
