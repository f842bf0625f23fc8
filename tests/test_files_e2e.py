"""Files in (Files §1, Security §5), end to end: uploads and inline files reach the real CLI's
workspace under safe names, the agent is told where, and the size limit holds while the
upload streams in, leaving nothing behind."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import API_KEY, server_env
from tests.support.schema import validate
from tests.support.server import ServerProcess
from tests.test_artifacts_e2e import citations, session_files
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow

LIMIT = 4096  # UHP_MAX_FILE_BYTES of the limited server


@pytest.fixture(scope="module")
def limited(
    tmp_path_factory: pytest.TempPathFactory, provider: Any, base_installed: Path
) -> Iterator[ServerProcess]:
    """A server with small limits and no PDF converter."""
    env = server_env(
        provider,
        UHP_MAX_FILE_BYTES=str(LIMIT),
        UHP_MAX_ARTIFACTS_PER_SESSION="2",
        UHP_MAX_ARTIFACT_BYTES="2000",
        UHP_SOFFICE="/nonexistent/soffice",
    )
    running = ServerProcess(tmp_path_factory.mktemp("limited"), env).start()
    yield running
    running.stop()


@pytest.fixture
def limited_client(limited: ServerProcess) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=limited.url, headers=headers, timeout=120) as http:
        yield http


def upload(client: httpx.Client, name: str, data: bytes, media: str = "text/plain") -> dict:
    answer = client.post("/v1/files", files={"file": (name, data, media)})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    validate("File", body)
    return body


def user_message(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(parts)}]


def text(value: str) -> dict[str, Any]:
    return {"type": "input_text", "text": value}


def data_url(media: str, data: bytes) -> str:
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def prompts_seen(provider: Any, marker: str) -> list[str]:
    return [json.dumps(r["body"]) for r in provider.requests() if marker in json.dumps(r["body"])]


def test_an_uploaded_file_reaches_the_workspace_and_the_agent_is_told_where(
    client: httpx.Client, provider: Any
) -> None:
    uploaded = upload(client, "../../q3 report.txt", b"revenue: 42\n")
    assert uploaded["id"].startswith("file_") and uploaded["object"] == "file"
    assert uploaded["filename"] == "q3 report.txt"  # never a path
    assert uploaded["bytes"] == 12 and isinstance(uploaded["created_at"], int)
    marker = "upload-marker-1"
    result = create(
        client,
        {
            "input": user_message(
                text(f"RUN cat 'q3 report.txt'\nSAY {marker} {{output}}"),
                {"type": "input_file", "file_id": uploaded["id"]},
            )
        },
    )
    assert result["status"] == "completed"
    assert message_text(result) == f"{marker} revenue: 42"
    seen = prompts_seen(provider, marker)
    assert seen and "./q3 report.txt (text/plain, 12 bytes)" in seen[0]
    # The input reads back naming the file; the input itself is not an artifact.
    items = client.get(f"/v1/responses/{result['id']}/input_items").json()["data"]
    assert items[0]["content"][1] == {
        "type": "input_file",
        "file_id": uploaded["id"],
        "filename": "q3 report.txt",
    }
    assert citations(result) == []
    assert session_files(client, result["metadata"]["session_id"]) == []


def test_inline_files_and_images_land_under_safe_names_without_clobbering(
    client: httpx.Client,
) -> None:
    first = create(client, {"input": "RUN echo mine > notes.txt\nSAY ready"})
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    result = create(
        client,
        {
            "previous_response_id": first["id"],
            "input": user_message(
                text("RUN cat notes.txt notes-2.txt && ls\nSAY {output}"),
                {
                    "type": "input_file",
                    "filename": "../notes.txt",
                    "file_data": data_url("text/plain", b"theirs\n"),
                },
                {"type": "input_image", "image_url": data_url("image/png", png)},
            ),
        },
    )
    output = message_text(result)
    assert output.startswith("mine\ntheirs")  # the user's file kept, the input beside it
    assert "notes-2.txt" in output and "image.png" in output
    assert citations(result) == []  # inputs are never artifacts
    items = client.get(f"/v1/responses/{result['id']}/input_items").json()["data"]
    parts = items[0]["content"]
    assert parts[1]["type"] == "input_file" and parts[1]["filename"] == "notes.txt"
    assert parts[2]["type"] == "input_image" and parts[2]["file_id"].startswith("file_")
    assert "file_data" not in json.dumps(items)  # inline bytes are stored once, as a file
    # The inlined file is now a file of the principal's, usable by id in a new session.
    again = create(
        client,
        {
            "input": user_message(
                text("RUN cat notes.txt\nSAY {output}"),
                {"type": "input_file", "file_id": parts[1]["file_id"]},
            )
        },
    )
    assert message_text(again) == "theirs"


def test_bad_file_inputs_are_refused_with_the_field_named(
    client: httpx.Client, other_key: str
) -> None:
    with httpx.Client(
        base_url=str(client.base_url), headers={"Authorization": f"Bearer {other_key}"}
    ) as other:
        theirs = upload(other, "theirs.txt", b"private")

    def refused(part: dict[str, Any]) -> dict[str, Any]:
        answer = client.post("/v1/responses", json={"input": user_message(text("SAY x"), part)})
        assert answer.status_code in (400, 404), answer.text
        validate("ErrorEnvelope", answer.json())
        return answer.json()["error"] | {"status": answer.status_code}

    missing = refused({"type": "input_file", "file_id": theirs["id"]})
    assert missing["status"] == 404 and missing["code"] == "file_not_found"
    assert missing["param"] == "input[0].content[1].file_id"
    unknown = refused({"type": "input_file", "file_id": "file_doesnotexist"})
    assert unknown["code"] == "file_not_found"
    for part, param in (
        ({"type": "input_file", "file_data": "data:text/plain;base64,@@@"}, "file_data"),
        ({"type": "input_file", "file_data": "aGVsbG8="}, "file_data"),
        ({"type": "input_image", "image_url": "https://example.com/x.png"}, "image_url"),
        ({"type": "input_image", "image_url": data_url("text/plain", b"x")}, ""),
        ({"type": "input_file"}, ""),
    ):
        error = refused(part)
        assert error["status"] == 400 and error["code"] == "invalid_input", part
        assert error["param"].startswith("input[0].content[1]") and error["param"].endswith(param)
    unauthenticated = httpx.post(
        f"{client.base_url}/v1/files", files={"file": ("a.txt", b"a", "text/plain")}
    )
    assert unauthenticated.status_code == 401


def _blob_files(server: ServerProcess) -> set[Path]:
    root = server.data_dir / "blobs"
    return {p for p in root.rglob("*") if p.is_file()}


def test_the_upload_limit_is_enforced_while_streaming_and_leaves_nothing(
    limited_client: httpx.Client, limited: ServerProcess
) -> None:
    exact = upload(limited_client, "exact.bin", os.urandom(LIMIT), "application/octet-stream")
    assert exact["bytes"] == LIMIT
    before = _blob_files(limited)

    def assert_too_large(answer: httpx.Response) -> None:
        assert answer.status_code == 413, answer.text
        body = answer.json()
        validate("ErrorEnvelope", body)
        assert body["error"]["code"] == "file_too_large"
        assert body["error"]["detail"]["max_bytes"] == LIMIT
        assert _blob_files(limited) == before  # nothing truncated, nothing left on disk
        assert list((limited.data_dir / "blobs" / "tmp").iterdir()) == []

    one_over = os.urandom(LIMIT + 1)
    assert_too_large(limited_client.post("/v1/files", files={"file": ("big.bin", one_over)}))
    # Streamed without a Content-Length: the limit is counted as the bytes arrive.
    boundary = "uhpboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    def chunked() -> Iterator[bytes]:
        yield head
        for _ in range(40):
            yield os.urandom(1024)
        yield f"\r\n--{boundary}--\r\n".encode()

    streamed = limited_client.post(
        "/v1/files",
        content=chunked(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert_too_large(streamed)
    # A declared length far over the limit is refused before anything is written.
    huge = limited_client.post("/v1/files", files={"file": ("huge.bin", b"\0" * (LIMIT * 40))})
    assert_too_large(huge)
    # The same limit holds for inline data.
    inline = limited_client.post(
        "/v1/responses",
        json={
            "input": user_message(
                text("SAY x"),
                {
                    "type": "input_file",
                    "filename": "i.bin",
                    "file_data": data_url("application/octet-stream", one_over),
                },
            )
        },
    )
    assert inline.status_code == 413
    assert inline.json()["error"]["detail"]["max_bytes"] == LIMIT
    assert inline.json()["error"]["param"] == "input[0].content[1].file_data"


def test_artifact_caps_skip_files_visibly_and_previews_say_when_unavailable(
    limited_client: httpx.Client,
) -> None:
    prompt = (
        "RUN printf a > a.txt && printf b > b.txt && printf c > c.txt && head -c 3000 /dev/zero"
        " > big.bin\nSAY wrote four files"
    )
    result = create(limited_client, {"input": prompt})
    kept = [c["filename"] for c in citations(result)]
    assert kept == ["a.txt", "b.txt"]  # the per-session count cap is 2
    notice = result["output"][-1]
    assert notice["type"] == "message"
    notice_text = notice["content"][0]["text"]
    assert "big.bin" in notice_text and "c.txt" in notice_text
    answer_item = result["output"][-2]
    assert answer_item["content"][0]["text"] == "wrote four files"
    assert len(answer_item["content"][0]["annotations"]) == 2
    citation = citations(result)[0]
    preview = limited_client.get(
        f"/v1/containers/{citation['container_id']}/files/{citation['file_id']}/pdf"
    )
    assert preview.status_code == 501
    assert preview.json()["error"]["code"] == "preview_unavailable"
