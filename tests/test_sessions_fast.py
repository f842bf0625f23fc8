"""The clarified session surface (Sessions §3, §5, §6 as 2026-08-11's clarifications and
2026-10-04 state them), in-process on the FakeBase: deleting at the protocol's path, the
shared view for a JSON client and a browser, the share object, turn items."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness_bases.events import ToolCallFinished, ToolCallStarted
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, Write, answer
from tests.support.in_process import API_KEY, InProcess, in_process
from tests.support.schema import validate
from tests.support.waiting import wait_for
from uhp_server.http.negotiation import preferred


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


async def _session(server: InProcess, prompt: str = "hello", **body: Any) -> dict[str, Any]:
    done = await server.submit(prompt, **body)
    assert done.status_code == 200, done.text
    return done.json()


def _anonymous(server: InProcess) -> httpx.AsyncClient:
    """A client holding nothing but a link: the in-process app, no credential."""
    return httpx.AsyncClient(
        transport=server.client._transport, base_url=server.client.base_url, timeout=30
    )


# -- Sessions §6: deleting -------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/sessions/{id}", "/v1/traces/{id}"])
async def test_a_session_is_deleted_at_the_protocol_path_and_at_the_older_one(
    server: InProcess, path: str
) -> None:
    server.base.script("make", [Write("out.txt", b"data\n"), *answer("made out.txt")])
    first = await _session(server, "make")
    session_id = first["metadata"]["session_id"]
    files = (await server.client.get(f"/v1/sessions/{session_id}/files")).json()
    assert [f["filename"] for f in files["files"]] == ["out.txt"]
    share = (await server.client.post(f"/v1/sessions/{session_id}/share")).json()
    async with _anonymous(server) as link:
        assert (await link.get(share["url"])).status_code == 200

        deleted = await server.client.delete(path.format(id=session_id))
        assert deleted.status_code == 200, deleted.text
        assert deleted.json() == {"id": session_id, "object": "session.deleted", "deleted": True}
        for gone in (
            f"/v1/sessions/{session_id}",
            f"/v1/sessions/{session_id}/turns",
            f"/v1/sessions/{session_id}/files",
            f"/v1/responses/{first['id']}",
        ):
            answer_ = await server.client.get(gone)
            assert answer_.status_code == 404, (gone, answer_.text)
        assert (await link.get(share["url"])).status_code == 404  # its published view too
    listed = (await server.client.get("/v1/sessions")).json()["sessions"]
    assert session_id not in [s["id"] for s in listed]
    # Deleting again, at either path, finds nothing: the two are one operation.
    for again in ("/v1/sessions/{id}", "/v1/traces/{id}"):
        missing = await server.client.delete(again.format(id=session_id))
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "session_not_found"


async def test_deleting_a_session_cancels_what_runs_in_it_first(server: InProcess) -> None:
    server.base.script("hang", [Hang()])
    running = await _session(server, "hang", background=True)
    session_id = running["metadata"]["session_id"]
    run = server.run(running["id"])
    deleted = await server.client.delete(f"/v1/sessions/{session_id}")
    assert deleted.status_code == 200, deleted.text
    assert run.log.current()["status"] == "cancelled"
    await wait_for(lambda: not server.sandbox.running)  # its process ended too
    assert (await server.client.get(f"/v1/sessions/{session_id}")).status_code == 404


async def test_only_the_owner_deletes_a_session(server: InProcess) -> None:
    session_id = (await _session(server))["metadata"]["session_id"]
    async with _anonymous(server) as nobody:
        refused = await nobody.delete(f"/v1/sessions/{session_id}")
        assert refused.status_code == 401
        validate("ErrorEnvelope", refused.json())
    missing = await server.client.delete("/v1/sessions/hsess_not_there")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"
    assert (await server.client.get(f"/v1/sessions/{session_id}")).status_code == 200


# -- Sessions §5: the share object and the shared view ------------------------------------
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _view_headers(answer: httpx.Response) -> None:
    assert answer.headers["vary"] == "Accept"  # one address, two bodies: caches keep them apart
    assert answer.headers["content-security-policy"] == PAGE_CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"


async def _shared(server: InProcess) -> tuple[dict[str, Any], dict[str, Any]]:
    server.base.script(
        "work",
        [
            ToolCallStarted("c1", "shell", '{"cmd": "echo data > out.txt"}'),
            ToolCallFinished("c1", "done"),
            Write("out.txt", b"data\n"),
            *answer("shared answer"),
        ],
    )
    result = await _session(server, "work")
    published = await server.client.post(f"/v1/sessions/{result['metadata']['session_id']}/share")
    assert published.status_code == 200, published.text
    return result, published.json()


async def test_the_share_object_carries_what_sessions_5_requires(server: InProcess) -> None:
    result, share = await _shared(server)
    session_id = result["metadata"]["session_id"]
    validate("SessionShare", share)
    assert share["object"] == "session.share" and share["id"].startswith("shr_")
    assert share["url"].startswith("/s/")  # base-relative: survives any proxy in front
    assert (await server.client.get(f"/v1/sessions/{session_id}/share")).json() == share
    assert (await server.client.post(f"/v1/sessions/{session_id}/share")).json() == share
    revoked = await server.client.delete(f"/v1/sessions/{session_id}/share")
    assert revoked.status_code == 200
    validate("SessionShare", revoked.json())
    assert revoked.json() | {"enabled": True} == share and revoked.json()["enabled"] is False


async def test_the_shared_view_is_json_for_a_program_and_the_page_for_a_browser(
    server: InProcess,
) -> None:
    result, share = await _shared(server)
    async with _anonymous(server) as link:
        answer_ = await link.get(share["url"], headers={"Accept": "application/json"})
        assert answer_.status_code == 200, answer_.text
        assert answer_.headers["content-type"] == "application/json"
        _view_headers(answer_)
        view = answer_.json()
        assert view["object"] == "session.shared_view"
        assert view["title"] == "work" and view["status"] == "completed"
        (turn,) = view["turns"]
        validate("TurnItem", {"id": "resp_", **turn})  # TurnItem's words, but no id
        assert turn["status"] == "completed" and turn["retained"] is True
        assert turn["user"] == "work" and turn["assistant"] == "shared answer"
        assert turn["tools"] == [
            {
                "name": "shell",
                "arguments": '{"cmd": "echo data > out.txt"}',
                "output": "done",
                "status": "completed",
            }
        ]
        (file,) = turn["files"]
        assert file["filename"] == "out.txt" and file["bytes"] == 5
        assert file["url"].startswith(share["url"] + "/files/")
        assert (await link.get(file["url"])).content == b"data\n"  # by the link alone
        # Nothing about the session a link holder should not have: ids, keys, metadata.
        raw = answer_.text
        for internal in (
            result["id"],
            result["metadata"]["session_id"],
            result["metadata"]["harness_id"],
            share["id"],
            API_KEY,
            PROVIDER_KEY,
        ):
            assert internal not in raw
        assert "usage" not in raw and "metadata" not in raw

        for accept in (BROWSER, None, "*/*", "text/html", "application/json;q=0.5, text/html"):
            page = await link.get(share["url"], headers={"Accept": accept} if accept else {})
            assert page.status_code == 200, accept
            assert page.headers["content-type"].startswith("text/html"), accept
            _view_headers(page)
            assert "shared answer" in page.text
        for accept in ("application/*", "text/html;q=0.1, application/json", "application/json"):
            asked = await link.get(share["url"], headers={"Accept": accept})
            assert asked.json()["object"] == "session.shared_view", accept


async def test_revoking_reaches_every_link_for_every_kind_of_client(server: InProcess) -> None:
    result, share = await _shared(server)
    session_id = result["metadata"]["session_id"]
    revoked = await server.client.delete(f"/v1/sessions/{session_id}/share")
    assert revoked.status_code == 200
    again = (await server.client.post(f"/v1/sessions/{session_id}/share")).json()
    assert again["url"] != share["url"]  # a new link; the first stays dead
    assert (await server.client.post(f"/v1/sessions/{session_id}/share")).json() == again
    assert (await server.client.delete(f"/v1/sessions/{session_id}/share")).status_code == 200
    async with _anonymous(server) as link:
        for url in (share["url"], again["url"]):
            as_json = await link.get(url, headers={"Accept": "application/json"})
            assert as_json.status_code == 404
            validate("ErrorEnvelope", as_json.json())
            assert as_json.json()["error"]["code"] == "uhpserver_share_not_found"
            _view_headers(as_json)
            page = await link.get(url, headers={"Accept": BROWSER})
            assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
            assert "shared answer" not in page.text
            _view_headers(page)
            assert (await link.get(url + "/state")).status_code == 404


async def test_a_turn_not_kept_shows_in_the_view_without_its_content(server: InProcess) -> None:
    server.base.script("secret", [Write("kept.txt", b"k"), *answer("secret answer")])
    first = await _session(server, "secret", store=False)
    session_id = first["metadata"]["session_id"]
    share = (await server.client.post(f"/v1/sessions/{session_id}/share")).json()
    async with _anonymous(server) as link:
        view = (await link.get(share["url"], headers={"Accept": "application/json"})).json()
    (turn,) = view["turns"]
    assert turn["retained"] is False and turn["status"] == "completed"
    assert [f["filename"] for f in turn["files"]] == ["kept.txt"]
    assert "user" not in turn and "assistant" not in turn
    assert "secret" not in str(view)


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "text/html"),
        ("", "text/html"),
        ("*/*", "text/html"),
        (BROWSER, "text/html"),
        ("application/json", "application/json"),
        ("Application/JSON", "application/json"),
        ("application/json, text/html", "text/html"),  # a tie: the route's own first choice
        ("text/html;q=0.2, application/json;q=0.3", "application/json"),
        ("application/*;q=0.9, text/*;q=0.8", "application/json"),
        ("application/json;q=0, */*", "text/html"),
        ("text/html;q=nan, application/json;q=0.1", "application/json"),
        ("image/png", "text/html"),  # nothing offered is wanted: the page, as before
    ],
)
def test_accept_chooses_between_the_page_and_json(accept: str | None, chosen: str) -> None:
    assert preferred(accept, ("text/html", "application/json")) == chosen


# -- Sessions §3: turn items -----------------------------------------------------------------
async def test_each_turn_item_has_the_shape_sessions_3_requires(server: InProcess) -> None:
    server.base.script(
        "work",
        [
            ToolCallStarted("c1", "shell", '{"cmd": "ls"}'),
            ToolCallFinished("c1", "out.txt"),
            Write("out.txt", b"data\n"),
            *answer("did the work"),
        ],
    )
    server.base.script("unkept", [Write("left.txt", b"x"), *answer("not kept")])
    server.base.script("quiet", answer("nothing made"))
    server.base.script("unkept-quiet", answer("not kept either"))
    server.base.script("hang", [Hang()])
    first = await _session(server, "work")
    chain = {"previous_response_id": first["id"]}
    unkept = await _session(server, "unkept", store=False, **chain)
    quiet = await _session(server, "quiet", previous_response_id=unkept["id"])
    unkept_quiet = await _session(
        server, "unkept-quiet", store=False, previous_response_id=quiet["id"]
    )
    running = await _session(
        server, "hang", background=True, previous_response_id=unkept_quiet["id"]
    )
    session_id = first["metadata"]["session_id"]

    listed = await server.client.get(f"/v1/sessions/{session_id}/turns")
    assert listed.status_code == 200
    turns = listed.json()["turns"]
    assert [t["id"] for t in turns] == [
        r["id"] for r in (first, unkept, quiet, unkept_quiet, running)
    ]
    for turn in turns:
        validate("TurnItem", turn)  # `id` and `status` at least
        assert turn["status"] in ("in_progress", "completed", "failed", "incomplete", "cancelled")
        for file in turn.get("files", []):
            validate("File", file)
    done, not_kept, nothing_made, not_kept_nothing_made, in_progress = turns
    # A kept turn carries all four the chapter names, and its id reads the response back.
    assert done["status"] == "completed"
    assert done["user"] == "work" and done["assistant"] == "did the work"
    assert [(t["name"], t["output"]) for t in done["tools"]] == [("shell", "out.txt")]
    assert [f["filename"] for f in done["files"]] == ["out.txt"]
    assert (await server.client.get(f"/v1/responses/{done['id']}")).json() == first
    assert nothing_made["files"] == [] and nothing_made["tools"] == []
    # A turn not kept has no content left to carry, but its files are kept and carried.
    assert not_kept["status"] == "completed"
    assert [f["filename"] for f in not_kept["files"]] == ["left.txt"]
    assert not {"user", "assistant", "tools"} & set(not_kept)
    assert set(not_kept_nothing_made) == {"id", "status", "created_at"}
    # A turn still running reads as the response does meanwhile.
    assert in_progress["status"] == "in_progress" and in_progress["user"] == "hang"
    await server.client.post(f"/v1/responses/{running['id']}/cancel")


# -- a client pinned to the first version ----------------------------------------------------
async def test_a_client_pinned_to_2026_08_11_is_served_the_same_objects(
    server: InProcess,
) -> None:
    pinned = {"UHP-Version": "2026-08-11"}
    server.base.script("work", [Write("out.txt", b"data\n"), *answer("done")])
    blocking = await server.submit("work", headers=pinned)
    assert blocking.status_code == 200 and blocking.headers["uhp-version"] == "2026-08-11"
    result = blocking.json()
    validate("Response", result)
    session_id = result["metadata"]["session_id"]
    async with server.client.stream(
        "POST",
        "/v1/responses",
        json={"input": "work", "stream": True, "previous_response_id": result["id"]},
        headers=pinned,
    ) as streamed:
        assert streamed.headers["uhp-version"] == "2026-08-11"
        assert "response.completed" in (await streamed.aread()).decode()
    for path in (
        f"/v1/responses/{result['id']}",
        f"/v1/responses/{result['id']}/input_items",
        f"/v1/sessions/{session_id}",
        f"/v1/sessions/{session_id}/turns",
        f"/v1/sessions/{session_id}/files",
    ):
        newest = await server.client.get(path)
        asked = await server.client.get(path, headers=pinned)
        assert asked.status_code == newest.status_code == 200, path
        assert asked.headers["uhp-version"] == "2026-08-11", path
        assert newest.headers["uhp-version"] == "2026-10-04", path
        assert asked.json() == newest.json(), path  # one code path: the header differs, only
    share = await server.client.post(f"/v1/sessions/{session_id}/share", headers=pinned)
    assert share.headers["uhp-version"] == "2026-08-11"
    validate("SessionShare", share.json())
    deleted = await server.client.delete(f"/v1/traces/{session_id}", headers=pinned)
    assert deleted.status_code == 200 and deleted.headers["uhp-version"] == "2026-08-11"
