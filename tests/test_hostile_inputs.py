"""What hostile clients found (reviews of 2026-12-02), each held to what the contract says:
a clear error in the caller's format and never a 5xx, nothing of a `store: false` turn read
back once it ended, and names and URLs that cannot break what the server does with them."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, answer
from tests.support.hostile import DEEP, capped_app
from tests.support.in_process import InProcess, in_process
from tests.support.waiting import wait_for
from uhp_server.doors.uhp.wire import BUILTIN_SKILLS_FIELD
from uhp_server.errors import ApiError
from uhp_server.files.archive import entry_names
from uhp_server.files.filenames import MAX_NAME_BYTES, content_disposition, safe_filename
from uhp_server.files.trees import remove_tree
from uhp_server.gateway.connection import ModelConnection, connection_provider
from uhp_server.gateway.url_policy import UrlRefused, check_config_url, pin_url
from uhp_server.harnesses.skill_paths import normalise_path
from uhp_server.sandbox.ownership import hand_over


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with capped_app(tmp_path, provider) as running:
        yield running


# -- requests ---------------------------------------------------------------------------------
def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_cursor_nested_past_json_depth_is_a_400(server: InProcess) -> None:
    answer_ = await server.client.get("/v1/sessions", params={"cursor": _cursor(DEEP)})
    assert answer_.status_code == 400, answer_.text
    assert answer_.json()["error"]["param"] == "cursor"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_a_share_body_is_parsed_strictly_whatever_its_content_type(
    server: InProcess, content_type: str
) -> None:
    server.base.script("hi", answer("hi"))
    session_id = (await server.submit("hi")).json()["metadata"]["session_id"]
    url = f"/v1/sessions/{session_id}/share"
    for body in (DEEP, b'{"enabled": NaN}'):
        refused = await server.client.post(
            url, content=body, headers={"content-type": content_type}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_input"
    published = await server.client.post(
        url, content=b'{"enabled": true}', headers={"content-type": content_type}
    )
    assert published.status_code == 200, published.text


async def test_a_multipart_content_type_does_not_lift_a_json_routes_size_cap(
    server: InProcess,
) -> None:
    body = b"x" * (65 * 1024)
    for path in ("/v1/responses", "/v1/harnesses"):
        answer_ = await server.client.post(
            path, content=body, headers={"content-type": "multipart/form-data; boundary=zz"}
        )
        assert answer_.status_code == 413, (path, answer_.text)


async def test_null_flags_mean_not_set(server: InProcess) -> None:
    server.base.script("nulls", answer("fine"))
    done = await server.submit("nulls", stream=None, store=None, background=None)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"


async def test_input_items_page_the_way_openais_api_does(server: InProcess) -> None:
    server.base.script("three", answer("ok"))
    said = ["one", "two", "three"]
    items = [{"role": "user", "content": text} for text in said]
    rid = (await server.client.post("/v1/responses", json={"input": items})).json()["id"]
    url = f"/v1/responses/{rid}/input_items"

    def texts(page: dict) -> list[str]:
        return [item["content"][0]["text"] for item in page["data"]]

    whole = (await server.client.get(url)).json()
    assert texts(whole) == said and whole["has_more"] is False
    first = (await server.client.get(url, params={"limit": 2, "order": "desc"})).json()
    assert texts(first) == ["three", "two"] and first["has_more"] is True
    rest = (
        await server.client.get(url, params={"order": "desc", "after": first["last_id"]})
    ).json()
    assert texts(rest) == ["one"] and rest["has_more"] is False
    for bad in ({"limit": 0}, {"order": "up"}, {"after": "item_nope"}):
        refused = await server.client.get(url, params=bad)
        assert refused.status_code == 400, (bad, refused.text)


# -- store: false -----------------------------------------------------------------------------
async def test_a_store_false_response_is_not_read_back_once_it_ended(server: InProcess) -> None:
    server.base.script("secret", answer("secret words"))
    done = (await server.submit("secret", store=False)).json()
    assert done["status"] == "completed" and "secret words" in json.dumps(done)
    assert server.ctx.runs.get(done["id"]) is not None  # its run lingers in memory
    rid = done["id"]
    assert (await server.client.get(f"/v1/responses/{rid}")).status_code == 404
    streamed = await server.client.get(f"/v1/responses/{rid}", params={"stream": "true"})
    assert streamed.status_code == 404, streamed.text
    cancelled = await server.client.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.status_code == 200
    assert "secret words" not in cancelled.text
    assert cancelled.json()["status"] == "completed"


async def test_cancelling_a_running_store_false_turn_still_answers_its_output(
    server: InProcess,
) -> None:
    from harness_bases.events import TextDelta

    server.base.script("partial", [TextDelta("msg", "so far"), Hang()])
    rid = (await server.submit("partial", store=False, background=True)).json()["id"]
    await wait_for(lambda: server.base.turns)
    cancelled = await server.client.post(f"/v1/responses/{rid}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert "so far" in cancelled.text


async def test_an_idempotent_repeat_of_an_ended_store_false_task_is_the_same_in_any_form(
    server: InProcess,
) -> None:
    server.base.script("kept not", answer("secret words"))
    key = {"Idempotency-Key": "store-false-repeat"}
    first = await server.submit("kept not", store=False, headers=key)
    assert first.json()["status"] == "completed"
    for form in ({}, {"background": True}):  # the first result, as far as it was kept
        again = await server.submit("kept not", store=False, headers=key, **form)
        assert again.status_code == 200, (form, again.text)
        assert again.json()["id"] == first.json()["id"]
        assert again.json()["status"] == "completed" and "secret words" not in again.text
    streamed = await server.submit("kept not", store=False, headers=key, stream=True)
    assert streamed.status_code == 404  # no events were kept to stream
    assert len(server.base.turns) == 1  # and nothing ran again


async def test_a_shared_page_never_shows_a_store_false_turn_even_while_it_runs(
    server: InProcess,
) -> None:
    from harness_bases.events import TextDelta

    server.base.script("first", answer("kept answer"))
    first = (await server.submit("first")).json()
    session_id = first["metadata"]["session_id"]
    page_url = (await server.client.post(f"/v1/sessions/{session_id}/share")).json()["url"]
    server.base.script("private prompt", [TextDelta("msg", "private output"), Hang()])
    running = await server.submit(
        "private prompt", store=False, background=True, previous_response_id=first["id"]
    )
    await wait_for(lambda: len(server.base.turns) == 2)
    page = (await server.client.get(page_url)).text
    state = (await server.client.get(f"{page_url}/state")).text
    for shown in (page, state):
        assert "kept answer" in shown
        assert "private prompt" not in shown and "private output" not in shown
    await server.client.post(f"/v1/responses/{running.json()['id']}/cancel")


# -- harness configuration --------------------------------------------------------------------
@pytest.mark.parametrize("value", ["é", "✨ token", "a\tb", "a\x7fb", " a", "a "])
async def test_a_header_value_the_gateway_could_not_send_is_refused_when_configured(
    server: InProcess, value: str
) -> None:
    mcp = {"name": "m", "url": "https://example.com/mcp", "headers": {"X-Team": value}}
    refused = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "mcpServers": [mcp]}
    )
    assert refused.status_code == 400, refused.text
    connection = ModelConnection(
        base_url="https://example.com/v1", api_key="k", model="m", headers={"X-Team": value}
    )
    with pytest.raises(ApiError) as bad:
        connection_provider(connection, allow_private=False)
    assert bad.value.param == "model_connection.headers"


async def test_a_header_named_twice_or_a_key_that_cannot_be_sent_is_refused(
    server: InProcess,
) -> None:
    mcp = {"name": "m", "url": "https://example.com/mcp", "headers": {"X-A": "1", "x-a": "2"}}
    refused = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "mcpServers": [mcp]}
    )
    assert refused.status_code == 400, refused.text
    for fields, param in (
        ({"api_key": "sk-été"}, "model_connection.api_key"),
        ({"api_key": "sk-x", "headers": {"X-A": "1", "x-a": "2"}}, "model_connection.headers"),
    ):
        connection = ModelConnection(base_url="https://example.com/v1", model="m", **fields)
        with pytest.raises(ApiError) as bad:
            connection_provider(connection, allow_private=False)
        assert bad.value.param == param


@pytest.mark.parametrize("host", ["a" * 70 + ".com", "a..com", "a." * 130 + "com"])
async def test_a_host_name_dns_cannot_be_asked_for_is_refused(host: str) -> None:
    with pytest.raises(UrlRefused):
        check_config_url(f"http://{host}/", allow_private=False)
    with pytest.raises(UrlRefused):
        await pin_url(f"http://{host}/", allow_private=False)


async def test_an_own_skill_named_like_a_built_in_in_other_case_replaces_it(
    server: InProcess,
) -> None:
    mine = {"name": "UHP-ARTIFACTS", "content": "---\nname: mine\n---\nmine"}
    made = await server.client.post(
        "/v1/harnesses", json={"base": server.base.name, "skills": [mine]}
    )
    assert made.status_code == 200, made.text
    harness = made.json()
    assert [skill["name"] for skill in harness["skills"]] == ["UHP-ARTIFACTS"]
    inherited = [skill["name"] for skill in harness[BUILTIN_SKILLS_FIELD]]
    assert "uhp-artifacts" not in inherited  # the own one replaces it
    again = await server.client.put(f"/v1/harnesses/{harness['id']}", json=harness)
    assert again.status_code == 200, again.text  # a GET→PUT round trip holds


async def test_the_skill_shorthand_has_the_per_file_limit_too(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as server:
        big = {"name": "big", "content": "x" * (2 * 1024 * 1024 + 1)}
        refused = await server.client.post(
            "/v1/harnesses", json={"base": server.base.name, "skills": [big]}
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["param"] == "skills[0].content"


# -- names, and what an agent can leave in its workspace --------------------------------------
@pytest.mark.parametrize("name", ["中" * 100 + ".txt", "💥" * 130 + ".txt", "💥" * 130, "a" * 300])
def test_a_safe_filename_fits_a_file_systems_limit_in_bytes(name: str, tmp_path: Path) -> None:
    safe = safe_filename(name)
    assert len(safe.encode()) <= MAX_NAME_BYTES
    assert safe.endswith(".txt") == name.endswith(".txt")
    (tmp_path / safe).write_text("x")  # and the file system takes it
    (tmp_path / safe.replace(".txt", " (2).txt")).write_text("x")


# Every bidirectional control: the marks, embeddings and overrides, isolates, Arabic's mark.
BIDI_CONTROLS = [chr(c) for c in (0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))]
BIDI_CONTROLS.append("\u061c")


@pytest.mark.parametrize("control", BIDI_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_bidirectional_control_never_becomes_part_of_a_file_name(control: str) -> None:
    """`invoice<U+202E>fdp.exe` shows as `invoiceexe.pdf`: refused in a skill's or plugin's
    file path, replaced in an uploaded, attached or downloaded file's name."""
    disguised = f"invoice{control}fdp.exe"
    with pytest.raises(ApiError) as refused:
        normalise_path(f"scripts/{disguised}", "skills[0].files[1].path")
    assert refused.value.param == "skills[0].files[1].path"
    assert safe_filename(disguised) == "invoice_fdp.exe"
    assert quote(control) not in content_disposition(disguised)  # its UTF-8 name too
    assert entry_names([SimpleNamespace(filename=f"d/{disguised}")]) == ["d/invoice_fdp.exe"]


def test_a_name_in_a_right_to_left_script_is_still_a_name() -> None:
    assert normalise_path("docs/تقرير.md", "p") == "docs/تقرير.md"
    assert safe_filename("דוח.pdf") == "דוח.pdf"


def test_archive_names_never_repeat_a_name_a_file_really_has() -> None:
    rows = [SimpleNamespace(filename=n) for n in ("a.txt", "a (2).txt", "a.txt", "a.txt")]
    names = entry_names(rows)
    assert names == ["a.txt", "a (2).txt", "a (3).txt", "a (4).txt"]


def test_archive_names_extract_anywhere_as_they_were_meant() -> None:
    agent_wrote = ("..\\..\\evil.bat", "A.txt", "a.txt", "new\nline.txt", "d/x")
    names = entry_names([SimpleNamespace(filename=n) for n in agent_wrote])
    assert names == [".._.._evil.bat", "A.txt", "a (2).txt", "new_line.txt", "d/x"]
    header = content_disposition("..\\..\\evil.bat")
    assert "\\" not in header and "%5C" not in header and header.endswith("''evil.bat")


def _deep_tree(root: Path, depth: int) -> None:
    """`depth` nested folders under root: past PATH_MAX and Python's recursion limit, made
    with descriptors as an agent's loop of mkdir and chdir would."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("dd", dir_fd=fd)
            inner = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_tree_past_path_max_is_removed_whole(tmp_path: Path) -> None:
    _deep_tree(tmp_path / "session", 2200)
    try:
        assert remove_tree(tmp_path / "session")
        assert not (tmp_path / "session").exists()
    finally:  # pytest's own clean-up could not remove it either
        subprocess.run(["rm", "-rf", str(tmp_path / "session")], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands folders over to the agent's uid")
def test_handing_a_tree_past_path_max_over_never_fails_the_turn(tmp_path: Path) -> None:
    _deep_tree(tmp_path / "workspace", 2200)
    try:
        assert hand_over(1000, 1000, tmp_path / "workspace") > 0
        assert (tmp_path / "workspace").stat().st_uid == 1000
    finally:
        subprocess.run(["rm", "-rf", str(tmp_path / "workspace")], check=False)
