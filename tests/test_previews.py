"""PDF previews (files/previews.py, `GET /v1/containers/{cid}/files/{fid}/pdf`): an agent-written
document is converted by the real LibreOffice with no network at all, and every preview is
served with the same hardening headers as a download. In-process, no agent CLI."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from storage import artifacts as artifact_store
from storage import keys as key_store
from storage import sessions as session_store
from storage.blobs import BlobStore
from storage.tables import ArtifactRow, SessionRow
from tests.support.app_context import app_context
from uhp_server.app import create_app
from uhp_server.errors import ApiError
from uhp_server.files.previews import PreviewRenderer
from uhp_server.settings import Settings

KEY = "uhp_sk_previews_test"
AUTH = {"Authorization": f"Bearer {KEY}"}


def soffice_or_skip() -> str:
    found = shutil.which("soffice")
    if found is None:
        message = "LibreOffice is not installed (scripts/test.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip("PDF PREVIEW NOT TESTED. " + message)
    return found


class Listener:
    """A loopback TCP listener that records every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(4096) or b"(connected)")
                except OSError:
                    self.received.append(b"(connected)")

    def wait_quiet(self, seconds: float = 1.0) -> list[bytes]:
        """What arrived, after giving a late connection a moment to land."""
        time.sleep(seconds)
        return list(self.received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    running = Listener()
    # The listener must be able to see a connection, or "it saw none" would prove nothing.
    with socket.create_connection(("127.0.0.1", running.port)) as probe:
        probe.sendall(b"probe")
    deadline = time.monotonic() + 5
    while not running.received and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running.received == [b"probe"]
    running.received.clear()
    yield running
    running.close()


def fodt(body: str) -> bytes:
    """A flat (single XML file) OpenDocument text, as an agent could write it."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
        ' xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"'
        ' xmlns:xlink="http://www.w3.org/1999/xlink"'
        ' xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"'
        ' office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">'
        f"<office:body><office:text>{body}</office:text></office:body></office:document>\n"
    ).encode()


def linking_to(port: int) -> bytes:
    """A document whose image LibreOffice fetches from the URL while it converts."""
    return fodt(
        "<text:p>Quarterly notes"
        '<draw:frame draw:name="i" svg:width="2cm" svg:height="2cm">'
        f'<draw:image xlink:href="http://127.0.0.1:{port}/ssrf.png" xlink:type="simple"'
        ' xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>'
    )


def is_pdf(data: bytes) -> bool:
    return data.startswith(b"%PDF-") and b"%%EOF" in data[-64:] and b"/Type/Page" in data


def artifact(blobs: BlobStore, filename: str, data: bytes, media_type: str) -> ArtifactRow:
    return ArtifactRow(
        id="file_" + os.urandom(8).hex(),
        principal_id="prin_x",
        session_id="hsess_x",
        container_id="cntr_x",
        response_id="resp_x",
        filename=filename,
        bytes=len(data),
        media_type=media_type,
        sha256=blobs.put_bytes(data),
        created_at=int(time.time()),
    )


def renderer(tmp_path: Path, **isolation: str) -> PreviewRenderer:
    blobs = BlobStore(tmp_path / "blobs")
    return PreviewRenderer(soffice_or_skip(), tmp_path / "previews", blobs, 60, **isolation)


def recording(previews: PreviewRenderer) -> list[list[str]]:
    """Every argv the renderer runs a conversion with."""
    runs: list[list[str]] = []
    run = previews._run

    async def spy(argv: list[str], env: dict[str, str], pass_fds: Sequence[int] = ()) -> None:
        runs.append(argv)
        await run(argv, env, pass_fds)

    previews._run = spy  # type: ignore[method-assign]  # a spy for this renderer only
    return runs


def failing_program(tmp_path: Path, name: str) -> str:
    """A program that is there but cannot do its job (bwrap where namespaces are refused)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    path.chmod(0o755)
    return str(path)


# -- no network while converting ------------------------------------------------------------
@pytest.mark.heavy
def test_a_document_cannot_make_the_server_fetch_a_url(tmp_path: Path, listener: Listener) -> None:
    previews = renderer(tmp_path)
    runs = recording(previews)
    row = artifact(previews.blobs, "report.fodt", linking_to(listener.port), "text/xml")
    pdf = asyncio.run(previews.pdf(row))
    assert is_pdf(pdf.read_bytes())  # converted, just without the remote image
    assert listener.wait_quiet() == []
    [argv] = runs
    assert Path(argv[0]).name == "bwrap"
    assert "--unshare-all" in argv and "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and "--die-with-parent" in argv
    assert "--seccomp" in argv[: argv.index("--")]  # the agents' syscall filter, and it converts


@pytest.mark.heavy
def test_a_normal_document_still_converts_to_a_real_pdf(tmp_path: Path) -> None:
    previews = renderer(tmp_path)
    text = artifact(previews.blobs, "notes.txt", b"Quarterly notes\nLine two\n", "text/plain")
    flat = artifact(
        previews.blobs, "notes.fodt", fodt("<text:p>Quarterly notes</text:p>"), "text/xml"
    )
    for row in (text, flat):
        pdf = asyncio.run(previews.pdf(row))
        extension = row.filename.rsplit(".", 1)[1]
        # Cached by content hash and type: the same bytes convert differently as another type.
        assert pdf == tmp_path / "previews" / f"{row.sha256}.{extension}.pdf"
        assert is_pdf(pdf.read_bytes())
    as_csv = artifact(previews.blobs, "notes.csv", b"Quarterly notes\nLine two\n", "text/csv")
    assert as_csv.sha256 == text.sha256
    runs = recording(previews)
    pdf = asyncio.run(previews.pdf(as_csv))
    assert pdf.name == f"{text.sha256}.csv.pdf" and len(runs) == 1  # converted as a .csv


@pytest.mark.heavy
@pytest.mark.parametrize("bwrap", ["missing", "failing"])
def test_without_bubblewrap_the_conversion_still_has_no_network(
    tmp_path: Path, listener: Listener, bwrap: str
) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    program = "uhp-no-such-bwrap" if bwrap == "missing" else failing_program(tmp_path, "bwrap")
    previews = renderer(tmp_path, bwrap=program)
    runs = recording(previews)
    row = artifact(previews.blobs, "report.fodt", linking_to(listener.port), "text/xml")
    assert is_pdf(asyncio.run(previews.pdf(row)).read_bytes())
    assert listener.wait_quiet() == []
    [argv] = runs
    assert Path(argv[0]).name == "unshare" and "--net" in argv


def test_with_no_way_to_isolate_it_nothing_is_converted(tmp_path: Path, listener: Listener) -> None:
    previews = renderer(
        tmp_path,
        bwrap=failing_program(tmp_path, "bwrap"),
        unshare=failing_program(tmp_path, "unshare"),
    )
    runs = recording(previews)
    row = artifact(previews.blobs, "report.fodt", linking_to(listener.port), "text/xml")
    with pytest.raises(ApiError) as refused:
        asyncio.run(previews.pdf(row))
    assert (refused.value.status, refused.value.code) == (502, "preview_failed")
    assert runs == []  # LibreOffice was never started
    assert listener.wait_quiet(0.2) == []
    assert list((tmp_path / "previews").glob(f"{row.sha256}*")) == []


# -- the route --------------------------------------------------------------------------------
@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def stored_artifact(http: TestClient, filename: str, data: bytes, media_type: str) -> str:
    """The artifact as a turn would have left it; returns its preview URL."""
    ctx: Any = app_context(http)
    principal = ctx.db.run(key_store.ensure_principal, key_store.DEFAULT_PRINCIPAL)
    session_id, container_id = "hsess_" + os.urandom(8).hex(), "cntr_" + os.urandom(8).hex()
    now = int(time.time())
    ctx.db.run(
        session_store.insert_session,
        SessionRow(
            id=session_id,
            principal_id=principal.id,
            harness_id="chrn_x",
            container_id=container_id,
            created_at=now,
            updated_at=now,
        ),
    )
    row = artifact(ctx.blobs, filename, data, media_type)
    row.principal_id, row.session_id, row.container_id = principal.id, session_id, container_id
    ctx.db.run(artifact_store.insert_artifacts, [row])
    return f"/v1/containers/{container_id}/files/{row.id}/pdf"


def assert_hardened(headers: Any) -> None:
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-security-policy"] == "sandbox; default-src 'none'"
    assert headers["cache-control"] == "private, no-store"
    assert headers["referrer-policy"] == "no-referrer"


def test_an_agent_written_pdf_is_served_sandboxed(http: TestClient) -> None:
    script = b"%PDF-1.4\n1 0 obj << /Type /Catalog /OpenAction << /S /JavaScript /JS (x) >> >>"
    url = stored_artifact(http, "invoice.pdf", script + b"\n%%EOF\n", "application/pdf")
    answer = http.get(url, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert answer.content.startswith(script)  # served as is: it is not ours
    assert answer.headers["content-type"] == "application/pdf"
    assert answer.headers["content-disposition"].startswith("inline;")
    assert_hardened(answer.headers)


@pytest.mark.heavy
def test_a_converted_preview_is_hardened_and_fetched_nothing(
    http: TestClient, listener: Listener
) -> None:
    soffice_or_skip()
    url = stored_artifact(http, "report.fodt", linking_to(listener.port), "text/xml")
    answer = http.get(url, headers=AUTH)
    assert answer.status_code == 200, answer.text
    assert is_pdf(answer.content)
    assert_hardened(answer.headers)
    assert listener.wait_quiet() == []
    # A preview that cannot be made says so with the same headers.
    refused = http.get(stored_artifact(http, "pic.png", b"not an image", "image/png"), headers=AUTH)
    assert refused.status_code == 502
    assert refused.json()["error"]["code"] == "preview_failed"
    assert_hardened(refused.headers)


# -- end to end: the agent writes the document ------------------------------------------------
@pytest.mark.slow
def test_a_document_the_agent_wrote_fetches_nothing_when_previewed(
    client: httpx.Client, listener: Listener
) -> None:
    from tests.test_artifacts_e2e import citations
    from tests.test_tasks_e2e import create

    soffice_or_skip()
    encoded = base64.b64encode(linking_to(listener.port)).decode()
    result = create(client, {"input": f"RUN echo {encoded} | base64 -d > report.fodt\nSAY ok"})
    [cited] = citations(result)
    assert cited["filename"] == "report.fodt"
    answer = client.get(f"/v1/containers/{cited['container_id']}/files/{cited['file_id']}/pdf")
    assert answer.status_code == 200, answer.text
    assert is_pdf(answer.content)
    assert_hardened(answer.headers)
    assert listener.wait_quiet() == []
