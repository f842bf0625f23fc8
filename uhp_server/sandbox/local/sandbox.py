"""The local sandbox: bubblewrap on the server's own machine.

Isolates the filesystem (read-only system, only the session's folders writable, nothing
else of the host visible, /proc's host-wide entries read-only), processes, IPC, hostname,
cgroups and the network, drops every capability, and never runs the agent as root
(hardening.py). The sandbox has its own network namespace with nothing but loopback: a
relay inside (socat) turns 127.0.0.1:GATEWAY_PORT into the turn's own gateway socket, and,
when the operator allows egress, 127.0.0.1:EGRESS_PROXY_PORT into the egress proxy's
(sockets.py). Memory, processes, file size and workspace disk are limited (sandbox/limits.py).

The agent's environment (its gateway token among it) is bwrap's own environment, never its
command line: /proc/<pid>/environ is readable by the same uid only, while every local user
sees command lines.

Every cgroup this server makes is named uhp-<its id>-…, the id kept in its data folder, so
that a starting server clears what it left itself and never another server's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import resource
import secrets
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any

from harness_bases import compile_cache
from harness_bases.base import HarnessBase, Invocation
from uhp_server.gateway.paths import gateway_path
from uhp_server.ops.replica_id import stored_id
from uhp_server.sandbox import cgroups, neutral_mounts
from uhp_server.sandbox.agent_user import DEFAULT_UID_RANGE, AgentUsers, account_files
from uhp_server.sandbox.base import (
    ExtraMount,
    Sandbox,
    SandboxedProcess,
    SandboxError,
    SessionMounts,
)
from uhp_server.sandbox.egress import EGRESS_PROXY_PORT, EgressPolicy, with_proxy
from uhp_server.sandbox.gateway_door import ASGIApp, wound_down
from uhp_server.sandbox.limits import LimitWatch, LocalLimits, parse_size
from uhp_server.sandbox.local import netns, seccomp
from uhp_server.sandbox.local.hardening import (
    mount_parent_args,
    namespace_args,
    proc_guard_args,
    switch_user_argv,
    switches_user,
)
from uhp_server.sandbox.local.process import STDOUT_LINE_LIMIT, LocalProcess
from uhp_server.sandbox.local.ready_pool import FIRST_FD, ReadyPool, ReadySlot
from uhp_server.sandbox.local.sockets import (
    EGRESS_SOCKET,
    GATEWAY_SOCKET,
    INSIDE_DIR,
    TurnSockets,
    fits_socket_path,
    run_dir,
)
from uhp_server.sandbox.neutral_mounts import (
    NeutralMounts,
    TurnMounts,
    mount_session,
    mounted_off_loop,
)
from uhp_server.sandbox.ownership import hand_over
from uhp_server.sandbox.spawn import spawn
from uhp_server.settings import Settings

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0
CGROUP_PREFIX = "uhp-"  # + the server's id + "-" + the door: uhp-<id>-local-<response id>
CPU_POOL = "cpu"  # the CPU group every turn of this server joins: uhp-<id>-cpu
ID_FILE = "local-sandbox-id"  # its own, as earlier releases kept it: cgroups carry it
GATEWAY_PORT = 8080  # the gateway inside the sandbox: 127.0.0.1:8080, as in the docker one

# Runs first in the sandbox: start the relays, wait (about 2 s at most) until their ports
# listen so the CLI's first request finds them, then become the CLI. `nodelay`: a reply the
# gateway writes in two parts must not wait for the CLI's delayed ACK (netns.py).
# argv: sh -c LAUNCH uhp-launch GATEWAY_PORT EGRESS_PORT|"" PROGRAM [ARG...]
LAUNCH = f"""set -eu
gateway_port=$1; egress_port=$2; shift 2
relay() {{
  socat "TCP-LISTEN:$1,bind=127.0.0.1,fork,reuseaddr,nodelay" "UNIX-CONNECT:{INSIDE_DIR}/$2" &
  hex=$(printf '%04X' "$1"); tries=0
  until grep -q "^ *[0-9]*: 0100007F:$hex 00000000:0000 0A" /proc/net/tcp; do
    tries=$((tries + 1))
    [ "$tries" -gt 400 ] && {{ echo "uhp-launch: relay to $2 did not start" >&2; exit 70; }}
    sleep 0.005
  done
}}
relay "$gateway_port" {GATEWAY_SOCKET}
[ -z "$egress_port" ] || relay "$egress_port" {EGRESS_SOCKET}
exec "$@"
"""

SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib32", "/lib64", "/sbin")
# Only what programs need to resolve names, trust TLS and load libraries; /etc/passwd and
# /etc/group are the sandbox's own (agent_user.account_files).
# No resolv.conf: the sandbox has no DNS (the egress proxy resolves names server-side).
_ETC_ENTRIES = (
    "ssl",
    "hosts",
    "nsswitch.conf",
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
    keeps_processes_warm = True  # tests/test_warm_sessions_e2e.py

    def __init__(
        self,
        run_dir: Path | None = None,
        *,
        bwrap: str = "bwrap",
        limits: LocalLimits = LocalLimits(),  # noqa: B008 (frozen, shared safely)
        egress: EgressPolicy = EgressPolicy(),  # noqa: B008 (frozen, shared safely)
        user: str = "auto",
        server_id: str | None = None,
        data_dir: Path | None = None,
        uid_range: str = DEFAULT_UID_RANGE,
        relays: bool | None = None,
        ready_pool: int = 0,
    ) -> None:
        """`data_dir`: where the sessions' folders are (to check an overlay can sit there,
        neutral_mounts.py); None: beside `run_dir`. `relays`: reach the gateway through
        relays in the sandbox to a socket folder (LAUNCH), as an unprivileged server must;
        None: only then (a root server listens in the sandbox itself: netns.py).
        `ready_pool`: how many turn cgroups to keep ready, each holding the process that
        becomes its bwrap (ready_pool.py; needs cgroups; 0: none)."""
        # Tests run sandboxes without a server: then a private temp folder holds the turns'
        # socket folders.
        self._run_dir = run_dir or Path(tempfile.mkdtemp(prefix="uhp-local-"))
        self._data_dir = data_dir or self._run_dir.parent
        self._server_id = server_id or secrets.token_hex(8)
        self._neutral: NeutralMounts | None = None
        self._neutral_detected = False
        self._neutral_lock = threading.Lock()  # detection clears stale mounts: only once
        self._bwrap = bwrap
        self.limits = limits
        self.egress = egress
        self.users: AgentUsers = AgentUsers.from_settings(user, "UHP_LOCAL_SANDBOX_USER", uid_range)
        self.user = self.users.default  # a turn's own: users.for_principal
        self.cgroup_prefix = f"{CGROUP_PREFIX}{self._server_id}-"
        self._gateway_app: ASGIApp | None = None
        # Detected even without memory and process limits: every turn joins the CPU pool.
        self._cgroups: cgroups.Hierarchy | None = cgroups.detect()
        self._cpu_pool: Path | None = None
        # A sandbox with a user namespace of its own (an unprivileged server's) cannot be
        # entered: netns.py.
        self.relays = (
            relays if relays is not None else not (netns.can_enter() and switches_user(self.user))
        )
        self._ready_size = ready_pool
        self._ready: ReadyPool | None = None

    @classmethod
    def from_settings(cls, settings: Settings, bases: Collection[HarnessBase] = ()) -> LocalSandbox:
        """Its UHP_LOCAL_SANDBOX_* and UHP_EGRESS_* settings; it runs every base's CLI from
        the host's tools folder as it is, so `bases` needs nothing."""
        limits = LocalLimits(
            memory_bytes=parse_size(settings.local_sandbox_memory),
            pids=settings.local_sandbox_pids_limit,
            file_size_bytes=parse_size(settings.local_sandbox_file_size),
            disk_bytes=parse_size(settings.local_sandbox_disk),
        )
        egress = EgressPolicy.from_settings(
            settings.egress_allow_hosts, settings.egress_allow_private_hosts
        )
        # Replicas sharing a data folder each clear only their own turn folders at start.
        own = settings.data_dir / "replicas" / settings.replica_id if settings.replica_id else None
        return cls(
            run_dir(own or settings.data_dir),
            limits=limits,
            egress=egress,
            user=settings.local_sandbox_user,
            uid_range=settings.agent_uid_range,
            # Replicas sharing a data folder each clear only their own cgroups.
            server_id=settings.replica_id or stored_id(settings.data_dir, ID_FILE),
            data_dir=settings.data_dir,
            ready_pool=settings.local_ready_pool,
        )

    def gateway_url(self, backend: str) -> str:
        return f"http://127.0.0.1:{GATEWAY_PORT}{gateway_path(backend)}"

    def door(self, turn_id: str) -> str | None:
        return f"local:{turn_id}"

    async def open(self, gateway_app: ASGIApp | None) -> None:
        """(None: no gateway, as in the sandbox's own tests; its requests answer 404.)"""
        if self.relays and shutil.which("socat") is None:
            raise SandboxError("socat not found: the local sandbox relays the gateway with it")
        try:  # compiled once, off the loop: a server that cannot filter says so at start
            await asyncio.to_thread(seccomp.program)
        except seccomp.SeccompError as exc:
            raise SandboxError(f"cannot build the syscall filter: {exc}") from exc
        self._run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._run_dir.chmod(0o700)
        # What a killed server left: no turn of this server can be running yet.
        for stale in self._run_dir.iterdir():
            shutil.rmtree(stale, ignore_errors=True)
        await asyncio.to_thread(self._detect_neutral_mounts)
        if self._cgroups is not None:
            await asyncio.to_thread(self._cgroups.remove_empty, self.cgroup_prefix, CGROUP_PREFIX)
            self._cpu_pool = await asyncio.to_thread(self._open_cpu_pool, self._cgroups)
            if self._ready_size > 0:
                self._ready = ReadyPool(
                    self._ready_size, self._ready_cgroup, self.cgroup_prefix, STDOUT_LINE_LIMIT
                )
                self._ready.open()
        self._gateway_app = gateway_app

    def _ready_cgroup(self, name: str) -> cgroups.TurnCgroup:
        """A ready slot's cgroup: no limit until a turn takes it (ready_pool.py)."""
        assert self._cgroups is not None
        return self._cgroups.create(name, 0, 0, self._cpu_pool)

    def _open_cpu_pool(self, hierarchy: cgroups.Hierarchy) -> Path | None:
        try:
            return hierarchy.cpu_pool(self.cgroup_prefix + CPU_POOL)
        except OSError as exc:
            log.warning("sandbox_cpu_pool_unavailable", extra={"reason": str(exc)})
            return None

    async def close(self) -> None:
        if self._ready is not None:
            await self._ready.close()
        await wound_down()
        if self._cpu_pool is not None:  # empty once every turn is gone; else the next start's
            with contextlib.suppress(OSError):
                self._cpu_pool.rmdir()

    def command(
        self,
        invocation: Invocation,
        mounts: SessionMounts,
        sockets: Path | None,
        info_fd: int,
        block_fd: int,
        seccomp_fd: int,
        user: tuple[int, int] | None = None,
        files: Mapping[str, int] | None = None,
    ) -> list[str]:
        """The full bwrap argv (without the executable) for `invocation`, its agent running
        as `user` (None: the default), with `files` (a path -> the fd bwrap reads its
        contents from; account_files') mounted read-only, and the relays to the `sockets`
        folder (None: the server listens in the sandbox itself, netns.py). It holds no
        secret: the environment travels as bwrap's own (see the module docstring)."""
        user = user or self.user
        file_args = [
            arg
            for path, fd in (files or {}).items()
            for arg in ("--perms", "0644", "--ro-bind-data", str(fd), path)
        ]
        launch = switch_user_argv(user)
        relays: list[str] = []
        if sockets is not None:  # the relays to the socket folder run first
            egress_port = str(EGRESS_PROXY_PORT) if self.egress.enabled else ""
            launch += ["/bin/sh", "-c", LAUNCH, "uhp-launch", str(GATEWAY_PORT), egress_port]
            relays = ["--ro-bind", str(sockets), INSIDE_DIR]
        binds = [
            *system_binds(_ETC_ENTRIES),
            *("--ro-bind", str(mounts.tools), self.paths.tools),
            *("--bind", str(mounts.workspace), self.paths.workspace),
            *("--bind", str(mounts.home), self.paths.home),
            *relays,
            *(arg for extra in mounts.extra for arg in extra_bind(extra)),
        ]
        return [
            # The network too (loopback only); as root, bwrap would otherwise leave the child
            # every capability.
            *namespace_args(user),
            "--die-with-parent",
            "--hostname",
            "uhp-sandbox",
            "--info-fd",
            str(info_fd),
            # Waits until the server has put the sandbox in its cgroup and set its limits.
            "--block-fd",
            str(block_fd),
            # The syscall filter (sandbox/syscall_filter.py), installed once the sandbox is
            # set up, just before the launcher (and setpriv's uid switch) runs.
            "--seccomp",
            str(seccomp_fd),
            *mount_parent_args(binds),
            *binds,
            *file_args,
            "--proc",
            "/proc",
            *proc_guard_args(),
            "--dev",
            "/dev",
            # bwrap's /dev/shm is root's 0755 folder: POSIX shared memory and semaphores
            # (Python's multiprocessing locks) need a writable one, private to the sandbox.
            "--perms",
            "1777",
            "--tmpfs",
            "/dev/shm",
            "--perms",
            "1777",  # bwrap makes it root's: the agent's uid must write it too
            "--tmpfs",
            "/tmp",
            # The root is bwrap's scratch tmpfs; read-only, so /etc and friends stay as bound.
            "--remount-ro",
            "/",
            "--chdir",
            invocation.cwd,
            "--",
            *launch,
            *invocation.argv,
        ]

    def _preflight(self, invocation: Invocation, mounts: SessionMounts) -> None:
        # bwrap reports a missing program or cwd only by exiting 1 after it started, which
        # looks like a CLI that failed; check the usual suspects here instead.
        exe = self.host_path(invocation.argv[0], mounts)
        if exe is not None and not os.access(exe, os.X_OK):
            raise SandboxError(f"program not found or not executable: {invocation.argv[0]}")
        cwd = self.host_path(invocation.cwd, mounts)
        if cwd is not None and not cwd.is_dir():
            raise SandboxError(f"working directory missing: {invocation.cwd}")

    def _check(self, invocation: Invocation, mounts: SessionMounts, user: tuple[int, int]) -> str:
        """What the sandbox needs, checked (disk work: run off the loop); bwrap's path."""
        exe = shutil.which(self._bwrap)
        if exe is None:
            raise SandboxError(f"bubblewrap not found: {self._bwrap}")
        compile_cache.for_user(mounts.tools, user[0])
        if self.relays and shutil.which("socat") is None:
            raise SandboxError("socat not found: the local sandbox relays the gateway with it")
        if not invocation.argv:
            raise SandboxError("empty argv")
        if not mounts.tools.is_dir():
            raise SandboxError(f"tools folder missing: {mounts.tools}")
        for folder in (mounts.workspace, mounts.home):
            folder.mkdir(parents=True, exist_ok=True)
        if switches_user(user):  # what the server wrote (the CLI's config) is root's
            hand_over(*user, mounts.workspace, mounts.home)
        self._preflight(invocation, mounts)
        return exe

    async def start(self, invocation: Invocation, mounts: SessionMounts) -> SandboxedProcess:
        try:
            user = self.users.for_principal(mounts.agent_number)
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        exe = await asyncio.to_thread(self._check, invocation, mounts, user)

        door = mounts.door or f"local:unbound-{secrets.token_hex(8)}"
        neutral = await mounted_off_loop(functools.partial(self._mount_neutral, mounts))
        # Beside the turn's overlays, the socket folder's path shows no data folder either.
        sockets_parent = self._run_dir
        if neutral is not None and fits_socket_path(neutral.staging):
            sockets_parent = neutral.staging
        sockets = TurnSockets(sockets_parent, door, self.egress)
        group: cgroups.TurnCgroup | None = None
        # A cgroup made ahead, its bwrap-to-be inside; None: made now (a cold start).
        slot = self._ready.take() if self._ready is not None else None

        async def cleanup() -> None:  # idempotent: also runs when starting failed
            await sockets.close()
            if group is not None:
                await asyncio.to_thread(group.remove)
            if neutral is not None:  # the sandbox is gone: nothing holds the overlays
                await asyncio.to_thread(neutral.unmount)

        opening: asyncio.Future[None] | None = None
        try:
            if self.relays:
                # The doors start serving in the folder while bwrap starts (_spawn waits for
                # them before it lets the sandbox go).
                sockets.make_folder()
                opening = asyncio.ensure_future(self._open_sockets(sockets, user))
                doors = functools.partial(_already, opening)
            else:  # served in the sandbox's own network namespace, once bwrap has made it
                doors = functools.partial(
                    sockets.open_inside, app=self._gateway_app, ports=self._ports
                )
            limits = self.limits.over(mounts.limits)
            if slot is None:
                group = self._cgroup(door, limits)
            else:
                group = slot.group
                await asyncio.to_thread(_limit, group, limits)
            # The disk watch reads the real folders: reading under an overlay is allowed.
            # A writable further folder counts too (an environment's version, in its build).
            written = [extra.source for extra in mounts.extra if extra.writable]
            watch = LimitWatch(limits, group, [mounts.workspace, mounts.home, *written])
            binds = neutral_mounts.bound(mounts, neutral)
            folder = sockets.folder if self.relays else None
            return await self._spawn(
                exe, invocation, binds, folder, watch, cleanup, user, doors, slot
            )
        except BaseException as exc:
            if opening is not None:
                opening.cancel()
                await asyncio.gather(opening, return_exceptions=True)
            if slot is not None:  # its stub (or the bwrap it became) goes before its cgroup
                await asyncio.shield(slot.discard())
            await asyncio.shield(cleanup())
            if isinstance(exc, OSError):
                raise SandboxError(f"cannot prepare the sandbox: {exc}") from exc
            raise

    @property
    def _ports(self) -> tuple[int, int]:
        """Where the sandbox's CLI finds the gateway and the egress proxy, on its loopback."""
        return (GATEWAY_PORT, EGRESS_PROXY_PORT)

    async def _open_sockets(self, sockets: TurnSockets, user: tuple[int, int]) -> None:
        await sockets.open(self._gateway_app)
        if switches_user(user):  # the agent's uid must enter the folder and connect
            hand_over(*user, sockets.folder)

    def _detect_neutral_mounts(self) -> None:
        """Once, at open() (or the first turn of a sandbox never opened, as in tests)."""
        with self._neutral_lock:
            if not self._neutral_detected:
                self._neutral = NeutralMounts.detect(self._data_dir, self._server_id)
                self._neutral_detected = True

    def _mount_neutral(self, mounts: SessionMounts) -> TurnMounts | None:
        """The turn's overlays (neutral_mounts.mount_session), or None."""
        self._detect_neutral_mounts()
        return mount_session(self._neutral, mounts)

    def _cgroup(self, door: str, limits: LocalLimits | None = None) -> cgroups.TurnCgroup | None:
        if self._cgroups is None:
            return None
        limits = limits or self.limits
        name = self.cgroup_prefix + door.replace(":", "-").replace("/", "-")[:80]
        try:
            return self._cgroups.create(name, limits.memory_bytes, limits.pids, self._cpu_pool)
        except OSError as exc:
            raise SandboxError(f"cannot create the sandbox's cgroup: {exc}") from exc

    async def _spawn(
        self,
        exe: str,
        invocation: Invocation,
        mounts: SessionMounts,
        sockets: Path | None,
        watch: LimitWatch,
        cleanup: Callable[[], Awaitable[None]],
        user: tuple[int, int],
        doors: Callable[[int], Coroutine[Any, Any, None]],
        slot: ReadySlot | None = None,
    ) -> LocalProcess:
        """Start bwrap, put it under the limits before the agent's program runs, let it go
        once `doors(its child's pid)` has its doors serving too. `sockets`: the turn's socket
        folder, for the relays; None: the doors listen in the sandbox's network namespace.
        `slot`: a ready slot whose stub becomes bwrap, inside its cgroup already.

        bwrap writes the child's pid to info_fd once it has created the namespaces; EOF
        without it means it could not (e.g. namespaces not permitted here). Mount and exec
        failures come later and look like an exit code of 1: _preflight covers the usual."""
        try:
            # Compiled once per process; off the loop (libseccomp's lookup runs ldconfig) for
            # a sandbox that was never opened, as in its own tests.
            await asyncio.to_thread(seccomp.program)
            seccomp_r = seccomp.program_fd()
        except (seccomp.SeccompError, OSError) as exc:
            raise SandboxError(f"cannot build the syscall filter: {exc}") from exc
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        files = {
            path: _data_fd(data) for path, data in account_files(user, self.paths.home).items()
        }
        handed = (info_w, block_r, seccomp_r, *files.values())
        try:
            if slot is None:
                argv = self.command(
                    invocation, mounts, sockets, info_w, block_r, seccomp_r, user, files
                )
                proc = await spawn(
                    [exe, *argv],
                    start_new_session=True,  # own process group: kill() signals all of it
                    pass_fds=handed,
                    limit=STDOUT_LINE_LIMIT,
                    env=with_proxy(invocation.env, self.egress),
                )
            else:  # the stub renumbers what it is handed from FIRST_FD on, in this order
                at = {path: FIRST_FD + 3 + i for i, path in enumerate(files)}
                first = (FIRST_FD, FIRST_FD + 1, FIRST_FD + 2)
                argv = self.command(invocation, mounts, sockets, *first, user, at)
                env = with_proxy(invocation.env, self.egress)
                await slot.launch([exe, *argv], env, handed)
                proc = slot.proc
        except OSError as exc:
            os.close(info_r)
            os.close(block_w)
            raise SandboxError(f"cannot run bubblewrap: {exc}") from exc
        except BaseException:  # cancelled while starting: spawn() left nothing running
            os.close(info_r)
            os.close(block_w)
            raise
        finally:
            os.close(info_w)
            os.close(block_r)
            os.close(seccomp_r)
            for fd in files.values():
                os.close(fd)

        sandboxed = LocalProcess(proc, watch, cleanup)
        try:
            info = await _read_info(info_r)
            if "child-pid" not in info:
                code = await sandboxed.kill_and_wait()
                tail = sandboxed.stderr_tail().strip()
                raise SandboxError(f"bubblewrap failed ({code}): {tail}")
            child = info["child-pid"]
            # Off the loop: the kernel's first move into a cgroup (v1) waits out an RCU
            # grace period, some 10 ms here, which the doors' start overlaps.
            group = None if slot is not None else watch.cgroup  # born inside it
            await _both(asyncio.to_thread(self._apply_limits, group, proc.pid, child), doors(child))
            os.write(block_w, b"g")
        except BaseException:  # cancelled or failed while starting: leave nothing running
            await asyncio.shield(sandboxed.kill())
            raise
        finally:
            os.close(block_w)
        return sandboxed

    def _apply_limits(self, group: cgroups.TurnCgroup | None, *pids: int) -> None:
        """bwrap and its (still blocked) child go in the cgroup (None: they were born in it):
        all they start follows."""
        try:
            for pid in pids:
                if group is not None:
                    group.add(pid)
                if self.limits.file_size_bytes:
                    size = self.limits.file_size_bytes
                    resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, size))
        except OSError as exc:
            raise SandboxError(f"cannot limit the sandbox: {exc}") from exc


async def _both(*steps: Coroutine[Any, Any, None]) -> None:
    """Run the steps at once; the first failure cancels the others and is raised as it is
    (a SandboxError stays one)."""
    running = [asyncio.ensure_future(step) for step in steps]
    try:
        await asyncio.gather(*running)
    except BaseException:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise


def _limit(group: cgroups.TurnCgroup, limits: LocalLimits) -> None:
    try:
        group.set_limits(limits.memory_bytes, limits.pids)
    except OSError as exc:
        raise SandboxError(f"cannot limit the sandbox's cgroup: {exc}") from exc


def _data_fd(data: bytes) -> int:
    """A pipe's read end holding `data` (a few hundred bytes: the pipe's buffer takes them
    whole), for bwrap's --ro-bind-data."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, data)
    finally:
        os.close(write_end)
    return read_end


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


def extra_bind(extra: ExtraMount) -> tuple[str, str, str]:
    """bwrap's bind of a further folder: read-only unless it is writable."""
    return ("--bind" if extra.writable else "--ro-bind", str(extra.source), extra.target)


async def _already(started: Awaitable[None], _child: int) -> None:
    """Doors that started serving before bwrap did (the relays' socket folder)."""
    await started
