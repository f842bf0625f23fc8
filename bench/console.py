"""The owner's console under load: a session page with 1,000 turns, the sessions list over
10,000 sessions, and the live stream's delay behind the API's SSE for the same events.

A real `uhp-server serve` (one base, the local sandbox, the in-process scripted provider) over
a database seeded before it starts: one principal with `--sessions` finished sessions, one of
them holding `--turns` finished turns (each a prompt, reasoning, a tool call with its output
and a Markdown answer, as a coding agent's turn looks). Measured, side by side with targets:

- the session page: server time (the request's round trip on localhost, cold and warm),
  and its first render in Debian's Chromium (first contentful paint, Playwright);
- the sessions list: server time per page, the first page, pages deep in the list (by the
  "Older sessions" cursor), and filtered by status and by title text;
- the live stream: real turns whose answers stream (SLOW), read at once through
  `GET /v1/responses/{id}?stream=true` and the console's `/console/sessions/{id}/live`;
  for each console message, its arrival minus the API's arrival of the event it covers.

    python bench/console.py [--turns N] [--sessions N] [--rounds N] [--streams N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _smoke
from storage import keys
from storage import responses as response_store
from storage import sessions as session_store
from storage.tables import ResponseRow, SessionRow
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, installed_tools, server_env
from tests.scripted_provider import start_provider
from tests.support.console import console_client
from tests.support.server import ServerProcess

PAGE_TARGET_MS = 100.0
RENDER_TARGET_MS = 1000.0
LIST_TARGET_MS = 100.0
DELAY_TARGET_MS = 50.0
T0 = 1_780_000_000  # the seeded sessions' clock (seconds)
# The first contentful paint, once two frames have passed (headless Chromium may paint after
# the load event); -1 when the browser reports none.
FIRST_PAINT = """async () => {
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return paint ? paint.startTime : -1;
}"""
OLDER = re.compile(r'rel="next" href="([^"]+)"')


# -- seeding ------------------------------------------------------------------------------
def _answer(n: int) -> str:
    return (
        f"## Step {n}\n\nI changed `module_{n}.py` so the parser keeps the **original** order:\n\n"
        "- read the header once\n- keep each field's offset\n- write back in one pass\n\n"
        "```python\ndef parse(text):\n    return [row.split(',') for row in text.split()]\n```\n\n"
        + "The tests pass now; the slow case went from 4.1 s to 0.3 s. "
        * 6
    )


def _response(session_id: str, n: int, created: int) -> dict[str, Any]:
    call = f"call_{n:06d}"
    return {
        "id": f"resp_bench{n:06d}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": "bench-model",
        "output": [
            {
                "type": "reasoning",
                "id": f"rs_{n}",
                "summary": [{"type": "summary_text", "text": "Looking at the parser first. " * 8}],
            },
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": call,
                "name": "shell",
                "arguments": json.dumps(
                    {"command": ["bash", "-lc", f"pytest -q tests/test_{n}.py"]}
                ),
                "status": "completed",
            },
            {
                "type": "function_call_output",
                "id": f"fco_{n}",
                "call_id": call,
                "output": "\n".join(f"tests/test_{n}.py::case_{i} PASSED" for i in range(20)),
            },
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": _answer(n), "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 1200, "output_tokens": 300, "total_tokens": 1500},
        "metadata": {"session_id": session_id},
    }


def seed(data_dir: Path, sessions: int, turns: int) -> str:
    """The principal's sessions and the long one's turns, written before the server starts;
    the long session's id."""
    from fastapi.testclient import TestClient

    from tests.support.app_context import app_context
    from uhp_server.app import create_app
    from uhp_server.settings import Settings

    app = create_app(Settings(data_dir=data_dir, api_key=API_KEY), bases={})
    with TestClient(app) as client:
        db = app_context(client).db
        owner = db.run(keys.ensure_principal, "default")
        statuses = ("completed", "completed", "completed", "failed", "cancelled")

        def sessions_in(tx: Any) -> None:
            for n in range(sessions):
                at = T0 + n // 2
                session_store.insert_session(
                    tx,
                    SessionRow(
                        id=f"hsess_bench{n:06d}",
                        principal_id=owner.id,
                        harness_id="chrn_bench",
                        container_id=f"cntr_bench{n:06d}",
                        title=f"Fix the parser, part {n}",
                        status=statuses[n % len(statuses)],
                        created_at=at,
                        updated_at=at,
                    ),
                )

        db.run(sessions_in)
        long_id = f"hsess_bench{sessions - 1:06d}"  # the newest: first on the list

        def turns_in(tx: Any) -> None:
            for n in range(turns):
                created = T0 + sessions + n
                prompt = f"Step {n}: make the parser keep the order of fields, then run its tests."
                response_store.insert_response(
                    tx,
                    ResponseRow(
                        id=f"resp_bench{n:06d}",
                        principal_id=owner.id,
                        session_id=long_id,
                        status="completed",
                        model="bench-model",
                        created_at=created,
                        finished_at=created + 0.5,
                        input_items=[
                            {
                                "type": "message",
                                "role": "user",
                                "content": [{"type": "input_text", "text": prompt}],
                            }
                        ],
                        final=_response(long_id, n, created),
                    ),
                )

        db.run(turns_in)
    return long_id


# -- measuring ----------------------------------------------------------------------------
def timed_get(http: httpx.Client, url: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    answer = http.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != 200:
        raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:200]}")
    return elapsed, answer


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def row(name: str, values: list[float], target: float) -> tuple[str, bool]:
    median = statistics.median(values)
    met = median < target
    line = (
        f"{name:<44} {median:9.1f} {percentile(values, 0.95):9.1f} {max(values):9.1f}"
        f" {target:8.0f} {median / target:7.2f}  {'met' if met else 'NOT met'}"
    )
    return line, met


def session_page(http: httpx.Client, session_id: str, rounds: int) -> list[tuple[str, bool]]:
    url = f"/console/sessions/{session_id}"
    cold, answer = timed_get(http, url)
    shown = answer.text.count('class="turn-slot"')
    total = re.search(r"of (\d+)</span>", answer.text)
    turns = f"{total.group(1) if total else shown} turns ({shown} shown)"
    warm = [timed_get(http, url)[0] for _ in range(rounds)]
    return [
        (f"session page, {turns}: first request {cold:.1f} ms", True),
        row(f"session page, {turns}", warm, PAGE_TARGET_MS),
    ]


def sessions_list(http: httpx.Client, rounds: int, depth: int) -> list[tuple[str, bool]]:
    lines = []
    first = [timed_get(http, "/console")[0] for _ in range(rounds)]
    lines.append(row("sessions list, first page", first, LIST_TARGET_MS))
    deep: list[float] = []
    url: str | None = "/console"
    pages = 0
    while url is not None and pages < depth:
        elapsed, answer = timed_get(http, url)
        deep.append(elapsed)
        pages += 1
        older = OLDER.search(answer.text)
        url = older.group(1).replace("&amp;", "&") if older else None
    lines.append(row(f"sessions list, pages 1-{pages} by cursor", deep, LIST_TARGET_MS))
    for label, query in (
        ("status=failed", "/console?status=failed"),
        ("text 'part 77'", "/console?q=part+77"),
        ("text matching nothing", "/console?q=nothing+like+this"),
    ):
        times = [timed_get(http, query)[0] for _ in range(rounds)]
        lines.append(row(f"sessions list, {label}", times, LIST_TARGET_MS))
    return lines


def first_render(url: str, session_id: str, rounds: int) -> list[tuple[str, bool]]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("first render left out: no Chromium on the PATH (apt-get install chromium)")
        return []
    from playwright.sync_api import sync_playwright

    from tests.test_share_browser import CHROMIUM_FLAGS

    paints: list[float] = []
    loads: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_FLAGS
        )
        page = browser.new_page()
        page.goto(f"{url}/console/sign-in")
        page.get_by_label("API key").fill(API_KEY)
        page.get_by_label("API key").press("Enter")
        page.wait_for_url(f"{url}/console")
        for _ in range(rounds):
            page.goto(f"{url}/console/sessions/{session_id}", wait_until="load")
            paint = page.evaluate(FIRST_PAINT)
            load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            if paint >= 0:
                paints.append(paint)
            loads.append(load)
        browser.close()
    lines = [row("session page, load event in Chromium", loads, RENDER_TARGET_MS)]
    if paints:
        lines.insert(0, row("session page, first paint in Chromium", paints, RENDER_TARGET_MS))
    return lines


def read_arrivals(
    open_stream: Callable[[], Any], sequence_of: Callable[[str, str], int | None]
) -> dict[int, float]:
    """When each message arrived (perf_counter), by the sequence number it covers."""
    arrivals: dict[int, float] = {}
    with open_stream() as response:
        data = ""
        event_id = ""
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif line == "" and data:
                number = sequence_of(event_id, data)
                if number is not None:
                    arrivals.setdefault(number, time.perf_counter())
                data = ""
    return arrivals


def one_stream(api: httpx.Client, console: httpx.Client) -> list[float]:
    """A turn whose answer streams, read through both streams at once: each console
    message's arrival minus the API's arrival of the event it covers (ms)."""
    words = " ".join(f"word{i}" for i in range(120))
    created = api.post(
        "/v1/responses", json={"input": f"SLOW 3\nSAY {words}", "background": True}
    ).json()
    response_id, session_id = created["id"], created["metadata"]["session_id"]
    got: dict[str, dict[int, float]] = {}

    def read_api() -> None:
        got["api"] = read_arrivals(
            lambda: api.stream("GET", f"/v1/responses/{response_id}?stream=true"),
            lambda _id, data: json.loads(data)["sequence_number"],
        )

    def read_console() -> None:
        got["console"] = read_arrivals(
            lambda: console.stream("GET", f"/console/sessions/{session_id}/live"),
            lambda event_id, _data: int(event_id.rsplit(".", 1)[1]) if event_id else None,
        )

    readers = [threading.Thread(target=read_api), threading.Thread(target=read_console)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=120)
    # Only events both read live: the first message of each stream may replay a backlog
    # written before it connected.
    live = sorted(got["console"])[1:]
    return [(got["console"][n] - got["api"][n]) * 1000 for n in live if n in got["api"]]


def stream_delays(url: str, console: httpx.Client, streams: int) -> list[tuple[str, bool]]:
    delays: list[float] = []
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=url, timeout=120, headers=headers) as api:
        for _ in range(streams):
            delays += one_stream(api, console)
    if not delays:
        raise RuntimeError("no event was read by both streams")
    name = f"live stream delay behind the API's SSE ({len(delays)} events)"
    return [row(name, delays, DELAY_TARGET_MS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="codex")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--depth", type=int, default=40, help="list pages walked by cursor")
    parser.add_argument("--streams", type=int, default=5, help="turns streamed both ways")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), turns=20, sessions=60, rounds=2, depth=3, streams=1)
    installed_tools(args.base)
    with tempfile.TemporaryDirectory(prefix="console-bench-") as scratch:
        started = time.perf_counter()
        long_id = seed(Path(scratch), args.sessions, args.turns)
        print(
            f"seeded {args.sessions} sessions, {args.turns} turns in one, "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        provider = start_provider(PROVIDER_KEY, MODELS)
        server = ServerProcess(Path(scratch), server_env(provider, UHP_BASES=args.base)).start()
        try:
            http = console_client(server.url, API_KEY)
            lines = session_page(http, long_id, args.rounds)
            lines += first_render(server.url, long_id, max(2, args.rounds // 4))
            lines += sessions_list(http, args.rounds, args.depth)
            lines += stream_delays(server.url, http, args.streams)
            http.close()
        finally:
            server.stop()
            provider.stop()
    print(f"\n{'measured (ms)':<44} {'median':>9} {'p95':>9} {'max':>9} {'target':>8} {'ratio':>7}")
    for line, _ in lines:
        print(line)
    missed = [line for line, met in lines if not met]
    print(
        f"\n{len(lines) - len(missed)} of {len(lines)} met"
        + ("" if not missed else "; NOT met above")
    )


if __name__ == "__main__":
    main()
