"""What does a sandbox cost to start a turn in?

Interleaved, in one run, against the same runtime image:

- docker run: `docker run --rm <image> true` with the docker CLI: the floor any
  container-per-turn design pays;
- docker backend: DockerSandbox.start() of `true` until it has exited (create, attach, start,
  the gateway relay, hardening, folder hand-over, exit);
- gvisor backend: the same with UHP_DOCKER_RUNTIME=runsc (left out, loudly, when the engine
  has no runsc; bash scripts/docker-engine.sh registers it);
- docker first byte: DockerSandbox.start() of `echo` until its first stdout line arrives;
- docker pooled, pooled 1st byte: the same two in a container of the ready pool
  (UHP_DOCKER_READY_POOL, sandbox/docker/ready_pool.py), measured once a slot is ready and
  waited for its refill after, so that no refill runs beside another sample;
- local backend: LocalSandbox.start() of `true` until it has exited (bubblewrap);
- session exec: the per-session design, one `exec` of `true` in a container already running;
- with --baked: `docker run` of the pinned Codex CLI's `--version` from the tools folder
  mounted read-only vs from an image with the CLI copied in (the image-per-base design).

Then a whole turn, the way a client sees it: a real `uhp-server serve` per sandbox (local,
docker, docker in gVisor), Codex against the scripted provider, `POST /v1/responses` from
request to terminal event, a text task and a tool task (bench/overhead.py's), interleaved.

Prints medians, the docker backend / docker run ratio (target <= 1.25), the pooled docker
turn's start to its first byte beside `docker run` and `docker exec` (target < 150 ms), and
the ratios of the three sandboxes for turn start and whole turn; gVisor's cost is read
against the 10% of a whole turn under which it would become the default (issue 27). Usage:

    python bench/sandbox.py [--runs N] [--turns N] [--baked] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from starlette.types import Receive, Scope, Send

from bench import _smoke
from bench.overhead import TASKS, server_task, wait_children_gone
from harness_bases.base import Invocation, SandboxPaths
from harness_bases.codex import install as codex_install
from tests.conftest import API_KEY, MODELS, PROVIDER_KEY, server_env, tools_dir
from tests.scripted_provider import start_provider
from tests.support.server import ServerProcess
from uhp_server.sandbox.base import SessionMounts
from uhp_server.sandbox.docker import DockerSandbox, images
from uhp_server.sandbox.docker.gateway_socket import TurnSocket
from uhp_server.sandbox.docker.runtimes import GVISOR, engine_runtimes
from uhp_server.sandbox.docker.sandbox import engine_client
from uhp_server.sandbox.local import LocalSandbox

RATIO_TARGET = 1.25
GVISOR_DEFAULT_BELOW = 0.10  # gVisor becomes the default only if it costs less (issue 27)
FIRST_BYTE_TARGET_MS = 150.0
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/agent"}


async def no_gateway(scope: Scope, receive: Receive, send: Send) -> None:
    """The bench never calls the gateway; the sandbox only needs something to serve."""


def timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


async def atimed(fn: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


class Bench:
    def __init__(self, scratch: Path, image: str, gvisor: bool) -> None:
        self.image = image
        self.api = engine_client()
        tools = tools_dir()
        self.mounts = SessionMounts(scratch / "ws", scratch / "home", tools)
        self.docker = DockerSandbox(scratch / "data", image=image)
        self.pooled = DockerSandbox(scratch / "pooled", image=image, ready_pool=1)
        self.gvisor = (
            DockerSandbox(scratch / "gvisor", image=image, runtime=GVISOR) if gvisor else None
        )
        self.local = LocalSandbox()  # with its gateway door and default limits
        self.session_container = ""

    async def open(self) -> None:
        await self.docker.open(no_gateway)
        await self.pooled.open(no_gateway)
        if self.pooled.pool is None:
            raise SystemExit("the ready pool is off here (see the server log): run as root")
        if self.gvisor:
            await self.gvisor.open(no_gateway)
        await self.local.open(no_gateway)
        turn_socket = await self.docker.gateway.open_turn("bench:session", self.docker.user)
        self.session_container = await asyncio.to_thread(self._session_container, turn_socket)

    async def close(self) -> None:
        if self.session_container:
            with contextlib.suppress(Exception):
                self.api.remove_container(self.session_container, force=True)
        await self.docker.close()
        await self.pooled.close()
        if self.gvisor:
            await self.gvisor.close()
        await self.local.close()  # its CPU cgroup, else left behind empty

    def _session_container(self, turn_socket: TurnSocket) -> str:
        """A long-lived container with the same hardening, for the per-session design, on
        the engine the docker backend runs its turns on (the environment's one: the bench
        names no UHP_DOCKER_HOSTS)."""
        (engine,) = self.docker.engines.up_engines()
        mounts = self.docker._container(
            engine, Invocation(["sleep", "infinity"], ENV, "/workspace"), self.mounts, turn_socket
        )
        mounts["labels"] = {"uhp.bench": "session"}
        mounts["stdin_open"] = False
        mounts["detach"] = True
        created = self.api.create_container(**mounts)
        self.api.start(created["Id"])
        return created["Id"]

    def docker_run(self) -> None:
        subprocess.run(["docker", "run", "--rm", self.image, "true"], check=True)

    async def docker_backend(self) -> None:
        await self.true_in(self.docker)

    async def gvisor_backend(self) -> None:
        assert self.gvisor is not None
        await self.true_in(self.gvisor)

    async def true_in(self, sandbox: DockerSandbox) -> None:
        proc = await sandbox.start(Invocation(["/bin/true"], ENV, "/workspace"), self.mounts)
        await proc.close_stdin()
        assert await proc.wait() == 0

    async def docker_first_byte(self) -> float:
        return await self.first_byte_in(self.docker)

    async def first_byte_in(self, sandbox: DockerSandbox) -> float:
        started = time.perf_counter()
        proc = await sandbox.start(Invocation(["/bin/echo", "x"], ENV, "/workspace"), self.mounts)
        line = await anext(proc.lines())
        elapsed = time.perf_counter() - started
        assert line == b"x"
        await proc.wait()
        return elapsed

    async def pool_ready(self) -> None:
        """Until the pooled sandbox has a slot ready for the bench's turns (its default uid)."""
        pool = self.pooled.pool
        assert pool is not None
        pool.want(self.pooled.user)
        async with asyncio.timeout(120):
            while not pool.ready(self.pooled.user):
                await asyncio.sleep(0.01)

    async def pooled_backend(self) -> float:
        await self.pool_ready()
        elapsed = await atimed(lambda: self.true_in(self.pooled))
        await self.pool_ready()
        return elapsed

    async def pooled_first_byte(self) -> float:
        await self.pool_ready()
        elapsed = await self.first_byte_in(self.pooled)
        await self.pool_ready()
        return elapsed

    async def local_backend(self) -> None:
        proc = await self.local.start(Invocation(["/bin/true"], ENV, "/workspace"), self.mounts)
        await proc.close_stdin()
        assert await proc.wait() == 0

    def session_exec(self) -> None:
        exec_id = self.api.exec_create(self.session_container, ["true"], user="1000:1000")["Id"]
        self.api.exec_start(exec_id)
        assert self.api.exec_inspect(exec_id)["ExitCode"] == 0


def baked_image(api: Any, image: str, tools: Path) -> str:
    """The image-per-base alternative: the runtime plus the pinned Codex CLI copied in."""
    tag = f"uhp-bench-baked:{codex_install.CLI_VERSION}"
    source = tools / "codex" / codex_install.CLI_VERSION
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        dockerfile = (
            f"FROM {image}\nCOPY codex /opt/uhp-tools/codex/{codex_install.CLI_VERSION}\n"
        ).encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(source, arcname="codex")
    context.seek(0)
    started = time.perf_counter()
    for _ in api.build(fileobj=context, custom_context=True, tag=tag, rm=True, decode=True):
        pass
    print(f"  baked image built in {time.perf_counter() - started:.1f} s")
    return tag


def codex_version_run(image: str, mount: Path | None) -> None:
    binary = codex_install.binary_path(SandboxPaths().tools)
    volume = ["-v", f"{mount}:/opt/uhp-tools:ro"] if mount else []
    subprocess.run(
        ["docker", "run", "--rm", *volume, image, binary, "--version"],
        check=True,
        capture_output=True,
    )


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def start_ratios(times: dict[str, list[float]]) -> None:
    local, docker, gvisor = (
        statistics.median(times[f"{name} backend"]) for name in ("local", "docker", "gvisor")
    )
    print(
        f"turn start: gvisor / docker = {gvisor / docker:.2f}, gvisor / local = "
        f"{gvisor / local:.1f}, docker / local = {docker / local:.1f}"
    )


SANDBOXES = {  # name -> the server's settings for it
    "local": {"UHP_SANDBOX": "local"},
    "docker": {"UHP_SANDBOX": "docker"},
    "gvisor": {"UHP_SANDBOX": "docker", "UHP_DOCKER_RUNTIME": GVISOR},
}


def whole_turns(turns: int, gvisor: bool, smoke: bool = False) -> None:
    """A whole Codex turn through a real server on each sandbox, interleaved."""
    names = [name for name in SANDBOXES if gvisor or name != "gvisor"]
    print(f"whole turn (codex, scripted provider), {turns} rounds of each task, interleaved:")
    seconds: dict[tuple[str, str], list[float]] = {}
    # The servers stop (the stack) before their folders go: a running server's folders hold
    # mounts (its gateway socket's), which a removal cannot take away under it.
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        provider = start_provider(PROVIDER_KEY, MODELS)
        stack.callback(provider.stop)
        clients, servers = {}, {}
        for name in names:
            env = server_env(provider, UHP_BASES="codex")
            env.pop("UHP_DOCKER_RUNTIME", None)  # (a test run's UHP_TEST_DOCKER_RUNTIME)
            env.update(SANDBOXES[name])
            server = ServerProcess(Path(scratch) / name, env)
            stack.callback(server.stop)
            servers[name] = server.start()
            clients[name] = stack.enter_context(
                httpx.Client(
                    base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
                )
            )
        # A smoke run: no warm-up round, and the text task alone (the tool task's path is the
        # same; a gVisor turn takes seconds).
        kinds = {k: v for k, v in TASKS.items() if not smoke or k == "text"}
        for round_no in range(1 if smoke else 0, turns + 1):
            order = names if round_no % 2 == 0 else names[::-1]
            for kind, (prompt, _answer) in kinds.items():
                for name in order:
                    provider.reset()
                    total = server_task(clients[name], prompt).total
                    wait_children_gone(servers[name].pid)
                    if round_no:  # the first round warms up
                        seconds.setdefault((kind, name), []).append(total)
    for kind in (k for k in TASKS if (k, names[0]) in seconds):
        medians = {name: median_ms(seconds[(kind, name)]) for name in names}
        print(f"  {kind:<5} " + "  ".join(f"{n} {ms:6.0f} ms" for n, ms in medians.items()))
        if gvisor:
            cost = medians["gvisor"] / medians["docker"] - 1
            verdict = "under" if cost < GVISOR_DEFAULT_BELOW else "NOT under"
            print(
                f"        gvisor / docker = {medians['gvisor'] / medians['docker']:.2f} "
                f"(+{cost:.0%}: {verdict} {GVISOR_DEFAULT_BELOW:.0%}), gvisor / local = "
                f"{medians['gvisor'] / medians['local']:.2f}, docker / local = "
                f"{medians['docker'] / medians['local']:.2f}"
            )


async def main(runs: int, turns: int, baked: bool, smoke: bool) -> int:
    why = _smoke.docker_absent()
    if why:
        _smoke.left_out(_smoke.DOCKER, "the whole bench: it measures the docker sandbox", why)
        return 0 if smoke else 2
    api = engine_client()
    image = images.build_runtime(api, base_image="debian:bookworm-slim", say=lambda _t: None)
    gvisor = GVISOR in engine_runtimes(api)
    if not gvisor:
        _smoke.left_out(
            _smoke.GVISOR,
            "its columns",
            "the engine has no runtime runsc; bash scripts/docker-engine.sh registers it",
        )
    print(f"image {image}, {runs} runs of each, interleaved after one warm-up round")
    starts = ("docker run", "docker backend", "docker pooled", "local backend", "session exec")
    times: dict[str, list[float]] = {k: [] for k in starts + (("gvisor backend",) * gvisor)}
    first_bytes: list[float] = []
    pooled_first_bytes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="uhp-bench-") as scratch:
        bench = Bench(Path(scratch), image, gvisor)
        await bench.open()
        try:
            for round_no in range(runs + 1):
                sample = {
                    "docker run": await asyncio.to_thread(timed, bench.docker_run),
                    "docker backend": await atimed(bench.docker_backend),
                    "docker pooled": await bench.pooled_backend(),
                    "local backend": await atimed(bench.local_backend),
                    "session exec": await asyncio.to_thread(timed, bench.session_exec),
                }
                if gvisor:
                    sample["gvisor backend"] = await atimed(bench.gvisor_backend)
                first = await bench.docker_first_byte()
                pooled_first = await bench.pooled_first_byte()
                if round_no == 0:
                    continue  # warm-up
                for key, value in sample.items():
                    times[key].append(value)
                first_bytes.append(first)
                pooled_first_bytes.append(pooled_first)
        finally:
            await bench.close()
    for key, values in times.items():
        print(f"  {key:<16} median {median_ms(values):7.1f} ms")
    print(f"  {'docker 1st byte':<16} median {median_ms(first_bytes):7.1f} ms")
    print(f"  {'pooled 1st byte':<16} median {median_ms(pooled_first_bytes):7.1f} ms")
    ratio = statistics.median(times["docker backend"]) / statistics.median(times["docker run"])
    local = statistics.median(times["docker backend"]) / statistics.median(times["local backend"])
    met = "met" if ratio <= RATIO_TARGET else "NOT met"
    print(f"docker backend / docker run = {ratio:.2f} (target <= {RATIO_TARGET}: {met})")
    print(f"docker backend / local backend = {local:.1f}")
    exec_ratio = statistics.median(times["session exec"]) / statistics.median(times["docker run"])
    print(f"session exec / docker run = {exec_ratio:.2f} (the per-session design's turn start)")
    pooled = median_ms(pooled_first_bytes)
    first_met = "met" if pooled < FIRST_BYTE_TARGET_MS else "NOT met"
    print(
        f"docker turn start, to its first byte: pooled {pooled:.0f} ms, cold "
        f"{median_ms(first_bytes):.0f} ms; against docker run {median_ms(times['docker run']):.0f}"
        f" ms, docker exec {median_ms(times['session exec']):.0f} ms "
        f"(pooled target < {FIRST_BYTE_TARGET_MS:.0f} ms: {first_met})"
    )
    if gvisor:
        start_ratios(times)
    if turns:
        whole_turns(turns, gvisor, smoke)
    if baked:
        print("image per base (CLI baked in) vs shared runtime (tools mounted read-only):")
        tag = baked_image(api, image, tools_dir())
        mounted, inside = [], []
        for _ in range(runs):
            mounted.append(timed(lambda: codex_version_run(image, tools_dir())))
            inside.append(timed(lambda: codex_version_run(tag, None)))
        print(f"  mounted  median {median_ms(mounted):7.1f} ms")
        print(f"  baked    median {median_ms(inside):7.1f} ms")
        api.remove_image(tag, force=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--turns", type=int, default=5, help="whole turns of each; 0: none")
    parser.add_argument("--baked", action="store_true", help="also measure an image per base")
    _smoke.add_flag(parser)
    args = _smoke.shrink(parser.parse_args(), runs=1, turns=1, baked=True)
    raise SystemExit(asyncio.run(main(args.runs, args.turns, args.baked, args.smoke)))
