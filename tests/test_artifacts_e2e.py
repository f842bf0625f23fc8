"""Artifacts out (Files §2-§5), end to end: files the real CLI writes in its sandbox become
cited, downloadable, listed, archived and previewable artifacts, and nothing else does."""

from __future__ import annotations

import io
import os
import shutil
import time
import zipfile
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.support.schema import check_stream, validate
from tests.support.sse import read_stream
from tests.test_sessions_e2e import first_delta
from tests.test_tasks_e2e import create, message_text

pytestmark = pytest.mark.slow

WRITE_TWO_FILES = (
    "RUN printf '# Report\\n\\nAll good.\\n' > report.md && printf 'a,b\\n1,2\\n' > data.csv\n"
    "SAY I wrote report.md and data.csv."
)


def citations(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        annotation
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
        for annotation in part.get("annotations", [])
    ]


def session_files(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    answer = client.get(f"/v1/sessions/{session_id}/files")
    assert answer.status_code == 200, answer.text
    files = answer.json()["files"]
    for file in files:
        validate("File", file)
    return files


def download(client: httpx.Client, citation: dict[str, Any]) -> httpx.Response:
    return client.get(citation["download_url"])


def test_written_files_are_cited_on_the_final_message_and_identical_everywhere(
    client: httpx.Client,
) -> None:
    stream = read_stream(
        client, "POST", "/v1/responses", json={"input": WRITE_TWO_FILES, "stream": True}
    )
    final = check_stream(stream.events)  # annotation events sit inside the message's brackets
    assert final["status"] == "completed"
    cited = citations(final)
    assert sorted(c["filename"] for c in cited) == ["data.csv", "report.md"]
    last = final["output"][-1]
    assert last["type"] == "message" and last["content"][0]["annotations"] == cited
    text = last["content"][0]["text"]
    for citation in cited:
        assert citation["type"] == "container_file_citation"
        assert citation["container_id"].startswith("cntr_")
        assert citation["file_id"].startswith("file_")
        assert text[citation["start_index"] : citation["end_index"]] == citation["filename"]
        url = urlparse(citation["download_url"])
        assert url.scheme == "http" and url.netloc == urlparse(str(client.base_url)).netloc
        assert url.path == (
            f"/v1/containers/{citation['container_id']}/files/{citation['file_id']}/content"
        )
    announced = [e for e in stream.events if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"] for e in announced] == cited
    assert [e["annotation_index"] for e in announced] == list(range(len(cited)))
    done = next(
        e
        for e in stream.events
        if e["type"] == "response.output_item.done" and e["item"]["id"] == last["id"]
    )
    assert all(e["sequence_number"] < done["sequence_number"] for e in announced)
    assert all(e["item_id"] == last["id"] for e in announced)
    # The read-back and a replay of the stream are the same fold of the same log.
    assert client.get(f"/v1/responses/{final['id']}").json() == final
    replay = read_stream(client, "GET", f"/v1/responses/{final['id']}?stream=true")
    assert replay.events == stream.events

    report = download(client, next(c for c in cited if c["filename"] == "report.md"))
    assert report.status_code == 200
    assert report.content == b"# Report\n\nAll good.\n"
    assert report.headers["content-type"].startswith("text/markdown")
    assert report.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in report.headers["content-security-policy"]
    assert report.headers["content-disposition"].startswith("attachment;")
    assert "report.md" in report.headers["content-disposition"]
    csv = download(client, next(c for c in cited if c["filename"] == "data.csv"))
    assert csv.content == b"a,b\n1,2\n" and csv.headers["content-type"].startswith("text/csv")

    listed = session_files(client, final["metadata"]["session_id"])
    assert {f["id"] for f in listed} == {c["file_id"] for c in cited}
    assert {f["bytes"] for f in listed} == {len(report.content), len(csv.content)}


def test_every_turns_artifacts_are_listed_and_archived(client: httpx.Client) -> None:
    first = create(client, {"input": "RUN echo one > notes.txt\nSAY saved"})
    second = create(
        client,
        {
            "input": (
                "RUN echo two >> notes.txt && mkdir -p out && echo x > out/extra.txt\nSAY more"
            ),
            "previous_response_id": first["id"],
        },
    )
    third = create(client, {"input": "SAY nothing new", "previous_response_id": second["id"]})
    assert citations(third) == []  # a turn that wrote nothing cites nothing
    session_id = first["metadata"]["session_id"]
    listed = session_files(client, session_id)
    assert sorted((f["filename"], f["bytes"]) for f in listed) == [
        ("notes.txt", 4),
        ("notes.txt", 8),
        ("out/extra.txt", 2),
    ]
    assert {f["container_id"] for f in listed} == {citations(first)[0]["container_id"]}
    archive = client.get(f"/v1/sessions/{session_id}/files/archive")
    assert archive.status_code == 200
    assert archive.headers["content-type"] == "application/zip"
    assert archive.headers["x-content-type-options"] == "nosniff"
    with zipfile.ZipFile(io.BytesIO(archive.content)) as bundle:
        assert bundle.testzip() is None
        contents = {name: bundle.read(name) for name in bundle.namelist()}
    assert contents == {
        "notes.txt": b"one\n",
        "notes (2).txt": b"one\ntwo\n",
        "out/extra.txt": b"x\n",
    }


def test_links_special_files_inputs_and_tool_state_never_become_artifacts(
    client: httpx.Client,
) -> None:
    prompt = (
        "RUN ln -s /etc/passwd leak.txt && ln -s /etc etcdir && mkfifo pipe && "
        "mkdir -p .git node_modules/pkg && echo x > .git/HEAD && echo y > node_modules/pkg/i.js "
        "&& echo real > real.txt\n"
        "SAY done"
    )
    inline = "data:text/plain;base64,aW5wdXQgZmlsZQo="  # "input file\n"
    result = create(
        client,
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": prompt},
                        {"type": "input_file", "filename": "given.txt", "file_data": inline},
                    ],
                }
            ]
        },
    )
    assert result["status"] == "completed"
    assert [c["filename"] for c in citations(result)] == ["real.txt"]
    listed = session_files(client, result["metadata"]["session_id"])
    assert [f["filename"] for f in listed] == ["real.txt"]


def test_traversal_through_artifact_ids_never_escapes(
    client: httpx.Client, server: Any, other_key: str
) -> None:
    result = create(client, {"input": "RUN echo secret-ish > mine.txt\nSAY ok"})
    citation = citations(result)[0]
    container, file_id = citation["container_id"], citation["file_id"]
    base = f"/v1/containers/{container}/files"
    probes = [
        f"{base}/../../../../etc/passwd/content",
        f"{base}/..%2f..%2f..%2fetc%2fpasswd/content",
        f"{base}/%2e%2e%2f%2e%2e%2fetc%2fpasswd/content",
        f"{base}/%252e%252e%252fetc%252fpasswd/content",
        f"{base}/..%5c..%5cetc%5cpasswd/content",
        f"{base}/%2Fetc%2Fpasswd/content",
        f"{base}/mine.txt/content",
        f"{base}/{file_id}%00/content",
        f"/v1/containers/..%2f{container}/files/{file_id}/content",
        f"/v1/containers/cntr_other/files/{file_id}/content",
        f"{base}/{file_id}/../../{file_id}/content",
        f"{base}/file_00000000000000000000000000000000/content",
    ]
    for probe in probes:
        answer = client.get(probe)
        assert answer.status_code == 404, probe
        assert "root:" not in answer.text and "secret-ish" not in answer.text, probe
        assert answer.json()["error"]["code"] in ("file_not_found", "uhpserver_route_not_found")
    # Raw paths too (a client that does not normalise dot segments).
    with httpx.Client(base_url=str(client.base_url), headers=client.headers) as raw:
        for probe in (f"{base}/../../../../etc/passwd", f"{base}/./{file_id}/../x/content"):
            answer = raw.send(raw.build_request("GET", probe))
            assert answer.status_code == 404 and "root:" not in answer.text
    assert client.get(citation["download_url"]).status_code == 200
    # Another principal gets 404 for every operation on it, never the bytes.
    with httpx.Client(
        base_url=str(client.base_url), headers={"Authorization": f"Bearer {other_key}"}
    ) as other:
        session_id = result["metadata"]["session_id"]
        for path in (
            f"{base}/{file_id}/content",
            f"{base}/{file_id}/pdf",
            f"/v1/sessions/{session_id}/files",
            f"/v1/sessions/{session_id}/files/archive",
        ):
            answer = other.get(path)
            assert answer.status_code == 404, path
            assert "secret-ish" not in answer.text


def test_a_turn_that_ends_on_a_tool_call_gets_a_message_listing_its_files(
    client: httpx.Client,
) -> None:
    result = create(
        client,
        {"input": "RUN echo a > first.txt\nRUN echo b > second.txt\nSAY never", "max_step": 1},
    )
    assert result["status"] == "incomplete"
    last = result["output"][-1]
    assert last["type"] == "message" and last["status"] == "completed"
    # The stopped call may or may not have run before the stop: the files say what happened.
    names = [c["filename"] for c in citations(result)]
    assert names[0] == "first.txt" and set(names) <= {"first.txt", "second.txt"}
    assert last["content"][0]["text"] == "Files: " + ", ".join(names)
    assert message_text(result).endswith(last["content"][0]["text"])


def test_pdf_preview_renders_documents_and_reports_what_will_not_convert(
    client: httpx.Client,
) -> None:
    if shutil.which("soffice") is None:
        message = "LibreOffice is not installed (scripts/test.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip("PDF PREVIEW NOT TESTED. " + message)
    prompt = (
        "RUN printf 'Quarterly notes\\nLine two\\n' > notes.txt && "
        "printf 'PK\\003\\004garbage' > broken.docx && printf 'not an image' > pic.png\n"
        "SAY ok"
    )
    result = create(client, {"input": prompt})
    by_name = {c["filename"]: c for c in citations(result)}
    assert set(by_name) == {"notes.txt", "broken.docx", "pic.png"}

    def preview(name: str) -> httpx.Response:
        c = by_name[name]
        return client.get(f"/v1/containers/{c['container_id']}/files/{c['file_id']}/pdf")

    pdf = preview("notes.txt")
    assert pdf.status_code == 200, pdf.text
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF-")
    assert pdf.headers["x-content-type-options"] == "nosniff"
    assert preview("notes.txt").content == pdf.content  # cached by content hash
    for name in ("broken.docx", "pic.png"):
        failed = preview(name)
        assert failed.status_code == 502, failed.text
        error = failed.json()["error"]
        assert error["code"] == "preview_failed" and error["type"] == "server_error"


def test_a_cancelled_turn_still_cites_what_it_wrote_and_answers_at_once(
    client: httpx.Client,
) -> None:
    accepted = create(
        client,
        {
            "input": "RUN echo early > early.txt\nSLOW 20\nSAY " + "slowly " * 50,
            "background": True,
        },
    )
    first_delta(client, accepted["id"])
    started = time.monotonic()
    cancelled = client.post(f"/v1/responses/{accepted['id']}/cancel").json()
    assert time.monotonic() - started < 1.0
    assert cancelled["status"] == "cancelled"
    assert [c["filename"] for c in citations(cancelled)] == ["early.txt"]
    assert cancelled["output"][-1]["status"] == "incomplete"  # the partial answer, cut short
    assert client.get(citations(cancelled)[0]["download_url"]).content == b"early\n"
