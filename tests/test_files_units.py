"""The parts behind files and artifacts, on a real filesystem and real SQLite, no agent CLI:
input decoding, safe names, placement, the artifact walk, citations in the stream, the
harness feed, and the upload route's refusals."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from harness_bases import events as ev
from storage.blobs import BlobStore
from storage.db import Database
from storage.tables import FileRow
from tests.support.app_context import app_context
from tests.support.schema import check_stream, validate
from tests.test_translation import _initial
from uhp_server.app import create_app
from uhp_server.engine.reading.feed import QUEUE_SIZE, HarnessFeed
from uhp_server.engine.reading.fold import fold
from uhp_server.engine.requests import TaskStatus
from uhp_server.engine.tasks.attachments import place_all, prompt_note
from uhp_server.engine.tasks.inputs import MAX_FILES_PER_TASK, Attachment, normalize_input
from uhp_server.engine.turns.artifacts import ArtifactCollector, ArtifactLimits, snapshot
from uhp_server.engine.turns.builder import ResponseBuilder
from uhp_server.errors import ApiError
from uhp_server.files.filenames import content_disposition, safe_filename
from uhp_server.settings import Settings

KEY = "uhp_sk_files_units"
AUTH = {"Authorization": f"Bearer {KEY}"}


# -- names -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("report.md", "report.md"),
        ("../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("/abs/path.txt", "path.txt"),
        ("..", "file"),
        ("", "file"),
        (".hidden", "hidden"),
        ("a\x00b\nc.txt", "a_b_c.txt"),
        ('we"ird<>|?*:.txt', "we_ird______.txt"),
        ("x" * 300 + ".csv", "x" * 116 + ".csv"),
        ("résumé.pdf", "résumé.pdf"),
    ],
)
def test_safe_filename_keeps_one_harmless_component(raw: str, safe: str) -> None:
    assert safe_filename(raw) == safe


def test_content_disposition_is_an_attachment_with_an_exact_utf8_name() -> None:
    header = content_disposition('dir/ré"port;.md')
    assert header.startswith('attachment; filename="r')
    assert "filename*=UTF-8''r%C3%A9%22port%3B.md" in header
    assert "\n" not in content_disposition("a\nb.txt")


# -- input decoding ----------------------------------------------------------------------
def _file_part(**fields: object) -> list[dict]:
    return [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "read it"},
                {"type": "input_file", **fields},
            ],
        }
    ]


def _error(raw: list[dict], **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        normalize_input(raw, **kwargs)
    return caught.value


@pytest.mark.parametrize("media_type", ["text/pl\x00ain", "a/b\x07", "text/\nplain"])
def test_a_data_url_media_type_with_a_control_character_is_refused(media_type: str) -> None:
    # No database text column holds a NUL: refused as bad input, never a 500 at the insert.
    error = _error(_file_part(file_data=f"data:{media_type},x", filename="a.txt"))
    assert (error.status, error.code) == (400, "invalid_input")


def test_a_task_brings_at_most_max_files_per_task_files() -> None:
    part = {"type": "input_file", "file_data": "data:,x", "filename": "a.txt"}
    content = [{"type": "input_text", "text": "read them"}, *[part] * MAX_FILES_PER_TASK]
    allowed = normalize_input([{"role": "user", "content": content}])
    assert len(allowed.attachments) == MAX_FILES_PER_TASK
    error = _error([{"role": "user", "content": [*content, part]}])
    assert (error.status, error.code) == (400, "invalid_input")
    assert error.param == f"input[0].content[{MAX_FILES_PER_TASK + 1}]"


def test_inline_files_decode_and_are_stored_by_reference() -> None:
    payload = base64.b64encode(b"hello world").decode()
    spaced = payload[:4] + "\n " + payload[4:]  # line-wrapped base64 is still base64
    result = normalize_input(
        _file_part(filename="../hi.txt", file_data=f"data:text/plain;base64,{spaced}")
    )
    (attachment,) = result.attachments
    assert attachment.data == b"hello world" and attachment.filename == "hi.txt"
    assert attachment.media_type == "text/plain" and attachment.size == 11
    stored = result.items[0]["content"][1]
    assert stored == {"type": "input_file", "file_id": attachment.file_id, "filename": "hi.txt"}
    assert result.prompt == "read it"
    plain = normalize_input(_file_part(file_data="data:,a%20b"))
    assert plain.attachments[0].data == b"a b" and plain.attachments[0].filename == "file.txt"


def test_a_message_may_carry_only_files() -> None:
    raw = [{"role": "user", "content": [{"type": "input_file", "file_data": "data:,x"}]}]
    result = normalize_input(raw)
    assert result.prompt == "" and len(result.attachments) == 1


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"file_data": "data:text/plain;base64,***"}, "input[0].content[1].file_data"),
        ({"file_data": "aGVsbG8="}, "input[0].content[1].file_data"),
        ({"file_data": 42}, "input[0].content[1].file_data"),
        ({"file_data": "data:bad;base64,aGk="}, "input[0].content[1].file_data"),
        ({}, "input[0].content[1]"),
        ({"file_id": "file_x", "file_data": "data:,x"}, "input[0].content[1]"),
        ({"file_url": "https://example.com/a.pdf"}, "input[0].content[1]"),
    ],
)
def test_malformed_file_parts_are_invalid_input(fields: dict, param: str) -> None:
    error = _error(_file_part(**fields))
    assert (error.status, error.code, error.param) == (400, "invalid_input", param)


def test_images_must_be_images_and_only_users_attach_files() -> None:
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()
    ok = normalize_input([{"role": "user", "content": [{"type": "input_image", "image_url": png}]}])
    assert ok.attachments[0].filename == "image.png"
    not_image = [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,text"}]}]
    assert _error(not_image).code == "invalid_input"
    remote = [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y"}]}]
    assert _error(remote).param == "input[0].content[0].image_url"
    system: list[dict] = [
        {"role": "system", "content": [{"type": "input_file", "file_data": "data:,x"}]},
        {"role": "user", "content": "hi"},
    ]
    assert _error(system).param == "input[0].content[0].type"


def test_size_limit_applies_to_inline_data_before_decoding() -> None:
    big = "data:application/octet-stream;base64," + "A" * 4000
    error = _error(_file_part(file_data=big), max_file_bytes=1000)
    assert (error.status, error.code) == (413, "file_too_large")
    assert error.detail == {"max_bytes": 1000}
    exact = base64.b64encode(b"x" * 1000).decode()
    result = normalize_input(
        _file_part(file_data=f"data:application/octet-stream;base64,{exact}"), max_file_bytes=1000
    )
    assert result.attachments[0].size == 1000


def test_file_ids_resolve_only_through_the_callers_lookup() -> None:
    row = FileRow(
        id="file_mine",
        principal_id="p",
        filename="q3.pdf",
        bytes=3,
        media_type="application/pdf",
        sha256="0" * 64,
        created_at=1,
    )
    found = normalize_input(_file_part(file_id="file_mine"), {"file_mine": row}.get)
    assert found.attachments[0].sha256 == "0" * 64 and found.attachments[0].data is None
    error = _error(_file_part(file_id="file_theirs"), lookup={"file_mine": row}.get)
    assert (error.status, error.code, error.param) == (
        404,
        "file_not_found",
        "input[0].content[1].file_id",
    )


# -- placement ---------------------------------------------------------------------------
@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


def _attachment(blobs: BlobStore, name: str, data: bytes) -> Attachment:
    return Attachment("file_x", name, "text/plain", len(data), sha256=blobs.put_bytes(data))


def test_placement_never_overwrites_or_follows_what_is_there(
    tmp_path: Path, blobs: BlobStore
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("do not touch")
    (workspace / "notes.txt").write_text("user's own")
    (workspace / "notes-2.txt").symlink_to(outside)  # planted by an agent
    (workspace / "notes-3.txt").mkdir()
    (workspace / "same.txt").write_bytes(b"same bytes")
    placed = place_all(
        workspace,
        blobs,
        (_attachment(blobs, "notes.txt", b"input"), _attachment(blobs, "same.txt", b"same bytes")),
    )
    assert [p.name for p in placed] == ["notes-4.txt", "same.txt"]
    assert (workspace / "notes.txt").read_text() == "user's own"
    assert outside.read_text() == "do not touch"
    assert (workspace / "notes-4.txt").read_bytes() == b"input"
    note = prompt_note(placed)
    assert note == (
        "Attached files (in the working directory): ./notes-4.txt (text/plain, 5 bytes), "
        "./same.txt (text/plain, 10 bytes)"
    )


# -- the artifact walk -------------------------------------------------------------------
def _collector(tmp_path: Path, blobs: BlobStore, **limits: int) -> ArtifactCollector:
    db = Database(tmp_path / "db.sqlite3")
    caps = {"max_count": 100, "max_file_bytes": 10_000, "max_session_bytes": 100_000, **limits}
    return ArtifactCollector(db, blobs, ArtifactLimits(**caps))


def _collect(collector: ArtifactCollector, root: Path, before: dict):
    return collector.collect(
        root,
        before,
        principal_id="p",
        session_id="hsess1",
        container_id="cntr_1",
        response_id="resp_1",
    )


def test_only_new_or_changed_regular_files_inside_become_artifacts(
    tmp_path: Path, blobs: BlobStore
) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "kept.txt").write_text("unchanged")
    (root / "edited.txt").write_text("v1")
    before = snapshot(root)
    (root / "edited.txt").write_text("version two")
    (root / "sub" / "new.csv").write_text("a,b")
    (root / "leak.txt").symlink_to("/etc/passwd")
    (root / "etc").symlink_to("/etc")
    os.mkfifo(root / "pipe")
    for excluded in (".git", "node_modules/x", ".codex", "__pycache__"):
        (root / excluded).mkdir(parents=True)
        (root / excluded / "f").write_text("tool state")
    undecodable = os.open(os.fsencode(root) + b"/bad\xffname.txt", os.O_CREAT | os.O_WRONLY)
    os.close(undecodable)
    collected = _collect(_collector(tmp_path, blobs), root, before)
    assert sorted(r.filename for r in collected.rows) == ["edited.txt", "sub/new.csv"]
    by_name = {r.filename: r for r in collected.rows}
    assert by_name["sub/new.csv"].media_type == "text/csv"
    assert blobs.path(by_name["edited.txt"].sha256).read_bytes() == b"version two"
    assert [why for _, why in collected.skipped] == ["its name is not valid UTF-8"]
    assert "bad\ufffdname.txt" in (collected.notice() or "")  # shown, safely


def test_the_caps_skip_files_and_say_so(tmp_path: Path, blobs: BlobStore) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    before = snapshot(root)
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text("x" * 10)
    (root / "big.bin").write_bytes(b"y" * 600)
    collector = _collector(tmp_path, blobs, max_count=2, max_file_bytes=500)
    collected = _collect(collector, root, before)
    assert [r.filename for r in collected.rows] == ["a.txt", "b.txt"]
    notice = collected.notice() or ""
    assert "big.bin" in notice and "c.txt" in notice
    # The count spans turns: the next turn of the same session keeps nothing more.
    (root / "d.txt").write_text("z")
    again = _collect(collector, root, snapshot(root) | {"d.txt": (0, 0, 0)})
    assert again.rows == [] and "d.txt" in (again.notice() or "")


def test_a_file_swapped_for_a_link_after_the_walk_is_not_read(
    tmp_path: Path, blobs: BlobStore
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "report.txt").write_text("real")
    seen = snapshot(root)["report.txt"]
    (root / "report.txt").unlink()
    (root / "report.txt").symlink_to("/etc/passwd")
    collector = _collector(tmp_path, blobs)
    assert collector._store(root, "report.txt", seen) is None
    (root / "report.txt").unlink()
    (root / "report.txt").write_text("a different file")
    assert collector._store(root, "report.txt", seen) is None  # not the inode the walk saw


# -- citations in the stream -------------------------------------------------------------
CITED = [
    {
        "type": "container_file_citation",
        "container_id": "cntr_1",
        "file_id": "file_1",
        "filename": "out/report.md",
        "download_url": "http://127.0.0.1:1/v1/containers/cntr_1/files/file_1/content",
    }
]


def _numbered(events: list[dict]) -> list[dict]:
    return [{**e, "sequence_number": i} for i, e in enumerate(events)]


def test_citations_land_on_the_final_message_before_it_is_done() -> None:
    builder = ResponseBuilder(_initial())
    out = builder.created() + builder.in_progress()
    out += builder.apply(ev.TextDelta("m", "See report.md"))
    out += builder.apply(ev.TextDone("m", "See report.md now"))
    assert not any(e["type"] == "response.output_item.done" for e in out)  # held open
    out += builder.finish(TaskStatus.COMPLETED, files=CITED, notice="big.bin was skipped")
    events = _numbered(out)
    final = check_stream(events)
    assert fold(events) == final
    message, notice = final["output"]
    annotation = message["content"][0]["annotations"][0]
    assert (annotation["start_index"], annotation["end_index"]) == (4, 13)  # "report.md"
    assert message["status"] == "completed"
    assert notice["content"][0]["text"] == "big.bin was skipped"
    added = next(e for e in events if e["type"] == "response.output_text.annotation.added")
    validate("Event", added)
    assert added["annotation_index"] == 0 and added["item_id"] == message["id"]


def test_a_later_item_closes_the_held_message_and_files_get_their_own() -> None:
    builder = ResponseBuilder(_initial())
    out = builder.created()
    out += builder.apply(ev.TextDone("m", "running it"))
    out += builder.apply(ev.ToolCallStarted("c", "shell", '{"cmd": "ls"}'))
    out += builder.finish(TaskStatus.INCOMPLETE, files=CITED)
    final = check_stream(_numbered(out))
    assert [item["type"] for item in final["output"]] == ["message", "function_call", "message"]
    assert final["output"][0]["content"][0]["annotations"] == []
    files = final["output"][2]
    assert files["content"][0]["text"] == "Files: out/report.md"
    assert files["status"] == "completed"
    assert files["content"][0]["annotations"][0]["start_index"] == 7


def test_a_failed_turn_keeps_its_finished_message_completed() -> None:
    builder = ResponseBuilder(_initial())
    out = builder.created() + builder.apply(ev.TextDone("m", "done talking"))
    error = {"type": "harness_error", "code": "harness_error", "message": "x", "param": None}
    out += builder.finish(TaskStatus.FAILED, error=error | {"detail": None})
    final = check_stream(_numbered(out))
    assert final["output"][0]["status"] == "completed"


# -- the harness feed --------------------------------------------------------------------
async def test_the_feed_drops_a_slow_subscriber_and_never_blocks() -> None:
    feed = HarnessFeed()
    slow = feed.subscribe("p", "chrn_a")
    other = feed.subscribe("q", "chrn_a")  # another principal's view of the same id
    for i in range(QUEUE_SIZE + 10):
        feed.publish("p", "chrn_a", {"type": "response.created", "n": i})
    assert feed.subscriber_count == 1  # the slow one is gone, the other principal's remains
    received = [event async for event in slow]
    assert len(received) < QUEUE_SIZE and received[0]["sequence_number"] == 0
    feed.publish("q", "chrn_a", {"type": "response.completed"})
    event = await asyncio.wait_for(anext(other), 1)
    assert event["type"] == "response.completed" and "n" not in event


# -- the upload route's refusals ---------------------------------------------------------
@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_uploads_refuse_what_is_not_one_file(http: TestClient) -> None:
    def refused(**kwargs: Any) -> dict:
        kwargs["headers"] = {**AUTH, **kwargs.get("headers", {})}
        answer = http.post("/v1/files", **kwargs)
        assert answer.status_code == 400, answer.text
        return answer.json()["error"]

    assert refused(json={"file": "x"})["code"] == "invalid_input"
    assert refused(data={"purpose": "x"}, files={"other": ("a.txt", b"a")})["param"] == "file"
    two = [("file", ("a.txt", b"a")), ("file", ("b.txt", b"b"))]
    assert refused(files=two)["param"] == "file"
    assert (
        refused(
            content=b"--b\r\nbroken",
            headers={"Content-Type": "multipart/form-data; boundary=b"},
        )["code"]
        == "invalid_input"
    )
    assert http.post("/v1/files", files={"file": ("a.txt", b"a")}).status_code == 401
    assert list(app_context(http).blobs.tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("parts", "param"),
    [
        (b'name="file"; filename="a.txt"\r\nContent-Type: text/pl\x00ain\r\n\r\nhello', "file"),
        (
            b'name="purpose"\r\n\r\nx\x00y\r\n--b\r\nContent-Disposition: form-data;'
            b' name="file"; filename="a.txt"\r\n\r\nhello',
            "purpose",
        ),
    ],
)
def test_uploads_refuse_a_control_character_in_a_stored_field(
    http: TestClient, parts: bytes, param: str
) -> None:
    # A NUL reaches no database text column (PostgreSQL refuses it): a 400, never a 500.
    body = b"--b\r\nContent-Disposition: form-data; " + parts + b"\r\n--b--\r\n"
    answer = http.post(
        "/v1/files",
        content=body,
        headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert list(app_context(http).blobs.tmp.iterdir()) == []


def test_discovery_claims_the_classes_it_implements(http: TestClient) -> None:
    doc = http.get("/v1/uhp").json()
    caps = doc["capabilities"]
    for name in ("files_input", "files_output", "session_listing", "session_sharing"):
        assert caps[name] is True
    expected = "full" if caps["harness_management"] else "extended"
    assert doc["conformance_class"] == expected


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/files"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/hsessx"),
        ("GET", "/v1/sessions/hsessx/turns"),
        ("GET", "/v1/sessions/hsessx/files"),
        ("GET", "/v1/sessions/hsessx/files/archive"),
        ("POST", "/v1/sessions/hsessx/share"),
        ("GET", "/v1/sessions/hsessx/share"),
        ("DELETE", "/v1/sessions/hsessx/share"),
        ("DELETE", "/v1/sessions/hsessx"),
        ("DELETE", "/v1/traces/hsessx"),
        ("GET", "/v1/containers/cntr_x/files/file_x/content"),
        ("GET", "/v1/containers/cntr_x/files/file_x/pdf"),
        ("GET", "/v1/harnesses/chrn_x/events"),
    ],
)
def test_every_new_route_needs_a_credential_and_scopes_to_404(
    http: TestClient, method: str, path: str
) -> None:
    anonymous = http.request(method, path)
    assert anonymous.status_code == 401
    validate("ErrorEnvelope", anonymous.json())
    if path in ("/v1/files", "/v1/sessions"):
        return
    answer = http.request(method, path, headers=AUTH)
    assert answer.status_code == 404, answer.text
    validate("ErrorEnvelope", answer.json())
