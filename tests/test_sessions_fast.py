"""The clarified session surface (Sessions §3, §5, §6 as 2026-08-11's clarifications and
2026-10-04 state them), in-process on the FakeBase: deleting at the protocol's path, the
shared view for a JSON client and a browser, the share object, turn items."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.fakes import Hang, Write, answer
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from tests.support.waiting import wait_for


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
