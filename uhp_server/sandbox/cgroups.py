"""Control groups for the local sandbox: per-turn memory and process limits, and one CPU
group shared by every turn.

The server makes one cgroup per turn under its own, puts the sandbox in it before the
agent's program starts, and reads the kernel's counters to tell when a limit was hit.
Every turn also joins one CPU group, weighted well below the server: fifty agents starting
at once then compete with the server as one, and the server keeps answering (requests,
cancels, the agents' own model calls) however many turns run. The weight only matters under
contention: idle CPU still all goes to the agents. (cgroup v1 only for now; on v2 the agents
still start at nice 10, sandbox/spawn.py.)
Both hierarchies exist in the wild: cgroup v1 (one mount per controller, e.g. inside many
Docker hosts) and v2 (one unified mount). Creating cgroups needs root, or a delegated v2
subtree; without either, `detect` returns None and says so in a log line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
REMOVE_TIMEOUT = 5.0  # the killed sandbox's processes take a moment to leave
# Every turn together weighs this much against a process of the server (1024, nice 0): an
# eighth, so the server's loop gets most of a core when it wants one.
TURNS_CPU_SHARES = 128
# How many times a pause moves the processes left out into the freezer before giving up.
FREEZE_ROUNDS = 20
# An empty cgroup of another server this old is a killed server's leftover.
STALE_SECONDS = 120.0


@dataclass(frozen=True)
class Hierarchy:
    """Where turn cgroups go: one parent folder per controller (v1), or one for both (v2)."""

    version: int
    memory_parent: Path
    pids_parent: Path
    # Where the turns' shared CPU group goes (v1's cpu hierarchy). None on v2, whose one
    # cgroup per process would need the turn cgroups nested inside that group: not built yet.
    cpu_parent: Path | None = None
    # Where a turn's freezer cgroup goes when it is paused (v1's freezer hierarchy); v2
    # freezes the turn's own cgroup (`cgroup.freeze`).
    freezer_parent: Path | None = None

    def cpu_pool(self, name: str) -> Path | None:
        """The CPU group `name` every turn joins (made if missing), or None without a cpu
        controller. Raises OSError."""
        if self.cpu_parent is None:
            return None
        pool = self.cpu_parent / name
        _make_cpu_pool(pool)
        return pool

    def create(
        self, name: str, memory_bytes: int, pids: int, cpu_pool: Path | None = None
    ) -> TurnCgroup:
        """A new cgroup `name` with the given limits (0: none), in `cpu_pool` for the CPU.
        Raises OSError."""
        memory_dir = self.memory_parent / name
        pids_dir = self.pids_parent / name
        dirs = [memory_dir] if memory_dir == pids_dir else [memory_dir, pids_dir]
        for folder in dirs:
            folder.mkdir()
        freezer_dir = self.freezer_parent / name if self.freezer_parent is not None else None
        group = TurnCgroup(self.version, memory_dir, pids_dir, cpu_pool, freezer_dir)
        try:
            group.set_limits(memory_bytes, pids)
        except OSError:
            group.remove()
            raise
        return group

    def remove_empty(self, prefix: str, family: str) -> None:
        """Remove the cgroups a killed server left: this server's (`prefix`*) when empty, and
        any other server's (`family`*: a server killed for good leaves them forever) when
        empty and older than STALE_SECONDS — never another server's just-made cgroup, which
        is empty for the moment its turn takes to start. The kernel refuses to remove a
        cgroup that still holds a process."""
        parents = {self.memory_parent, self.pids_parent}
        parents.update(p for p in (self.cpu_parent, self.freezer_parent) if p is not None)
        stale_before = time.time() - STALE_SECONDS
        for parent in parents:
            for leftover in parent.glob(f"{family}*"):
                with contextlib.suppress(OSError):
                    if leftover.name.startswith(prefix) or leftover.stat().st_mtime < stale_before:
                        leftover.rmdir()


class TurnCgroup:
    """One turn's cgroup (on v1, a folder in each of the memory and pids hierarchies)."""

    def __init__(
        self,
        version: int,
        memory_dir: Path,
        pids_dir: Path,
        cpu_pool: Path | None = None,
        freezer_dir: Path | None = None,
    ) -> None:
        self.version = version
        self.memory_dir = memory_dir
        self.pids_dir = pids_dir
        self.cpu_pool = cpu_pool  # shared by every turn: never removed with this one
        # v1: made only when the turn is first paused (a move into a cgroup costs an RCU
        # grace period, which no turn's start should pay for a pause it may never need).
        self.freezer_dir = freezer_dir
        self.frozen = False

    @property
    def _dirs(self) -> list[Path]:
        same = self.memory_dir == self.pids_dir
        return [self.memory_dir] if same else [self.memory_dir, self.pids_dir]

    def set_limits(self, memory_bytes: int, pids: int) -> None:
        if memory_bytes:
            if self.version == 2:
                _write(self.memory_dir / "memory.max", memory_bytes)
                # Swap would let a hog run on far past the limit, only slower.
                _write_if_present(self.memory_dir / "memory.swap.max", 0)
            else:
                _write(self.memory_dir / "memory.limit_in_bytes", memory_bytes)
                _write_if_present(self.memory_dir / "memory.memsw.limit_in_bytes", memory_bytes)
        if pids:
            _write(self.pids_dir / "pids.max", pids)

    def add(self, pid: int) -> None:
        """Move process `pid` (not its existing children) into the cgroup."""
        for folder in self._dirs:
            _write(folder / "cgroup.procs", pid)
        if self.cpu_pool is not None:
            try:
                _write(self.cpu_pool / "cgroup.procs", pid)
            except FileNotFoundError:  # swept as stale by another server while this one idled
                _make_cpu_pool(self.cpu_pool)
                _write(self.cpu_pool / "cgroup.procs", pid)

    def freeze(self) -> bool:
        """Pause every process of the turn; False where this kernel cannot (no freezer)."""
        if self.version == 2:
            _write(self.memory_dir / "cgroup.freeze", 1)
            self.frozen = True
            return True
        if self.freezer_dir is None:
            return False
        self.freezer_dir.mkdir(exist_ok=True)
        # Every process of the turn into the freezer cgroup, again until none is left out:
        # a child forked while its parent moved is born outside, one forked after inside.
        for _ in range(FREEZE_ROUNDS):
            inside = set(_pids(self.freezer_dir))
            outside = [
                pid for pid in _pids(self.memory_dir) if pid not in inside and not _exiting(pid)
            ]
            if not outside:
                break
            for pid in outside:
                with contextlib.suppress(ProcessLookupError):  # gone meanwhile
                    _write(self.freezer_dir / "cgroup.procs", int(pid))
        else:
            return False  # a fork bomb outruns the moves: not paused, not kept
        (self.freezer_dir / "freezer.state").write_text("FROZEN")
        self.frozen = True
        return True

    def thaw(self) -> None:
        if not self.frozen:
            return
        if self.version == 2:
            _write(self.memory_dir / "cgroup.freeze", 0)
        elif self.freezer_dir is not None:
            (self.freezer_dir / "freezer.state").write_text("THAWED")
        self.frozen = False

    def memory_exceeded(self) -> bool:
        """True once the kernel killed a process of this cgroup for memory."""
        if self.version == 2:
            return _counter(self.memory_dir / "memory.events", "oom_kill") > 0
        return _counter(self.memory_dir / "memory.oom_control", "oom_kill") > 0

    def pids_exceeded(self) -> bool:
        """True once a fork or clone in this cgroup failed at the process limit."""
        return _counter(self.pids_dir / "pids.events", "max") > 0

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (waits up to REMOVE_TIMEOUT)."""
        deadline = time.monotonic() + REMOVE_TIMEOUT
        made = [self.freezer_dir] if self.freezer_dir and self.freezer_dir.exists() else []
        for folder in [*self._dirs, *made]:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: a process is still leaving
                    if time.monotonic() > deadline:
                        log.warning("cgroup_not_removed", extra={"cgroup": str(folder)})
                        break
                    time.sleep(0.02)


def detect() -> Hierarchy | None:
    """The hierarchy turn cgroups can be made in, or None (logged) when there is none."""
    if os.geteuid() != 0:
        _unavailable("the server does not run as root")
        return None
    own = _own_cgroups()
    if (ROOT / "cgroup.controllers").is_file():  # v2 mounted at the root: unified only
        return _v2(ROOT / own.get("", "/").lstrip("/"))
    memory, pids, cpu, freezer = ROOT / "memory", ROOT / "pids", ROOT / "cpu", ROOT / "freezer"
    # (The root of a v1 pids hierarchy has no pids.max of its own.)
    if (memory / "memory.limit_in_bytes").is_file() and (pids / "cgroup.procs").is_file():
        return _probe(
            Hierarchy(
                1,
                memory / own.get("memory", "/").lstrip("/"),
                pids / own.get("pids", "/").lstrip("/"),
                cpu / own.get("cpu", "/").lstrip("/") if (cpu / "cpu.shares").is_file() else None,
                freezer / own.get("freezer", "/").lstrip("/")
                if (freezer / "cgroup.procs").is_file()
                else None,
            )
        )
    _unavailable("no memory and pids cgroup controllers are mounted")
    return None


def _v2(parent: Path) -> Hierarchy | None:
    control = parent / "cgroup.subtree_control"
    try:
        enabled = control.read_text().split()
        missing = [c for c in ("memory", "pids") if c not in enabled]
        if missing:
            control.write_text(" ".join(f"+{c}" for c in missing))
    except OSError as exc:
        # Typically EBUSY: the server's own cgroup holds processes (v2's "no internal
        # processes" rule); run it under a delegated cgroup (systemd Delegate=yes).
        _unavailable(f"cannot enable the memory and pids controllers below {parent}: {exc}")
        return None
    return _probe(Hierarchy(2, parent, parent))


def _probe(hierarchy: Hierarchy) -> Hierarchy | None:
    try:
        hierarchy.create(f"uhp-probe-{os.getpid()}", 0, 0).remove()
    except OSError as exc:
        _unavailable(f"cannot create cgroups: {exc}")
        return None
    log.info("sandbox_cgroups", extra={"cgroup_version": hierarchy.version})
    return hierarchy


def _unavailable(why: str) -> None:
    log.warning(
        "sandbox_cgroups_unavailable: memory and process limits are not enforced "
        "(file size and workspace disk limits are)",
        extra={"reason": why},
    )


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for the v2 hierarchy)."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                found[controller] = path
    return found


def _make_cpu_pool(pool: Path) -> None:
    """The turns' shared CPU group at `pool` (made if missing), weighted below the server."""
    pool.mkdir(exist_ok=True)
    _write(pool / "cpu.shares", TURNS_CPU_SHARES)


def _pids(folder: Path) -> list[str]:
    return folder.joinpath("cgroup.procs").read_text().split()


# A task's flags in /proc/<pid>/task/<tid>/stat (the 9th field) and the one set once it is
# exiting.
STAT_FLAGS_FIELD, PF_EXITING = 6, 0x4  # the field counted after the command's ")"


def _exiting(pid: str) -> bool:
    """Whether every thread of the process is gone or on its way out. The kernel moves no
    exiting task between cgroups (the write succeeds and it stays), and such a task runs no
    code of its own again, so a pause need not wait for it. Every thread, not the leader
    alone: a leader that ended by itself (pthread_exit) is a zombie with PF_EXITING while
    its other threads run on, and writing its pid is what moves them into the freezer."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(_task_exiting(f"/proc/{pid}/task/{tid}/stat") for tid in tids)


def _task_exiting(stat_path: str) -> bool:
    try:
        stat = Path(stat_path).read_bytes()  # bytes: the command is the agent's, any bytes
    except OSError:
        return True  # gone meanwhile
    try:
        fields = stat.rsplit(b")", 1)[1].split()
        return fields[0] in (b"Z", b"X") or bool(int(fields[STAT_FLAGS_FIELD]) & PF_EXITING)
    except (IndexError, ValueError):
        return False  # not understood: not out of the way (the pause waits, as before)


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))


def _write_if_present(path: Path, value: int) -> None:
    if path.exists():
        _write(path, value)


def _counter(path: Path, name: str) -> int:
    """The value of `name` in a flat-keyed cgroup file ("name value" lines); 0 if absent."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0
