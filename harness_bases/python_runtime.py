"""A private CPython >= 3.12 for the bases whose CLI is a Python program that needs a newer
Python than Debian bookworm's 3.11 (Kimi CLI, OpenHands CLI).

No registry here serves an interpreter, but the host may have one (PATH's python3.13 or
python3.12, pyenv's versions, or the one `UHP_PYTHON` names). Inside a sandbox only `/usr` and
the tools folder (at /opt/uhp-tools) are visible, so each such CLI gets a copy of that
interpreter of its own under the tools folder, and is pip-installed into the copy itself:

- not a venv, whose `pyvenv.cfg` names the host interpreter's folder, which a sandbox cannot
  see; a copy finds its standard library from the path it was started by (CPython looks for
  `lib/pythonX.Y/os.py` above its executable before it falls back to the prefix it was built
  with);
- one copy per CLI, not one shared: two CLIs pinning different versions of the same library
  would otherwise overwrite each other's;
- a shared-library build (pyenv's) finds `libpython` through the RUNPATH its executable
  carries, the host folder it was built in: the copy's says `$ORIGIN/../lib` instead, so that
  it loads its own from wherever the copy is mounted.

Console scripts pip writes into the copy's `bin` carry the host path in their shebang, so a
CLI is never started through them: the sandbox runs `<copy>/bin/python3 -m <module>`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from harness_bases.installing import reported_version, run_install_command
from harness_bases.python_start import python_argv

MINIMUM = (3, 12)
PYTHON_ENV = "UHP_PYTHON"  # an interpreter to copy, when the host's are not to be searched
PATH_NAMES = ("python3.13", "python3.12")  # looked up on PATH, newest first
PROBE_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0
VERSION_TIMEOUT = 60.0
# The Debian (bookworm) libraries a copy's standard library loads (ssl, sqlite3, ctypes, the
# compressors, curses, readline, uuid, expat): the host has them, the runtime image needs them.
RUNTIME_LIBRARIES = (
    *("libssl3", "libsqlite3-0", "libffi8", "libbz2-1.0", "liblzma5", "zlib1g"),
    *("libncursesw6", "libtinfo6", "libreadline8", "libuuid1", "libexpat1"),
)
# What the copy's executable looks for its libpython in: its own lib folder, wherever it is.
RELATIVE_RUNPATH = b"$ORIGIN/../lib"
# Left out of the copy: the test suite (~130 MB), the static libpython (~60 MB, only for
# embedding), IDLE, and what the host installed into its site-packages.
_SKIPPED_IN_LIB = ("test", "idlelib", "turtledemo", "site-packages")

# Printed by a candidate interpreter about itself. sys.executable, not the path that was run:
# PATH's python3.12 is often a pyenv shim (a shell script) that execs the real one.
_PROBE = (
    "import json, sys, sysconfig; print(json.dumps({"
    "'version': list(sys.version_info[:3]), 'implementation': sys.implementation.name, "
    "'executable': sys.executable, 'prefix': sys.base_prefix, "
    "'shared': bool(sysconfig.get_config_var('Py_ENABLE_SHARED'))}))"
)


class PythonRuntimeError(RuntimeError):
    """No usable interpreter was found, or its copy does not run."""


@dataclass(frozen=True)
class HostPython:
    """An interpreter found on the host, as it describes itself."""

    executable: Path  # the real binary, below prefix
    prefix: Path  # its installation (sys.base_prefix)
    version: tuple[int, int, int]
    shared: bool  # built with a libpython shared library

    @property
    def short_version(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def dotted_version(self) -> str:
        return ".".join(str(part) for part in self.version)


def probe(command: str, below: tuple[int, int] | None = None) -> HostPython | str:
    """The interpreter `command` runs, or why it cannot be used (a short reason). `below`: a
    CLI's upper bound (exclusive), for one whose Requires-Python excludes newer versions."""
    try:
        result = subprocess.run(
            [command, "-I", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"does not run ({exc})"
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return f"does not run ({last})"
    try:
        facts = json.loads(result.stdout)
        found = HostPython(
            executable=Path(facts["executable"]),
            prefix=Path(facts["prefix"]),
            version=(facts["version"][0], facts["version"][1], facts["version"][2]),
            shared=bool(facts["shared"]),
        )
    except (ValueError, KeyError, IndexError, TypeError):
        return "did not describe itself"
    if facts["implementation"] != "cpython":
        return f"is {facts['implementation']}, not CPython"
    if found.version[:2] < MINIMUM:
        return f"is {found.dotted_version}, older than {'.'.join(map(str, MINIMUM))}"
    if below is not None and found.version[:2] >= below:
        return f"is {found.dotted_version}, not older than {'.'.join(map(str, below))}"
    if not found.executable.is_relative_to(found.prefix):
        return f"its executable {found.executable} is outside its prefix {found.prefix}"
    return found


def pyenv_versions(root: Path | None = None) -> list[Path]:
    """pyenv's installed CPython >= MINIMUM executables, newest first."""
    base = root or Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found: list[tuple[tuple[int, ...], Path]] = []
    for folder in (base / "versions").glob("*"):
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", folder.name)  # skips pypy-, miniconda-…
        if not match:
            continue
        version = tuple(int(part) for part in match.groups())
        executable = folder / "bin" / f"python{version[0]}.{version[1]}"
        if version[:2] >= MINIMUM and executable.is_file():
            found.append((version, executable))
    return [path for _, path in sorted(found, reverse=True)]


def candidates(
    environ: Mapping[str, str] | None = None, pyenv_root: Path | None = None
) -> list[str]:
    """The interpreters to try, in order: the one the setting names (then only that one),
    else PATH's python3.13 and python3.12, then pyenv's versions."""
    env = os.environ if environ is None else environ
    named = env.get(PYTHON_ENV, "").strip()
    if named:
        return [named]
    on_path = [found for name in PATH_NAMES if (found := shutil.which(name, path=env.get("PATH")))]
    return list(dict.fromkeys([*on_path, *map(str, pyenv_versions(pyenv_root))]))


def find_host_python(
    environ: Mapping[str, str] | None = None,
    pyenv_root: Path | None = None,
    below: tuple[int, int] | None = None,
) -> HostPython:
    """The first usable interpreter among the candidates (older than `below` when given);
    PythonRuntimeError naming each one tried and why it was not taken when there is none."""
    tried: list[str] = []
    for command in candidates(environ, pyenv_root):
        found = probe(command, below)
        if isinstance(found, HostPython):
            return found
        tried.append(f"{command}: {found}")
    minimum = ".".join(map(str, MINIMUM))
    looked = "; ".join(tried) or "no python3.13 or python3.12 on PATH and no pyenv versions"
    raise PythonRuntimeError(
        f"no CPython >= {minimum} found to copy into the tools folder ({looked}). "
        f"Install one (e.g. `pyenv install 3.13`) or name one in {PYTHON_ENV}."
    )


# -- making the copy ----------------------------------------------------------------------
def _ignored_in_lib(short_version: str) -> object:
    stdlib = f"python{short_version}"

    def ignore(folder: str, names: list[str]) -> set[str]:
        path = PurePosixPath(folder)
        skipped: set[str] = set()
        if path.name == stdlib:
            skipped |= {name for name in names if name in _SKIPPED_IN_LIB}
        if path.name.startswith("config-") and path.parent.name == stdlib:
            skipped |= {name for name in names if name.endswith(".a")}
        return skipped

    return ignore


def copy_interpreter(source: HostPython, target: Path) -> Path:
    """Copy the interpreter's executable, libpython and standard library to target (replaced
    when it exists) and make the copy find its libpython there. Returns the copy's python3."""
    if target.exists():
        shutil.rmtree(target)
    (target / "bin").mkdir(parents=True)
    executable = target / "bin" / f"python{source.short_version}"
    shutil.copy2(source.executable, executable)
    for alias in ("python3", "python"):
        (target / "bin" / alias).symlink_to(executable.name)
    lib = target / "lib"
    lib.mkdir()
    for library in (source.prefix / "lib").glob("libpython*.so*"):
        shutil.copy2(library, lib / library.name, follow_symlinks=False)
    shutil.copytree(
        source.prefix / "lib" / f"python{source.short_version}",
        lib / f"python{source.short_version}",
        symlinks=True,
        ignore=_ignored_in_lib(source.short_version),  # type: ignore[arg-type]
    )
    (lib / f"python{source.short_version}" / "site-packages").mkdir()
    if (source.prefix / "include").is_dir():  # for a dependency built from its sdist
        shutil.copytree(source.prefix / "include", target / "include", symlinks=True)
    if source.shared:
        set_runpath(executable, RELATIVE_RUNPATH)
    return target / "bin" / "python3"


def set_runpath(binary: Path, runpath: bytes) -> bool:
    """Rewrite a 64-bit little-endian ELF's RUNPATH (or RPATH) in place, as chrpath does: the
    new one must not be longer than the old (the string table keeps its size). Returns False
    when the binary has none (its libraries are then found in the system's folders)."""
    data = bytearray(binary.read_bytes())
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise PythonRuntimeError(f"{binary} is not a 64-bit little-endian ELF executable")
    strtab, paths = _dynamic_strings(data, binary)
    if not paths:
        return False
    for offset in paths:
        start = strtab + offset
        end = data.index(b"\0", start)
        if len(runpath) > end - start:
            raise PythonRuntimeError(
                f"{binary}'s RUNPATH {bytes(data[start:end])!r} is shorter than {runpath!r}"
            )
        data[start:end] = runpath.ljust(end - start, b"\0")
    temporary = binary.with_name(binary.name + ".uhp-new")
    temporary.write_bytes(bytes(data))
    shutil.copymode(binary, temporary)
    temporary.replace(binary)
    return True


def _dynamic_strings(data: bytearray, binary: Path) -> tuple[int, list[int]]:
    """The file offset of the dynamic string table and the offsets in it of the RPATH and
    RUNPATH entries (none for a static executable)."""
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads: list[tuple[int, int, int]] = []  # (virtual address, file offset, size)
    dynamic: tuple[int, int] | None = None
    for index in range(phnum):
        kind, _, offset, vaddr, _, filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + index * phentsize
        )
        if kind == 1:  # PT_LOAD
            loads.append((vaddr, offset, filesz))
        elif kind == 2:  # PT_DYNAMIC
            dynamic = (offset, filesz)
    if dynamic is None:
        return 0, []
    strtab_address: int | None = None
    paths: list[int] = []
    for position in range(dynamic[0], dynamic[0] + dynamic[1], 16):
        tag, value = struct.unpack_from("<qQ", data, position)
        if tag == 0:  # DT_NULL
            break
        if tag == 5:  # DT_STRTAB
            strtab_address = value
        elif tag in (15, 29):  # DT_RPATH, DT_RUNPATH
            paths.append(value)
    if strtab_address is None:
        raise PythonRuntimeError(f"{binary} has a dynamic section without a string table")
    for vaddr, offset, size in loads:
        if vaddr <= strtab_address < vaddr + size:
            return offset + strtab_address - vaddr, paths
    raise PythonRuntimeError(f"{binary}'s string table is in no loaded segment")


def copy_describes_itself(python: Path, target: Path) -> None:
    """The copy runs, reports its own folder as its prefix (not the host's) and imports the
    modules a CLI needs; PythonRuntimeError saying what is wrong otherwise."""
    found = probe(str(python))
    if not isinstance(found, HostPython):
        raise PythonRuntimeError(f"the copied interpreter {python} {found}")
    if found.prefix != target:
        raise PythonRuntimeError(
            f"the copied interpreter {python} takes {found.prefix} for its prefix, not {target}"
        )
    run_install_command(
        [str(python), "-I", "-c", "import ssl, sqlite3, ctypes, zlib, lzma, bz2, _decimal"],
        timeout=PROBE_TIMEOUT,
        error=PythonRuntimeError,
        cannot_start=f"could not run the copied interpreter {python}",
        failed=f"the copied interpreter {python} lacks a standard module",
    )


@dataclass(frozen=True)
class PythonCli:
    """A CLI that is a PyPI package, pip-installed into a private copy of a host CPython under
    the tools folder and run as `<copy>/bin/python3 -m <module>`: where it lives under a tools
    root (the sandbox's view or the host's), how it starts, what counts as installed (the
    pinned version, reported by the copy) and how it gets installed."""

    label: str  # for messages: "Kimi CLI"
    requirements: tuple[str, ...]  # what pip installs, the pinned package first
    version: str  # pinned
    folder: str  # under the tools root; the version is a folder below it
    module: str  # run with `python -m`
    error: type[RuntimeError]
    # How the installed CLI is asked for its version, and where it prints it.
    version_args: tuple[str, ...] = ("--version",)
    version_env: Mapping[str, str] = field(default_factory=dict)
    version_exact: bool = False
    # The CLI's Requires-Python upper bound, exclusive (OpenHands CLI: ==3.12.*, so (3, 13)).
    python_below: tuple[int, int] | None = None

    def prefix(self, tools_root: str) -> str:
        return str(PurePosixPath(tools_root) / self.folder / self.version)

    def runtime(self, tools_root: str) -> str:
        """The copy's folder (its sys.prefix)."""
        return f"{self.prefix(tools_root)}/python"

    def python_path(self, tools_root: str) -> str:
        return f"{self.runtime(tools_root)}/bin/python3"

    def command(self, tools_root: str) -> list[str]:
        return python_argv(self.python_path(tools_root), "-m", self.module)

    def installed_version(self, tools_dir: Path) -> str | None:
        """What the installed CLI reports on its copy, or None."""
        root = str(tools_dir)
        if not Path(self.python_path(root)).is_file():
            return None
        return reported_version(
            [*self.command(root), *self.version_args],
            timeout=VERSION_TIMEOUT,
            extra_env={"HOME": "/nonexistent", **self.version_env},
            exact=self.version_exact,
        )

    def install(self, tools_dir: Path, environ: Mapping[str, str] | None = None) -> None:
        """Copy a host interpreter under tools_dir and pip-install this CLI into it, unless
        the pinned version already runs there."""
        if self.installed_version(tools_dir) == self.version:
            return
        target = Path(self.runtime(str(tools_dir)))
        source = find_host_python(environ, below=self.python_below)
        python = copy_interpreter(source, target)
        copy_describes_itself(python, target)
        self._pip(python, ["-m", "ensurepip", "--default-pip"], "set up pip in the copy")
        pip = ["-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
        self._pip(python, [*pip, *self.requirements], f"pip-install {self.requirements[0]}")
        # pip exits 0 after installing something that cannot start; only a running CLI counts.
        found = self.installed_version(tools_dir)
        if found != self.version:
            raise self.error(
                f"{self.label} reports {found!r} after install on Python "
                f"{source.dotted_version} (from {source.executable}), expected {self.version}"
            )

    def _pip(self, python: Path, args: Sequence[str], what: str) -> None:
        run_install_command(
            [str(python), *args],
            timeout=INSTALL_TIMEOUT,
            error=self.error,
            cannot_start=f"could not {what}",
            failed=f"could not {what}",
        )


@dataclass(frozen=True)
class LaunchedCli:
    """A `PythonCli` started through a launcher of ours rather than its own `-m` entry: the
    launcher (`source`, copied next to the copy) sets up what the CLI's ACP server has no
    flag for, and prints the CLI's version alone on `--version`. Installed means both: the
    pinned CLI in its copy, and this launcher, byte for byte, beside it."""

    cli: PythonCli
    source: Path  # the launcher in this repository
    name: str = "uhp_acp_launcher.py"

    def launcher_path(self, tools_root: str) -> str:
        return f"{self.cli.prefix(tools_root)}/{self.name}"

    def command(self, tools_root: str) -> list[str]:
        return python_argv(self.cli.python_path(tools_root), self.launcher_path(tools_root))

    def _launcher_current(self, tools_dir: Path) -> bool:
        installed = Path(self.launcher_path(str(tools_dir)))
        return installed.is_file() and installed.read_bytes() == self.source.read_bytes()

    def installed_version(self, tools_dir: Path) -> str | None:
        """The version the launcher reports on the copy (once it finds the CLI's ACP server),
        or None when either is missing, stale or does not run."""
        root = str(tools_dir)
        if not Path(self.cli.python_path(root)).is_file() or not self._launcher_current(tools_dir):
            return None
        return reported_version(
            [*self.command(root), "--version"],
            timeout=VERSION_TIMEOUT,
            extra_env={"HOME": "/nonexistent", **self.cli.version_env},
            exact=True,  # the version alone; anything else is a failure
        )

    def install(self, tools_dir: Path) -> None:
        """The CLI into its copy (`PythonCli.install`, a no-op when it runs), then the
        launcher beside it, unless both are there already."""
        if self.installed_version(tools_dir) == self.cli.version:
            return
        self.cli.install(tools_dir)
        shutil.copyfile(self.source, self.launcher_path(str(tools_dir)))
        found = self.installed_version(tools_dir)
        if found != self.cli.version:
            raise self.cli.error(
                f"{self.cli.label} reports {found!r} after install, expected {self.cli.version}"
            )
