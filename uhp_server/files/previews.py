"""PDF previews of document artifacts (Files §3.1), rendered by LibreOffice.

`soffice --headless --convert-to pdf` runs with its own throw-away profile, an environment
built from nothing, a timeout, and one conversion at a time (two cores are shared with the
agents). The result is cached by the content hash, so a document is converted once.
A server without LibreOffice says so (501 `preview_unavailable`); a file that does not
convert is a 502 `preview_failed`.

The document is the agent's, so LibreOffice is treated as an attacker's puppet: a document
can link images, OLE objects or stylesheets by URL, and LibreOffice fetches them while it
converts. On the host network that is server-side request forgery (loopback services, the
cloud metadata address, the intranet). So the conversion runs with no network at all: under
bubblewrap (read-only system, every namespace unshared and the network NOT shared, no
capabilities, the agents' syscall filter, only the input file and an output folder bound),
or, without bubblewrap, at least in an empty network namespace (`unshare --net`). When
neither can be set up the preview is refused (502) rather than converted unsandboxed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from storage.blobs import BlobStore
from uhp_server.errors import ApiError
from uhp_server.files.stored import StoredFile
from uhp_server.sandbox.local import SYSTEM_DIRS, seccomp, system_binds

log = logging.getLogger("uhp_server.files.previews")

# What LibreOffice's writer and calc render: office documents and plain text.
DOCUMENT_EXTENSIONS = frozenset(
    {
        "doc",
        "docx",
        "odt",
        "rtf",
        "txt",
        "md",
        "csv",
        "tsv",
        "xls",
        "xlsx",
        "ods",
        "fodt",
        "fods",
    }
)


# What LibreOffice needs of the host, bound read-only into its sandbox. The /etc entries are
# its configuration registry (share/registry links there), fonts, the loader's cache and the
# user database; nothing else of /etc (or of the host) is visible.
_ETC_ENTRIES = (
    "libreoffice",
    "fonts",
    "ld.so.cache",
    "passwd",
    "group",
    "localtime",
    "alternatives",
)
_EXTRA_DIRS = ("/var/lib/libreoffice",)  # registrations of bundled extensions (Debian)
# Paths inside the sandbox; the host folders behind them are per-conversion temporaries.
_INSIDE = Path("/preview")
_INSIDE_HOME = _INSIDE / "home"
_INSIDE_OUT = _INSIDE / "out"
_SANDBOX_PATH = "/usr/bin:/bin"
_PROBE_TIMEOUT = 10.0


def unavailable() -> ApiError:
    return ApiError(501, "preview_unavailable", "This server does not render previews.")


def failed(message: str = "This file could not be converted to PDF.") -> ApiError:
    return ApiError(502, "preview_failed", message)


def not_isolated() -> ApiError:
    return failed("This server cannot convert documents without network access, so it does not.")


def _system_binds() -> list[str]:
    args = system_binds(_ETC_ENTRIES)
    for d in _EXTRA_DIRS:
        if Path(d).is_dir():
            args += ["--ro-bind", d, d]
    return args


def _install_bind(program: Path) -> list[str]:
    """A LibreOffice installed outside the system folders (/opt/libreoffice*/program/soffice)
    is bound read-only as a whole: the program finds its libraries next to itself."""
    if any(program.is_relative_to(d) for d in SYSTEM_DIRS):
        return []
    root = program.parent.parent if program.parent.name == "program" else program.parent
    return ["--ro-bind", str(root), str(root)]


class PreviewRenderer:
    def __init__(
        self,
        soffice: str,
        cache_dir: Path,
        blobs: BlobStore,
        timeout: float,
        bwrap: str = "bwrap",
        unshare: str = "unshare",
    ) -> None:
        self.soffice = soffice
        self.cache_dir = cache_dir
        self.blobs = blobs
        self.timeout = timeout
        self.bwrap = bwrap
        self.unshare = unshare
        self._one_at_a_time = asyncio.Semaphore(1)
        # The isolation found to work ("bwrap" or "unshare"), probed on first use. A failed
        # probe is not remembered: it costs milliseconds and the host may be fixed meanwhile.
        self._isolation: str | None = None

    def converter(self) -> str | None:
        return shutil.which(self.soffice)

    async def pdf(self, row: StoredFile) -> Path:
        """The PDF of the artifact; raises the protocol's 501 or 502."""
        if row.media_type == "application/pdf":
            return self.blobs.path(row.sha256)
        binary = self.converter()
        if binary is None:
            raise unavailable()
        extension = row.filename.rsplit(".", 1)[-1].lower() if "." in row.filename else ""
        if extension not in DOCUMENT_EXTENSIONS:
            raise failed("Only office and text documents can be previewed.")
        # Keyed by the type too: the same bytes convert differently as .csv and as .txt.
        cached = self.cache_dir / f"{row.sha256}.{extension}.pdf"
        if cached.is_file():
            return cached
        async with self._one_at_a_time:
            if not cached.is_file():
                await self._convert(binary, row, extension, cached)
        return cached

    async def _convert(self, binary: str, row: StoredFile, extension: str, target: Path) -> None:
        isolation = await self._isolation_that_works()
        if isolation is None:
            log.warning("preview_not_isolated", extra={"bwrap": self.bwrap})
            raise not_isolated()
        with tempfile.TemporaryDirectory(prefix="uhp-preview-") as work:
            folder = Path(work)
            source = folder / f"document.{extension}"
            out = folder / "out"
            out.mkdir()
            shutil.copyfile(self.blobs.path(row.sha256), source)
            program = Path(binary).resolve()
            if isolation == "bwrap":
                filter_fd = _syscall_filter_fd()
                try:
                    argv, env = self._bwrap_argv(program, source, out, filter_fd)
                    await self._run(argv, env, pass_fds=(filter_fd,))
                finally:
                    os.close(filter_fd)
            else:
                argv, env = self._unshare_argv(program, source, out, folder)
                await self._run(argv, env)
            produced = out / "document.pdf"
            if not produced.is_file() or not produced.read_bytes()[:5] == b"%PDF-":
                raise failed()
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            shutil.copyfile(produced, partial)
            os.replace(partial, target)

    @staticmethod
    def _soffice_args(program: Path, home: Path, source: Path, out: Path) -> list[str]:
        return [
            str(program),
            f"-env:UserInstallation=file://{home / 'profile'}",
            "--headless",
            "--norestore",
            "--convert-to",
            "pdf",
            "--outdir",
            str(out),
            str(source),
        ]

    def _bwrap_prefix(self, exe: str, program: Path | None) -> list[str]:
        """bwrap and its options up to the bind mounts of one conversion."""
        return [
            exe,
            "--unshare-all",  # and no --share-net: an empty network namespace, not even lo up
            "--die-with-parent",
            "--cap-drop",
            "ALL",  # as root, bwrap would otherwise leave the child every capability
            "--hostname",
            "uhp-preview",
            *_system_binds(),
            *(_install_bind(program) if program is not None else []),
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
        ]

    def _bwrap_argv(
        self, program: Path, source: Path, out: Path, filter_fd: int
    ) -> tuple[list[str], dict[str, str]]:
        exe = shutil.which(self.bwrap) or self.bwrap
        inside_source = _INSIDE / source.name
        argv = [
            *self._bwrap_prefix(exe, program),
            # The agents' syscall filter (sandbox/syscall_filter.py): the document is theirs.
            "--seccomp",
            str(filter_fd),
            "--tmpfs",
            str(_INSIDE_HOME),  # the throw-away profile lives here and dies with the sandbox
            "--ro-bind",
            str(source),
            str(inside_source),
            "--bind",
            str(out),
            str(_INSIDE_OUT),
            # The root is bwrap's scratch tmpfs; read-only, so only home, /tmp and out are
            # writable.
            "--remount-ro",
            "/",
            "--clearenv",
            "--setenv",
            "PATH",
            _SANDBOX_PATH,
            "--setenv",
            "HOME",
            str(_INSIDE_HOME),
            "--chdir",
            str(_INSIDE_HOME),
            "--",
            *self._soffice_args(program, _INSIDE_HOME, inside_source, _INSIDE_OUT),
        ]
        return argv, {}  # bwrap itself needs nothing from the server's environment

    def _unshare_prefix(self, exe: str) -> list[str]:
        # Without root, a network namespace needs a user namespace to be created in.
        return [exe, "--net", *([] if os.geteuid() == 0 else ["--map-root-user"]), "--"]

    def _unshare_argv(
        self, program: Path, source: Path, out: Path, folder: Path
    ) -> tuple[list[str], dict[str, str]]:
        exe = shutil.which(self.unshare) or self.unshare
        argv = [*self._unshare_prefix(exe), *self._soffice_args(program, folder, source, out)]
        return argv, {"PATH": _SANDBOX_PATH, "HOME": str(folder)}

    async def _isolation_that_works(self) -> str | None:
        """The isolation (`bwrap`, else `unshare`) that can start a program here, or None."""
        if self._isolation is not None:
            return self._isolation
        candidates: list[tuple[str, list[str]]] = []
        if exe := shutil.which(self.bwrap):
            candidates.append(("bwrap", [*self._bwrap_prefix(exe, None), "--", "true"]))
        if exe := shutil.which(self.unshare):
            candidates.append(("unshare", [*self._unshare_prefix(exe), "true"]))
        for name, argv in candidates:
            if await _succeeds(argv):
                self._isolation = name
                return name
            log.info("preview_isolation_unavailable", extra={"isolation": name})
        return None

    async def _run(
        self, argv: list[str], env: dict[str, str], pass_fds: Sequence[int] = ()
    ) -> None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                pass_fds=pass_fds,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:  # the isolation tool went away since it was probed
            log.warning("preview_failed", extra={"error": str(exc)})
            self._isolation = None
            raise failed() from None
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            await proc.wait()
            raise failed("Converting this file took too long.") from None
        if proc.returncode != 0:
            log.info("preview_failed", extra={"code": proc.returncode, "stderr": stderr[-500:]})
            raise failed()


def _syscall_filter_fd() -> int:
    try:
        return seccomp.program_fd()
    except (seccomp.SeccompError, OSError) as exc:
        log.warning("preview_failed", extra={"error": str(exc)})
        raise failed() from None


async def _succeeds(argv: Sequence[str]) -> bool:
    """Whether argv runs and exits 0 (a namespace that cannot be created makes it fail)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env={"PATH": _SANDBOX_PATH},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return False
    try:
        return await asyncio.wait_for(proc.wait(), _PROBE_TIMEOUT) == 0
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return False
