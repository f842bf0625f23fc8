"""The local sandbox: bubblewrap on the server's own machine.

Isolates the filesystem (read-only system, only the session's folders writable, nothing
else of the host visible), processes, IPC, hostname and cgroups, and drops every
capability. It does NOT isolate the network: the CLI must reach the model gateway on the
server's loopback, so the sandbox shares the host's network namespace (the docker sandbox
puts the agent on a network where only the gateway is reachable).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from harness_bases.base import Invocation
from uhp_server.gateway.paths import gateway_path
from uhp_server.sandbox.base import Sandbox, SandboxedProcess, SandboxError, SessionMounts
from uhp_server.sandbox.spawn import SpawnedProcess, spawn

log = logging.getLogger(__name__)

STDOUT_LINE_LIMIT = 64 * 1024 * 1024  # CLIs print single JSON lines of several MB
STDERR_TAIL_BYTES = 8 * 1024
START_TIMEOUT = 30.0

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/sbin")
# Only what programs need to resolve names, trust TLS, map uids and load libraries.
_ETC_ENTRIES = (
    "ssl",
    "resolv.conf",
    "hosts",
    "nsswitch.conf",
    "passwd",
    "group",
    "ld.so.cache",
    "alternatives",
    "localtime",
)


def system_binds(etc_entries: Iterable[str]) -> list[str]:
    """bwrap arguments that bind the host's system folders and the named /etc entries
    read-only (this sandbox and the document-preview converter each name their own)."""
    args: list[str] = []
    for d in SYSTEM_DIRS:
        p = Path(d)
        if p.is_symlink():  # merged /usr: keep /bin -> usr/bin a symlink, as on the host
            args += ["--symlink", os.readlink(p), d]
        elif p.is_dir():
            args += ["--ro-bind", d, d]
    for name in etc_entries:
        p = Path("/etc", name)
        if p.exists():  # follows links, as bwrap does: resolv.conf often points outside /etc
            args += ["--ro-bind", str(p), str(p)]
    return args


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, gateway_origin: str, bwrap: str = "bwrap") -> None:
        self._origin = gateway_origin.rstrip("/")
        self._bwrap = bwrap

    def gateway_url(self, backend: str) -> str:
        return f"{self._origin}{gateway_path(backend)}"

    def command(self, invocation: Invocation, mounts: SessionMounts, info_fd: int) -> list[str]:
        """The full bwrap argv (without the executable) for `invocation`."""
        args = [
            "--unshare-all",
            "--share-net",  # see the module docstring: the gateway is on loopback
            "--die-with-parent",
            "--cap-drop",
            "ALL",  # as root, bwrap would otherwise leave the child every capability
            "--hostname",
            "uhp-sandbox",
            "--info-fd",
            str(info_fd),
            *system_binds(_ETC_ENTRIES),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--ro-bind",
            str(mounts.tools),
            self.paths.tools,
            "--bind",
            str(mounts.workspace),
            self.paths.workspace,
            "--bind",
            str(mounts.home),
            self.paths.home,
            # The root is bwrap's scratch tmpfs; read-only, so /etc and friends stay as bound.
            "--remount-ro",
            "/",
            "--clearenv",
        ]
        for key, value in invocation.env.items():
            args += ["--setenv", key, value]
        args += ["--chdir", invocation.cwd, "--", *invocation.argv]
        return args

    def _preflight(self, invocation: Invocation, mounts: SessionMounts) -> None:
        # bwrap reports a missing program or cwd only by exiting 1 after it started, which
        # looks like a CLI that failed; check the usual suspects here instead.
        exe = self.host_path(invocation.argv[0], mounts)
        if exe is not None and not os.access(exe, os.X_OK):
            raise SandboxError(f"program not found or not executable: {invocation.argv[0]}")
        cwd = self.host_path(invocation.cwd, mounts)
        if cwd is not None and not cwd.is_dir():
            raise SandboxError(f"working directory missing: {invocation.cwd}")

    def _argv(self, invocation: Invocation, mounts: SessionMounts, info_fd: int) -> list[str]:
        """Check what the sandbox needs and build bwrap's argv (disk work: run off the loop)."""
        exe = shutil.which(self._bwrap)
        if exe is None:
            raise SandboxError(f"bubblewrap not found: {self._bwrap}")
        if not invocation.argv:
            raise SandboxError("empty argv")
        if not mounts.tools.is_dir():
            raise SandboxError(f"tools folder missing: {mounts.tools}")
        for folder in (mounts.workspace, mounts.home):
            folder.mkdir(parents=True, exist_ok=True)
        self._preflight(invocation, mounts)
        return [exe, *self.command(invocation, mounts, info_fd)]

    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        # bwrap writes the child's pid to info_fd once it has created the namespaces; EOF
        # without it means it could not (e.g. namespaces not permitted here). Mount and exec
        # failures come later and look like an exit code of 1: _preflight covers the usual.
        info_r, info_w = os.pipe()
        try:
            argv = await asyncio.to_thread(self._argv, invocation, mounts, info_w)
            proc = await spawn(
                argv,
                start_new_session=True,  # own process group: kill() signals all of it
                pass_fds=(info_w,),
                limit=STDOUT_LINE_LIMIT,
                env={},  # bwrap itself needs nothing from the server's environment
            )
        except OSError as exc:
            os.close(info_r)
            raise SandboxError(f"cannot run bubblewrap: {exc}") from exc
        except BaseException:
            os.close(info_r)
            raise
        finally:
            os.close(info_w)

        sandboxed = LocalProcess(proc)
        try:
            info = await _read_info(info_r)
        except BaseException:  # cancelled while starting: leave nothing running
            await asyncio.shield(sandboxed.kill())
            raise
        if "child-pid" not in info:
            code = await sandboxed.kill_and_wait()
            raise SandboxError(f"bubblewrap failed ({code}): {sandboxed.stderr_tail().strip()}")
        return sandboxed


async def _read_info(fd: int) -> dict:
    """bwrap's --info-fd JSON, or {} when it closed the pipe (or hung) without writing it."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0)
    )
    data = b""
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while chunk := await reader.read(4096):
                data += chunk
                with contextlib.suppress(ValueError):
                    return json.loads(data)
    except TimeoutError:
        log.warning("bubblewrap did not report its child within %ss", START_TIMEOUT)
    finally:
        transport.close()
    return {}


class LocalProcess(SandboxedProcess):
    """A bwrap process. bwrap leads its own process group and holds a pid namespace whose
    init dies with it, so killing the group ends everything the agent started, including
    processes that called setsid() or ignore SIGHUP."""

    def __init__(self, proc: SpawnedProcess) -> None:
        self._proc = proc
        self._stderr = bytearray()
        # Drained in the background so a chatty stderr can never block the child.
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(65536):
            self._stderr += chunk
            if len(self._stderr) > STDERR_TAIL_BYTES:
                del self._stderr[:-STDERR_TAIL_BYTES]

    async def write(self, data: bytes) -> None:
        """Raises ConnectionError (e.g. BrokenPipeError) when the process stopped reading."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def close_stdin(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(ConnectionError):
                await stdin.wait_closed()

    async def lines(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while True:
            try:
                line = await self._proc.stdout.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # EOF; maybe a last unterminated line
                if exc.partial:
                    yield exc.partial
                return
            except asyncio.LimitOverrunError as exc:
                raise SandboxError(f"stdout line longer than {STDOUT_LINE_LIMIT} bytes") from exc
            yield line[:-1]

    def stderr_tail(self) -> str:
        return self._stderr[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")

    async def wait(self) -> int:
        code = await self._proc.wait()
        # stderr closes when the sandbox is gone; give the reader a moment to catch the end.
        await asyncio.wait({self._stderr_task}, timeout=2.0)
        return code

    async def kill(self) -> None:
        if self._proc.returncode is None:
            # Only while unreaped: after that the pgid could belong to someone else.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        await self.wait()

    async def kill_and_wait(self) -> int:
        await self.kill()
        return await self.wait()
