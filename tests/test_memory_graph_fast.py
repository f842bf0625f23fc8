"""The Memories chapter's graph (§6.6), file parts (§4.3, §7), snapshots (§5.3) and what the
embedded provider refuses (jobs §5.1, operations §8, consolidation runs §9.2), in-process, on
the database under test; with two principals: no node or edge target, file or byte of one
reaches the other without a grant."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from tests.test_memories_fast import Other
from uhp_server.api_docs.document import SPEC_PATH

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, memories="preview"
    ) as running:
        yield running


def _code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


async def _memory(server: InProcess, name: str, **body: Any) -> dict[str, Any]:
    response = await server.client.post("/v1/memories", json={"name": name, **body})
    assert response.status_code == 200, response.text
    return response.json()


async def _record(server: InProcess, mid: str, **body: Any) -> dict[str, Any]:
    response = await server.client.post(f"/v1/memories/{mid}/records", json=body)
    assert response.status_code == 200, response.text
    validate("MemoryRecord", response.json())
    return response.json()


async def _upload(
    server: InProcess,
    data: bytes = PNG,
    name: str = "dot.png",
    media: str = "image/png",
    headers: dict[str, str] | None = None,
) -> str:
    answer = await server.client.post(
        "/v1/files", files={"file": (name, data, media)}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


async def _graph(
    server: InProcess, mid: str, headers: dict[str, str] | None = None, **body: Any
) -> dict[str, Any]:
    answer = await server.client.post(f"/v1/memories/{mid}/graph", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    validate("MemoryGraph", answer.json())
    return answer.json()


def _node_ids(graph: dict[str, Any]) -> set[str]:
    return {node["record"]["id"] for node in graph["nodes"]}


# -- the graph (§6.6) ---------------------------------------------------------------------
async def test_two_entities_and_the_fact_between_them_are_one_graph(server: InProcess) -> None:
    root = await _memory(server, "Company")
    acme = await _memory(server, "Acme", parent_id=root["id"])
    dana = await _record(server, acme["id"], type="entity", title="Dana")
    quillon = await _record(server, acme["id"], type="entity", title="Quillon Freight")
    job = await _record(
        server,
        acme["id"],
        type="fact",
        content="Dana is head of procurement at Quillon Freight.",
        attributes={"predicate": "works_at"},
        references=[
            {"rel": "subject", "record_id": dana["id"]},
            {"rel": "object", "record_id": quillon["id"]},
        ],
    )
    two = await _graph(server, acme["id"], around=dana["id"], hops=2)
    assert two["object"] == "memory.graph" and two["truncated"] is False
    assert two["degraded"] == []
    assert _node_ids(two) == {dana["id"], quillon["id"], job["id"]}
    node = next(n for n in two["nodes"] if n["record"]["id"] == quillon["id"])
    assert node["memory"] == {"id": acme["id"], "name": "Acme"}
    assert node["record"]["trust"] == "untrusted"  # a record as any read returns it
    edges = {(e["from"]["record_id"], e["to"]["record_id"], e.get("rel")) for e in two["edges"]}
    assert edges == {(job["id"], dana["id"], "subject"), (job["id"], quillon["id"], "object")}
    assert all(e["available"] and e["to"]["memory_id"] == acme["id"] for e in two["edges"])
    # one hop from the subject: the fact is a node, the object at its other end is not
    one = await _graph(server, acme["id"], around=dana["id"])  # hops defaults to 1
    assert _node_ids(one) == {dana["id"], job["id"]}
    zero = await _graph(server, acme["id"], around=dana["id"], hops=0)
    assert _node_ids(zero) == {dana["id"]} and zero["edges"] == []
    # only some types; and asked of the parent, the whole readable subtree
    entities = await _graph(server, acme["id"], around=dana["id"], hops=2, types=["entity"])
    assert _node_ids(entities) == {dana["id"], quillon["id"]} and entities["edges"] == []
    everything = await _graph(server, root["id"], hops=0)
    assert _node_ids(everything) == {dana["id"], quillon["id"], job["id"]}
    limited = await _graph(server, root["id"], hops=0, limit=2)
    assert len(limited["nodes"]) == 2 and limited["truncated"] is True
    # the record to start from must be in the memory asked or below it
    above = await _record(server, root["id"], type="entity", title="Company HQ")
    refused = await server.client.post(
        f"/v1/memories/{acme['id']}/graph", json={"around": above["id"]}
    )
    assert refused.status_code == 404 and _code(refused) == "memory_record_not_found"
    # a forgotten record leaves the graph: as a start and as a node
    await server.client.delete(f"/v1/memories/{acme['id']}/records/{job['id']}")
    assert _node_ids(await _graph(server, acme["id"], around=dana["id"], hops=2)) == {dana["id"]}


async def test_a_revision_moves_the_edges_it_changes(server: InProcess) -> None:
    memory = await _memory(server, "Acme")
    a = await _record(server, memory["id"], type="entity", title="A")
    b = await _record(server, memory["id"], type="entity", title="B")
    fact = await _record(
        server, memory["id"], title="About A", references=[{"rel": "about", "record_id": a["id"]}]
    )
    assert fact["id"] in _node_ids(await _graph(server, memory["id"], around=a["id"]))
    revised = await server.client.patch(
        f"/v1/memories/{memory['id']}/records/{fact['id']}",
        json={"references": [{"rel": "about", "record_id": b["id"]}]},
    )
    assert revised.status_code == 200, revised.text
    assert _node_ids(await _graph(server, memory["id"], around=a["id"])) == {a["id"]}
    assert _node_ids(await _graph(server, memory["id"], around=b["id"])) == {b["id"], fact["id"]}


@pytest.mark.parametrize(
    "body",
    [
        {"hops": 4},
        {"hops": -1},
        {"hops": True},
        {"hops": "1"},
        {"limit": 0},
        {"limit": 10_000},
        {"types": []},
        {"types": "entity"},
        {"types": [3]},
        {"around": 7},
        {"around": ""},
    ],
)
async def test_a_graph_request_that_cannot_be_is_refused(
    server: InProcess, body: dict[str, Any]
) -> None:
    memory = await _memory(server, "Acme")
    answer = await server.client.post(f"/v1/memories/{memory['id']}/graph", json=body)
    assert answer.status_code == 422 and _code(answer) == "memory_invalid", answer.text


async def test_no_node_or_edge_target_of_one_principal_reaches_another(
    server: InProcess,
) -> None:
    """The other principal reads its own memory and was granted one branch of the owner's
    tree; the records it may not read are never nodes, and the edges into them say nothing
    but the record id they name."""
    secret = await _memory(server, "Secret", restricted=True)
    hidden = await _record(server, secret["id"], type="entity", title="Hidden person")
    shared = await _memory(server, "Shared")
    below = await _memory(server, "Below shared", parent_id=shared["id"])
    private = await _memory(server, "Private below", parent_id=shared["id"], restricted=True)
    visible = await _record(server, shared["id"], type="entity", title="Visible company")
    unseen = await _record(
        server,
        private["id"],
        title="Hidden fact about the company",
        references=[{"rel": "about", "record_id": visible["id"]}],
    )
    fact = await _record(
        server,
        below["id"],
        title="A fact with a hidden subject",
        references=[
            {"rel": "subject", "record_id": hidden["id"]},
            {"rel": "object", "record_id": visible["id"]},
        ],
    )
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{shared['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    h = other.headers
    for mid, body in (
        (shared["id"], {"around": visible["id"], "hops": 3}),
        (shared["id"], {"hops": 3}),
        (below["id"], {"around": fact["id"], "hops": 3}),
    ):
        graph = await _graph(server, mid, headers=h, **body)
        assert hidden["id"] not in _node_ids(graph) and unseen["id"] not in _node_ids(graph)
        for edge in graph["edges"]:
            if edge["to"]["record_id"] == hidden["id"]:
                assert edge == {
                    "from": {"memory_id": below["id"], "record_id": fact["id"]},
                    "to": {"record_id": hidden["id"]},
                    "available": False,
                }
            else:
                assert edge["available"] is True
            # nothing of the private memory: no edge from it either
            assert edge["from"]["record_id"] != unseen["id"]
        said = str(graph)
        assert secret["id"] not in said and private["id"] not in said
    # the owner sees all of it, the hidden subject among the nodes
    # (an edge may lead out of the subtree asked: its target is a node when it is readable)
    mine = await _graph(server, below["id"], around=fact["id"], hops=1)
    assert hidden["id"] in _node_ids(mine)
    assert {
        "from": {"memory_id": below["id"], "record_id": fact["id"]},
        "to": {"memory_id": secret["id"], "record_id": hidden["id"]},
        "rel": "subject",
        "available": True,
    } in mine["edges"]
    mine = await _graph(server, shared["id"], around=visible["id"], hops=1)
    assert unseen["id"] in _node_ids(mine) and fact["id"] in _node_ids(mine)
    # and a memory it was not granted is not there at all
    for mid in (secret["id"], private["id"]):
        answer = await server.client.post(f"/v1/memories/{mid}/graph", json={}, headers=h)
        assert answer.status_code == 404 and _code(answer) == "memory_not_found"
    # a start the other may not read is not found, as through any memory it is not in
    answer = await server.client.post(
        f"/v1/memories/{shared['id']}/graph", json={"around": unseen["id"]}, headers=h
    )
    assert answer.status_code == 404 and _code(answer) == "memory_record_not_found"


async def test_a_revision_cannot_give_a_record_a_second_subject_behind_a_hidden_one(
    server: InProcess,
) -> None:
    """§4.2: at most one `subject` and one `object`, also counting the references a reviser
    may not read, which it cannot remove and so keeps."""
    secret = await _memory(server, "Secret", restricted=True)
    person = await _record(server, secret["id"], type="entity", title="Dana")
    shared = await _memory(server, "Shared")
    company = await _record(server, shared["id"], type="entity", title="Quillon")
    fact = await _record(
        server,
        shared["id"],
        title="Dana works here",
        references=[{"rel": "subject", "record_id": person["id"]}],
    )
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{shared['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    path = f"/v1/memories/{shared['id']}/records/{fact['id']}"
    second = await server.client.patch(
        path,
        json={"references": [{"rel": "subject", "record_id": company["id"]}]},
        headers=other.headers,
    )
    assert second.status_code == 422 and _code(second) == "memory_invalid"
    about = await server.client.patch(
        path,
        json={"references": [{"rel": "object", "record_id": company["id"]}]},
        headers=other.headers,
    )
    assert about.status_code == 200, about.text
    kept = (await server.client.get(path)).json()["references"]
    assert [(r["rel"], r["record_id"]) for r in kept] == [
        ("object", company["id"]),
        ("subject", person["id"]),
    ]


# -- file parts (§4.3, §7) ------------------------------------------------------------------
async def test_a_file_part_is_completed_by_the_server_and_read_back_byte_for_byte(
    server: InProcess,
) -> None:
    memory = await _memory(server, "Brand")
    file_id = await _upload(server)
    record = await _record(
        server,
        memory["id"],
        type="note",
        content=[
            {"type": "text", "text": "The new logo."},
            {
                "type": "file",
                "file": {"id": file_id, "name": "forged.bin", "media_type": "x/y", "bytes": 1},
                "text": "A dot.",
                "text_source": "derived",
                "role": "user",
            },
        ],
    )
    part = record["content"][1]
    assert part == {
        "type": "file",
        "file": {"id": file_id, "name": "dot.png", "media_type": "image/png", "bytes": len(PNG)},
        "text": "A dot.",
        "text_source": "stated",  # the writer's words; only the provider's are derived
        "role": "user",
    }
    base = f"/v1/memories/{memory['id']}/records/{record['id']}"
    got = await server.client.get(f"{base}/content/1")
    assert got.status_code == 200 and got.content == PNG
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    for index in ("0", "2", "99"):  # a text part, and past the end
        answer = await server.client.get(f"{base}/content/{index}")
        assert answer.status_code == 404 and _code(answer) == "memory_record_not_found"
    for index in ("-1", "x", "9" * 40, "\u00b2"):
        answer = await server.client.get(f"{base}/content/{index}")
        assert answer.status_code in (404, 422), answer.text
    # a revision naming another file is a new version; the earlier one keeps its file
    text_id = await _upload(server, b"plain words", "words.txt", "text/plain")
    revised = await server.client.patch(
        base, json={"content": [{"type": "file", "file": {"id": text_id}}]}
    )
    assert revised.status_code == 200, revised.text
    assert (await server.client.get(f"{base}/content/0")).content == b"plain words"
    assert (await server.client.get(f"{base}/content/1", params={"version": "1"})).content == PNG
    written = record["time"]["written_at"]
    for bad in ({"version": "\u00b2"}, {"version": "x"}, {"as_of": "yesterday"}):
        answer = await server.client.get(f"{base}/content/1", params=bad)
        assert answer.status_code == 422 and _code(answer) == "memory_invalid", bad
    as_of = await server.client.get(f"{base}/content/1", params={"as_of": written})
    assert as_of.status_code == 200 and as_of.content == PNG
    # a reviser may send back the file it read: the version revised already names it
    back = await server.client.patch(base, json={"content": record["content"]})
    assert back.status_code == 200 and back.json()["content"][1]["file"]["name"] == "dot.png"
    # forgotten, the file leaves ordinary reads and stays in the history
    await server.client.delete(base)
    assert (await server.client.get(f"{base}/content/1", params={"version": "1"})).content == PNG


async def test_an_observed_turn_keeps_its_files_under_their_roles(server: InProcess) -> None:
    memory = await _memory(server, "Turns")
    file_id = await _upload(server)
    answer = await server.client.post(
        f"/v1/memories/{memory['id']}/observe",
        json={
            "episodes": [
                {
                    "content": [
                        {"type": "text", "text": "What is this?", "role": "user"},
                        {"type": "file", "file": {"id": file_id}, "role": "user"},
                        {"type": "text", "text": "A dot.", "role": "assistant"},
                    ]
                }
            ]
        },
    )
    assert answer.status_code == 200, answer.text
    episode = answer.json()["data"][0]
    assert episode["type"] == "episode"
    assert episode["content"][1]["file"]["media_type"] == "image/png"
    assert episode["content"][1]["role"] == "user"
    got = await server.client.get(f"/v1/memories/{memory['id']}/records/{episode['id']}/content/1")
    assert got.status_code == 200 and got.content == PNG


async def test_a_file_the_provider_does_not_keep_is_refused_and_nothing_is_stored(
    server: InProcess,
) -> None:
    memory = await _memory(server, "Brand")
    blob = await _upload(server, b"\x00\x01", "blob.bin", "application/octet-stream")
    answer = await server.client.post(
        f"/v1/memories/{memory['id']}/records",
        json={"content": [{"type": "file", "file": {"id": blob}}]},
    )
    assert answer.status_code == 422 and _code(answer) == "memory_unsupported"
    assert answer.json()["error"]["param"] == "content[0]"
    listed = await server.client.get(f"/v1/memories/{memory['id']}/records")
    assert listed.json()["data"] == []


async def test_files_and_their_bytes_are_one_principals_until_a_record_is_readable(
    server: InProcess,
) -> None:
    other = Other(server)
    theirs = await _upload(server, b"their bytes", "theirs.txt", "text/plain", other.headers)
    memory = await _memory(server, "Mine")
    # another principal's file is refused exactly as one that is not there
    answers = [
        await server.client.post(
            f"/v1/memories/{memory['id']}/records",
            json={"content": [{"type": "file", "file": {"id": file_id}}]},
        )
        for file_id in (theirs, "file_nothing")
    ]
    assert [a.status_code for a in answers] == [422, 422]
    said = [{k: v for k, v in a.json()["error"].items() if k != "detail"} for a in answers]
    assert said[0] == said[1]
    assert _code(answers[0]) == "memory_invalid"
    # the bytes of my record are not served to a caller who may not read it
    mine = await _upload(server, PNG)
    record = await _record(server, memory["id"], content=[{"type": "file", "file": {"id": mine}}])
    path = f"/v1/memories/{memory['id']}/records/{record['id']}/content/0"
    refused = await server.client.get(path, headers=other.headers)
    assert refused.status_code == 404 and _code(refused) == "memory_not_found"
    assert PNG not in refused.content
    # granted read, it may: the record's right, not the file's owner's
    await server.client.post(
        f"/v1/memories/{memory['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    allowed = await server.client.get(path, headers=other.headers)
    assert allowed.status_code == 200 and allowed.content == PNG
    # and writing, it still cannot name my file in a record of its own
    planted = await server.client.post(
        f"/v1/memories/{memory['id']}/records",
        json={"content": [{"type": "file", "file": {"id": mine}}]},
        headers=other.headers,
    )
    assert planted.status_code == 422 and _code(planted) == "memory_invalid"


async def test_erase_removes_the_bytes_nothing_else_uses_and_names_what_stays(
    server: InProcess,
) -> None:
    memory = await _memory(server, "Brand")
    blobs = server.ctx.blobs
    alone = await _upload(server, b"only here")
    shared = await _upload(server, b"named twice")
    copied = await _upload(server, b"also uploaded again")
    await _upload(server, b"also uploaded again", "again.png")  # the same bytes, another file
    one = await _record(server, memory["id"], content=[{"type": "file", "file": {"id": alone}}])
    two = await _record(
        server,
        memory["id"],
        content=[
            {"type": "file", "file": {"id": shared}},
            {"type": "file", "file": {"id": copied}},
        ],
    )
    three = await _record(server, memory["id"], content=[{"type": "file", "file": {"id": shared}}])
    erase = f"/v1/memories/{memory['id']}/erase"
    answer = await server.client.post(erase, json={"record_ids": [one["id"], two["id"]]})
    assert answer.status_code == 200, answer.text
    # one's bytes are gone; two's stay readable elsewhere (three names one, another file the
    # other), so two is reported as not fully reached
    assert answer.json() == {"erased": [one["id"], two["id"]], "unreachable": [two["id"]]}
    assert not blobs.exists(hashlib.sha256(b"only here").hexdigest())
    assert blobs.exists(hashlib.sha256(b"named twice").hexdigest())
    assert blobs.exists(hashlib.sha256(b"also uploaded again").hexdigest())
    base = f"/v1/memories/{memory['id']}/records/{three['id']}"
    assert (await server.client.get(f"{base}/content/0")).content == b"named twice"
    # an erased file cannot be named again
    again = await server.client.post(
        f"/v1/memories/{memory['id']}/records",
        json={"content": [{"type": "file", "file": {"id": alone}}]},
    )
    assert again.status_code == 422 and _code(again) == "memory_invalid"
    # three, erased last, takes the shared bytes with it
    last = await server.client.post(erase, json={"record_ids": [three["id"]]})
    assert last.json() == {"erased": [three["id"]], "unreachable": []}
    assert not blobs.exists(hashlib.sha256(b"named twice").hexdigest())


async def test_deleting_a_memory_releases_its_files(server: InProcess) -> None:
    memory = await _memory(server, "Brand")
    file_id = await _upload(server, b"kept by a memory")
    await _record(server, memory["id"], content=[{"type": "file", "file": {"id": file_id}}])
    assert (await server.client.delete(f"/v1/memories/{memory['id']}")).status_code == 200
    assert not server.ctx.blobs.exists(hashlib.sha256(b"kept by a memory").hexdigest())


# -- snapshots (§5.3) -----------------------------------------------------------------------
async def test_a_snapshot_names_an_instant_and_reading_as_of_it_reads_the_memory_then(
    server: InProcess,
) -> None:
    memory = await _memory(server, "Acme")
    record = await _record(server, memory["id"], content="Acme renews in March.")
    path = f"/v1/memories/{memory['id']}/snapshots"
    taken = await server.client.post(path, json={"name": "before-q2", "message": "as agreed"})
    assert taken.status_code == 200, taken.text
    snapshot = taken.json()
    validate("MemorySnapshot", snapshot)
    assert snapshot["object"] == "memory.snapshot" and snapshot["memory_id"] == memory["id"]
    base = f"/v1/memories/{memory['id']}/records"
    await server.client.patch(f"{base}/{record['id']}", json={"content": "Acme renews in April."})
    later = await _record(server, memory["id"], content="Acme moved to Leeds.")
    then = await server.client.get(f"{base}/{record['id']}", params={"as_of": snapshot["at"]})
    assert then.json()["content"][0]["text"] == "Acme renews in March."
    listed = await server.client.get(base, params={"as_of": snapshot["at"]})
    assert [r["id"] for r in listed.json()["data"]] == [record["id"]]
    assert later["id"] not in [r["id"] for r in listed.json()["data"]]
    snapshots = (await server.client.get(path)).json()
    validate("MemorySnapshotList", snapshots)
    assert [s["id"] for s in snapshots["data"]] == [snapshot["id"]]
    for body in ({}, {"name": ""}, {"name": 3}, {"name": "x", "message": 3}):
        bad = await server.client.post(path, json=body)
        assert bad.status_code == 422 and _code(bad) == "memory_invalid", body
    other = Other(server)
    for method in ("GET", "POST"):
        answer = await server.client.request(
            method, path, json={"name": "x"} if method == "POST" else None, headers=other.headers
        )
        assert answer.status_code == 404 and _code(answer) == "memory_not_found"
    await server.client.post(
        f"/v1/memories/{memory['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    forbidden = await server.client.post(path, json={"name": "x"}, headers=other.headers)
    assert forbidden.status_code == 403 and _code(forbidden) == "memory_forbidden"
    assert (await server.client.get(path, headers=other.headers)).status_code == 200


# -- what the embedded provider does not do (§5.1, §8, §9.2) ----------------------------------
async def test_what_the_provider_does_not_do_is_refused_in_the_chapters_words(
    server: InProcess,
) -> None:
    memory = await _memory(server, "Acme")
    record = await _record(server, memory["id"], content="A fact.")
    mid = memory["id"]
    job = await server.client.get(f"/v1/memories/{mid}/jobs/job_anything")
    assert job.status_code == 404 and _code(job) == "not_found"
    operation = f"/v1/memories/{mid}/records/{record['id']}/operations/reschedule"
    answer = await server.client.post(operation, json={})
    assert answer.status_code == 422 and _code(answer) == "memory_unsupported"
    missing = await server.client.post(
        f"/v1/memories/{mid}/records/hrec_nothing/operations/reschedule", json={}
    )
    assert missing.status_code == 404 and _code(missing) == "memory_record_not_found"
    for method, path in (
        ("GET", "consolidations"),
        ("POST", "consolidations"),
        ("GET", "consolidations/hcon_x"),
        ("GET", "consolidations/hcon_x/changes"),
        ("POST", "consolidations/hcon_x/revert"),
    ):
        answer = await server.client.request(method, f"/v1/memories/{mid}/{path}")
        assert answer.status_code == 422 and _code(answer) == "memory_unsupported", path
    # and a memory the caller may not see is not found, on every one of them
    other = Other(server)
    for method, path in (
        ("GET", f"/v1/memories/{mid}/jobs/job_anything"),
        ("POST", operation),
        ("GET", f"/v1/memories/{mid}/consolidations"),
        ("POST", f"/v1/memories/{mid}/graph"),
        ("GET", f"/v1/memories/{mid}/records/{record['id']}/content/0"),
    ):
        answer = await server.client.request(
            method, path, json={} if method == "POST" else None, headers=other.headers
        )
        assert answer.status_code == 404 and _code(answer) == "memory_not_found", path


async def test_every_operation_of_the_chapter_is_served(server: InProcess) -> None:
    spec = yaml.safe_load(SPEC_PATH.read_text())
    published = {
        (method, path)
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "patch", "delete")
        and "Memories" in operation.get("tags", [])
    }
    assert len(published) > 30  # the whole chapter, as its OpenAPI document has it
    ids = {
        "memory_id": "hmem_nothing",
        "record_id": "hrec_nothing",
        "grant_id": "hgnt_nothing",
        "job_id": "job_nothing",
        "run_id": "hcon_nothing",
        "index": "0",
        "name": "nothing",
        "harness_id": "chrn_nothing",
    }
    unserved = []
    for method, path in sorted(published):
        answer = await server.client.request(
            method.upper(), path.format(**ids), json={} if method in ("post", "put") else None
        )
        if answer.status_code in (404, 405) and _code(answer).startswith("uhpserver_"):
            unserved.append((method, path))
    assert unserved == []
