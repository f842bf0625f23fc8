"""What does the server add on top of running Codex directly?

Runs the same scripted tasks three ways, interleaved, in one go:

- direct app-server: `codex app-server` driven by CodexBase, no server, no sandbox;
- direct exec: `codex exec --json`, a second reference;
- server: a real `uhp-server serve` subprocess, `POST /v1/responses` with `stream: true`.

All three talk to the same in-process scripted provider. Usage:

    python bench/overhead.py [--tasks N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from harness_bases import events as ev
from harness_bases.base import Invocation, SandboxPaths, TurnSpec
from harness_bases.codex import CodexBase
from harness_bases.codex import install as installer
from harness_bases.codex.base import SYSTEM_PATH
from harness_bases.codex.config import TOKEN_ENV, write_config
from uhp_server.engine.fold import TERMINAL_TYPES

# tests/ is not an installed package: the bench borrows the test suite's helpers from the repo.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.server import ServerProcess

MODEL = "gpt-test"
TURN_TIMEOUT = 120.0
RATIO_TARGET = 1.10
CREATED_TARGET_MS = 20.0

# kind -> (prompt, the answer every mode must produce)
TASKS = {
    "text": ("SAY hello world", "hello world"),
    "tool": ("RUN echo hi\nSAY got {output}", "got hi"),
}
MODES = ("app-server", "exec", "server")


class BenchError(RuntimeError):
    """A run did not do what the task asked; its timing would mean nothing."""


# -- direct: codex app-server through CodexBase ------------------------------------------------


class LocalProcess:
    """The Process protocol over a plain subprocess (as in tests/test_codex_base.py)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def start(cls, invocation: Invocation) -> LocalProcess:
        proc = await asyncio.create_subprocess_exec(
            *invocation.argv,
            env=invocation.env,
            cwd=invocation.cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        return cls(proc)

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def close_stdin(self) -> None:
        assert self._proc.stdin is not None
        if not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    async def lines(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            yield line.rstrip(b"\n")

    def stderr_tail(self) -> str:
        return self._stderr[-4096:].decode(errors="replace")

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr += chunk

    async def wait(self) -> None:
        await self._proc.wait()

    async def kill(self) -> None:
        """Kill it unless it has exited; then stop reading stderr."""
        if self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._stderr_task.cancel()


@dataclass
class Direct:
    """Runs turns straight against the provider; every turn gets fresh home and workspace."""

    provider: RunningProvider
    tools: Path
    scratch: Path
    base: CodexBase = field(default_factory=CodexBase)
    _count: int = 0

    def _folders(self) -> tuple[Path, Path]:
        self._count += 1
        home = self.scratch / f"direct-{self._count}" / "home"
        workspace = home.parent / "workspace"
        home.mkdir(parents=True)
        workspace.mkdir()
        return home, workspace

    def run_app_server(self, prompt: str) -> float:
        """Seconds from preparing the turn to the outcome the CLI reports (answer checked)."""
        return asyncio.run(self._app_server(prompt))

    async def _app_server(self, prompt: str) -> float:
        home, workspace = self._folders()
        spec = TurnSpec(
            prompt=prompt,
            model=MODEL,
            gateway_url=self.provider.base_url,
            gateway_token=PROVIDER_KEY,
            host_workspace=workspace,
            host_home=home,
            host_tools=self.tools,
            # No sandbox: the "sandbox" paths are the host folders themselves.
            paths=SandboxPaths(str(workspace), str(home), str(self.tools)),
        )
        started = time.perf_counter()
        proc = await LocalProcess.start(self.base.prepare(spec))
        agen = self.base.drive(proc, spec)
        text, outcome = "", None
        try:
            async with asyncio.timeout(TURN_TIMEOUT):
                async for event in agen:
                    if isinstance(event, ev.TextDone):
                        text += event.text
                    if isinstance(event, ev.TurnFinished | ev.TurnFailed):
                        outcome = event
                        break
            elapsed = time.perf_counter() - started
            # Wind down as the engine does, outside the measured time: with stdin closed the
            # CLI flushes its transcript and exits on its own.
            async with asyncio.timeout(10):
                await proc.close_stdin()
                async for _ in agen:
                    pass
                await proc.wait()
        finally:  # also on errors and Ctrl-C: nothing is left running
            await agen.aclose()
            await proc.kill()
        if not isinstance(outcome, ev.TurnFinished):
            raise BenchError(f"app-server turn did not finish: {outcome}\n{proc.stderr_tail()}")
        _check_answer("app-server", prompt, text)
        return elapsed

    def run_exec(self, prompt: str) -> float:
        """Seconds from starting `codex exec --json` to its `turn.completed` line."""
        home, workspace = self._folders()
        write_config(home / ".codex", MODEL, self.provider.base_url)
        env = {
            "PATH": f"{installer.helper_path_dir(str(self.tools))}:{SYSTEM_PATH}",
            "HOME": str(home),
            "CODEX_HOME": str(home / ".codex"),
            TOKEN_ENV: PROVIDER_KEY,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
        }
        binary = installer.binary_path(str(self.tools))
        argv = [binary, "exec", "--json", "--skip-git-repo-check", "-C", str(workspace), prompt]
        text, outcome = "", None
        started = time.perf_counter()
        with subprocess.Popen(
            argv,
            env=env,
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ) as proc:
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    event = json.loads(line)
                    item = event.get("item") or {}
                    if event["type"] == "item.completed" and item.get("type") == "agent_message":
                        text += item["text"]
                    if event["type"] in ("turn.completed", "turn.failed"):
                        outcome = event["type"]
                        break
                elapsed = time.perf_counter() - started
                proc.wait(TURN_TIMEOUT)
            finally:
                if proc.poll() is None:
                    proc.kill()
        if outcome != "turn.completed":
            raise BenchError(f"codex exec did not complete a turn (exit {proc.returncode})")
        _check_answer("exec", prompt, text)
        return elapsed


# -- through the server ------------------------------------------------------------------------


@dataclass
class ServerTiming:
    total: float  # request sent -> terminal event, seconds
    created: float  # request sent -> response.created, seconds


def sse_events(lines: Iterator[str]) -> Iterator[dict]:
    data: list[str] = []
    for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            yield json.loads("\n".join(data))
            data = []


def server_task(client: httpx.Client, prompt: str) -> ServerTiming:
    created = None
    body = {"input": prompt, "stream": True}
    started = time.perf_counter()
    with client.stream("POST", "/v1/responses", json=body) as response:
        if response.status_code != 200:
            raise BenchError(f"server answered {response.status_code}: {response.read()!r}")
        for event in sse_events(response.iter_lines()):
            if event["type"] == "response.created":
                created = time.perf_counter() - started
            elif event["type"] in TERMINAL_TYPES:
                total = time.perf_counter() - started
                final = event["response"]
                break
        else:
            raise BenchError("the stream ended without a terminal event")
    if final["status"] != "completed" or created is None:
        raise BenchError(f"server task ended {final['status']}: {final.get('error')}")
    text = "".join(
        part.get("text", "")
        for item in final["output"]
        if item["type"] == "message"
        for part in item["content"]
    )
    _check_answer("server", prompt, text)
    return ServerTiming(total, created)


def wait_children_gone(pid: int, timeout: float = 15.0) -> None:
    """Wait until the server has no child processes: the previous task's sandbox has wound
    down (after the terminal event) and does not compete with the next measurement."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _has_children(pid):
        time.sleep(0.02)


def _has_children(pid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The fields after the command name (in parentheses, may contain spaces).
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                return True
    return False


# -- running and reporting ---------------------------------------------------------------------


def _check_answer(mode: str, prompt: str, text: str) -> None:
    expected = next(answer for p, answer in TASKS.values() if p == prompt)
    if text.strip() != expected:
        raise BenchError(f"{mode}: expected {expected!r} for {prompt!r}, got {text!r}")


@dataclass
class Results:
    seconds: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (kind, mode)
    created_ms: dict[str, list[float]] = field(default_factory=dict)  # kind

    def add(self, kind: str, mode: str, seconds: float) -> None:
        self.seconds.setdefault((kind, mode), []).append(seconds)

    def median(self, kind: str, mode: str) -> float:
        return statistics.median(self.seconds[(kind, mode)])


def p90(values: list[float]) -> float:
    """Nearest-rank 90th percentile (with fewer than 10 samples: the maximum)."""
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def run_bench(tasks: int, scratch: Path, log: Callable[[str], None]) -> Results:
    tools = tools_dir()
    base = CodexBase()
    if base.installed_version(tools) != base.cli_version:
        log(f"installing Codex {base.cli_version} under {tools} ...")
        base.install(tools)
    results = Results()
    with contextlib.ExitStack() as stack:
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        server = ServerProcess(scratch / "server", server_env(provider))
        stack.callback(server.stop)  # registered first: stops a half-started server too
        server.start()
        assert server.proc is not None
        client = stack.enter_context(
            httpx.Client(
                base_url=server.url,
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=TURN_TIMEOUT,
            )
        )
        direct = Direct(provider, tools, scratch)

        def once(kind: str, mode: str, record: bool) -> None:
            prompt = TASKS[kind][0]
            provider.reset()  # the provider records every request; keep it small
            if mode == "app-server":
                seconds = direct.run_app_server(prompt)
            elif mode == "exec":
                seconds = direct.run_exec(prompt)
            else:
                timing = server_task(client, prompt)
                wait_children_gone(server.proc.pid)
                seconds = timing.total
                if record:
                    results.created_ms.setdefault(kind, []).append(timing.created * 1000)
            if record:
                results.add(kind, mode, seconds)

        log("warm-up: every mode on every kind (not recorded)")
        for kind in TASKS:
            for mode in MODES:
                once(kind, mode, record=False)
        for i in range(tasks):
            log(f"round {i + 1}/{tasks}")
            # Interleaved, and the order flips each round so neither side always goes first.
            order = MODES if i % 2 == 0 else MODES[::-1]
            for kind in TASKS:
                for mode in order:
                    once(kind, mode, record=True)
    return results


def report(results: Results, tasks: int) -> str:
    header = (
        f"{'kind':<6} {'app-server s':>12} {'exec s':>8} {'server s':>9} "
        f"{'server/app-srv':>14} {'created med ms':>14} {'created p90 ms':>14}"
    )
    lines = [
        f"UHP server overhead: {tasks} task(s) per kind, medians (after one warm-up round)",
        "",
        header,
        "-" * len(header),
    ]
    for kind in TASKS:
        app, exe, srv = (results.median(kind, mode) for mode in MODES)
        created = results.created_ms[kind]
        lines.append(
            f"{kind:<6} {app:>12.3f} {exe:>8.3f} {srv:>9.3f} {srv / app:>14.3f} "
            f"{statistics.median(created):>14.1f} {p90(created):>14.1f}"
        )
    server_sum = sum(results.median(kind, "server") for kind in TASKS)
    direct_sum = sum(results.median(kind, "app-server") for kind in TASKS)
    ratio = server_sum / direct_sum
    created = [ms for values in results.created_ms.values() for ms in values]
    created_median, created_p90 = statistics.median(created), p90(created)

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    lines += [
        "",
        "overall server/direct app-server (sum of per-kind medians): "
        f"{ratio:.3f}  target <= {RATIO_TARGET:.2f}: {verdict(ratio <= RATIO_TARGET)}",
        f"response.created over all server tasks: median {created_median:.1f} ms, "
        f"p90 {created_p90:.1f} ms  target <= {CREATED_TARGET_MS:.0f} ms: "
        f"median {verdict(created_median <= CREATED_TARGET_MS)}, "
        f"p90 {verdict(created_p90 <= CREATED_TARGET_MS)}",
        "",
        "times are to the terminal event (server) / the CLI's outcome (direct), client side.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=5, help="tasks per kind and mode")
    args = parser.parse_args(argv)
    if args.tasks < 1:
        parser.error("--tasks must be at least 1")

    # SIGTERM unwinds like Ctrl-C, so the provider and the server are stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    # Not under /tmp: Codex skips some start-up work for homes in temporary folders, and the
    # server's sandbox homes are never there either.
    cache = Path.home() / ".cache" / "uhp-server"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-", dir=cache) as scratch:
            results = run_bench(args.tasks, Path(scratch), log)
    except KeyboardInterrupt:
        log("interrupted; everything the bench started has been stopped")
        return 130
    except BenchError as exc:
        log(f"bench failed: {exc}")
        return 1
    except TimeoutError:
        log(f"bench failed: a turn took longer than {TURN_TIMEOUT:.0f} s")
        return 1
    print(report(results, args.tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
