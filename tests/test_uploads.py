"""`POST /v1/files` (doors/uhp/uploads.py): a multipart body is only accepted when it was complete.

Raw bodies are sent as they would arrive on the wire, so what the parser sees is exactly
what a client (or a dropped connection) produced. In-process, no agent CLI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.app_context import app_context
from uhp_server.app import create_app
from uhp_server.settings import Settings

KEY = "uhp_sk_uploads_test"
AUTH = {"Authorization": f"Bearer {KEY}"}
BOUNDARY = "uhp-test-boundary"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
PAYLOAD = b"first line\r\nsecond line\r\n" + bytes(range(256)) * 64


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def file_part(data: bytes, name: str = "notes.bin") -> bytes:
    return (
        f"--{BOUNDARY}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + data


def closing() -> bytes:
    return f"\r\n--{BOUNDARY}--\r\n".encode()


def chunked(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """The body as a stream of small chunks, as a slow client would send it."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def stored_files(http: TestClient) -> list[Path]:
    """Every file the blob store holds, finished or temporary."""
    root: Path = app_context(http).blobs.root
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_complete_body_is_stored_byte_for_byte(http: TestClient) -> None:
    for body in (file_part(PAYLOAD) + closing(), chunked(file_part(PAYLOAD) + closing())):
        answer = http.post("/v1/files", content=body, headers={**AUTH, **MULTIPART})
        assert answer.status_code == 200, answer.text
        assert answer.json()["bytes"] == len(PAYLOAD)
    [blob] = stored_files(http)  # the same bytes twice are kept once
    assert blob.read_bytes() == PAYLOAD


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(file_part(PAYLOAD), id="no-closing-boundary"),
        pytest.param(file_part(PAYLOAD[:100]), id="short-part"),
        pytest.param(file_part(PAYLOAD) + closing()[:-6], id="closing-boundary-cut"),
        pytest.param(file_part(PAYLOAD) + f"\r\n--{BOUNDARY}\r\n".encode(), id="next-part-cut"),
        pytest.param(file_part(b"")[:40], id="headers-cut"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_body_that_ends_mid_part_is_refused_and_nothing_is_kept(
    http: TestClient, body: bytes, streamed: bool
) -> None:
    content = chunked(body) if streamed else body
    answer = http.post("/v1/files", content=content, headers={**AUTH, **MULTIPART})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_input", "file")
    assert stored_files(http) == []
