"""PDF previews of document artifacts (Files §3.1), rendered by LibreOffice.

`soffice --headless --convert-to pdf` runs with its own throw-away profile, an environment
built from nothing, a timeout, and one conversion at a time (two cores are shared with the
agents). The result is cached by the content hash, so a document is converted once.
A server without LibreOffice says so (501 `preview_unavailable`); a file that does not
convert is a 502 `preview_failed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

from storage.blobs import BlobStore
from storage.models import ArtifactRow
from uhp_server.errors import ApiError

log = logging.getLogger("uhp_server.previews")

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


def unavailable() -> ApiError:
    return ApiError(501, "preview_unavailable", "This server does not render previews.")


def failed(message: str = "This file could not be converted to PDF.") -> ApiError:
    return ApiError(502, "preview_failed", message)


class PreviewRenderer:
    def __init__(self, soffice: str, cache_dir: Path, blobs: BlobStore, timeout: float) -> None:
        self.soffice = soffice
        self.cache_dir = cache_dir
        self.blobs = blobs
        self.timeout = timeout
        self._one_at_a_time = asyncio.Semaphore(1)

    def converter(self) -> str | None:
        return shutil.which(self.soffice)

    async def pdf(self, row: ArtifactRow) -> Path:
        """The PDF of the artifact; raises the protocol's 501 or 502."""
        if row.media_type == "application/pdf":
            return self.blobs.path(row.sha256)
        binary = self.converter()
        if binary is None:
            raise unavailable()
        extension = row.filename.rsplit(".", 1)[-1].lower() if "." in row.filename else ""
        if extension not in DOCUMENT_EXTENSIONS:
            raise failed("Only office and text documents can be previewed.")
        cached = self.cache_dir / f"{row.sha256}.pdf"
        if cached.is_file():
            return cached
        async with self._one_at_a_time:
            if not cached.is_file():
                await self._convert(binary, row, extension, cached)
        return cached

    async def _convert(self, binary: str, row: ArtifactRow, extension: str, target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="uhp-preview-") as work:
            folder = Path(work)
            source = folder / f"document.{extension}"
            shutil.copyfile(self.blobs.path(row.sha256), source)
            argv = [
                binary,
                f"-env:UserInstallation=file://{folder / 'profile'}",
                "--headless",
                "--norestore",
                "--convert-to",
                "pdf",
                "--outdir",
                str(folder / "out"),
                str(source),
            ]
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder)}
            await self._run(argv, env)
            produced = folder / "out" / "document.pdf"
            if not produced.is_file() or not produced.read_bytes()[:5] == b"%PDF-":
                raise failed()
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            shutil.copyfile(produced, partial)
            os.replace(partial, target)

    async def _run(self, argv: list[str], env: dict[str, str]) -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
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
