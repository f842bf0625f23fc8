"""The Memories chapter in-process, the part built so far (Memories §2-§5, §12, §13): the tree
and its listings, grants with inheritance and the restricted cutoff, records (remember,
observe, revise, forget, history, as_of), and two principals: nothing of one reaches the
other without a grant, and nobody's `written_by` can be forged. On by default;
UHP_MEMORIES=off turns the chapter off."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from storage import keys as key_store
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.hostile import BODY_CAP, DEEP
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from uhp_server.doors.uhp import memories as memories_door


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, memories="preview"
    ) as running:
        yield running


class Other:
    """A second principal: its own key, and the id a grant names it by."""

    def __init__(self, server: InProcess, name: str = "other-principal") -> None:
        _, key = server.ctx.db.run(key_store.create_key, name)
        self.id = server.ctx.db.run(key_store.ensure_principal, name).id
        self.principal = f"member:{self.id}"
        self.headers = {"Authorization": f"Bearer {key}"}


def root_writer(record: dict[str, Any]) -> str:
    return str(record["written_by"]["id"])


def _code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


async def _memory(server: InProcess, name: str, **body: Any) -> dict[str, Any]:
    response = await server.client.post("/v1/memories", json={"name": name, **body})
    assert response.status_code == 200, response.text
    validate("Memory", response.json())
    return response.json()


async def _record(server: InProcess, mid: str, **body: Any) -> dict[str, Any]:
    response = await server.client.post(f"/v1/memories/{mid}/records", json=body)
    assert response.status_code == 200, response.text
    validate("MemoryRecord", response.json())
    return response.json()


async def _ids(server: InProcess, query: str = "", **kwargs: Any) -> list[str]:
    response = await server.client.get(f"/v1/memories{query}", **kwargs)
    assert response.status_code == 200, response.text
    validate("MemoryList", response.json())
    return [m["id"] for m in response.json()["data"]]


async def _tree(server: InProcess) -> tuple[dict[str, Any], dict[str, Any]]:
    root = await _memory(server, "Company", description="What the company knows.")
    child = await _memory(
        server, "Acme", description="What is known about Acme.", parent_id=root["id"]
    )
    return root, child


# -- on by default, off when the operator says so (§11) ------------------------------------
async def test_the_chapter_is_on_by_default_and_off_when_the_operator_turns_it_off(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(tmp_path / "off", provider.base_url, PROVIDER_KEY, memories="off") as off:
        discovery = (await off.client.get("/v1/uhp")).json()
        assert discovery["capabilities"]["memories"] is False
        for method, path in (
            ("GET", "/v1/memories"),
            ("GET", "/v1/memories/providers"),
            ("POST", "/v1/memories/hmem_x/records"),
            ("POST", "/v1/memories/hmem_x/recall"),
        ):
            answer = await off.client.request(method, path, json={} if method == "POST" else None)
            assert answer.status_code == 404 and _code(answer) == "uhpserver_route_not_found"
    async with in_process(tmp_path / "on", provider.base_url, PROVIDER_KEY) as on:
        assert (await on.client.get("/v1/uhp")).json()["capabilities"]["memories"] is True
        assert (await on.client.get("/v1/memories")).status_code == 200


# -- the tree (§2) --------------------------------------------------------------------------
async def test_a_memory_is_a_node_with_its_parent_ancestors_and_the_callers_privileges(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    assert root["parent_id"] is None and root["ancestors"] == []
    assert root["privileges"] == ["read", "write", "create", "delete"]  # its creator's
    assert root["provider"] == "embedded" and child["provider"] == "embedded"  # inherited
    assert child["parent_id"] == root["id"] and child["ancestors"] == [root["id"]]
    grandchild = await _memory(server, "Renewals", parent_id=child["id"])
    assert grandchild["ancestors"] == [root["id"], child["id"]]
    got = (await server.client.get(f"/v1/memories/{root['id']}")).json()
    assert got["children"] == {"count": 1} and got["records"] == {"count": 0}
    # one level at a time: where the caller enters, then each parent's direct children
    assert await _ids(server) == [root["id"]]
    assert await _ids(server, f"?parent={root['id']}") == [child["id"]]
    assert await _ids(server, f"?ancestor={root['id']}") == [child["id"], grandchild["id"]]
    # what it was given: the root, and nothing below where it may do the same
    assert await _ids(server, "?granted=true") == [root["id"]]
    missing = await server.client.get("/v1/memories/hmem_nothing")
    assert missing.status_code == 404 and _code(missing) == "memory_not_found"
    unknown_parent = await server.client.post(
        "/v1/memories", json={"name": "x", "parent_id": "hmem_nothing"}
    )
    assert unknown_parent.status_code == 404 and _code(unknown_parent) == "memory_not_found"


async def test_a_create_or_update_that_says_nothing_valid_is_refused(server: InProcess) -> None:
    root, _ = await _tree(server)
    for body in (
        {},
        {"name": ""},
        {"name": 3},
        {"name": "x", "restricted": "yes"},
        {"name": "x", "provider": "nowhere"},
        {"name": "x", "parent_id": 7},
    ):
        answer = await server.client.post("/v1/memories", json=body)
        assert answer.status_code == 422 and _code(answer) == "memory_invalid", body
    answer = await server.client.put(f"/v1/memories/{root['id']}", json={"provider": "other"})
    assert answer.status_code == 422 and _code(answer) == "memory_unsupported"
    answer = await server.client.get("/v1/memories?granted=maybe")
    assert answer.status_code == 422 and _code(answer) == "memory_invalid"


async def test_a_memory_moves_with_its_subtree_and_never_under_itself(server: InProcess) -> None:
    root, child = await _tree(server)
    grandchild = await _memory(server, "Renewals", parent_id=child["id"])
    for target in (root["id"], child["id"], grandchild["id"]):
        cycle = await server.client.put(f"/v1/memories/{root['id']}", json={"parent_id": target})
        assert cycle.status_code == 422 and _code(cycle) == "memory_invalid"
    other_root = await _memory(server, "Elsewhere")
    moved = await server.client.put(
        f"/v1/memories/{child['id']}",
        json={"parent_id": other_root["id"], "name": "Acme Ltd", "description": "Moved."},
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["ancestors"] == [other_root["id"]] and moved.json()["name"] == "Acme Ltd"
    below = (await server.client.get(f"/v1/memories/{grandchild['id']}")).json()
    assert below["ancestors"] == [other_root["id"], child["id"]]  # the subtree came along
    to_root = await server.client.put(f"/v1/memories/{child['id']}", json={"parent_id": None})
    assert to_root.json()["parent_id"] is None
    assert set(await _ids(server)) == {root["id"], other_root["id"], child["id"]}


async def test_deleting_a_memory_takes_its_descendants_and_their_records(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    record = await _record(server, child["id"], content="Acme pays net thirty.")
    deleted = await server.client.delete(f"/v1/memories/{root['id']}")
    assert deleted.status_code == 200, deleted.text
    validate("MemoryDeleted", deleted.json())
    assert deleted.json()["memories"] == [root["id"], child["id"]]
    for path in (
        f"/v1/memories/{root['id']}",
        f"/v1/memories/{child['id']}",
        f"/v1/memories/{child['id']}/records/{record['id']}",
    ):
        gone = await server.client.get(path)
        assert gone.status_code == 404 and _code(gone) == "memory_not_found", path
    assert await _ids(server) == []


# -- records (§4, §5) -----------------------------------------------------------------------
async def test_a_stated_record_is_kept_as_stated_and_stamped_by_the_server(
    server: InProcess,
) -> None:
    _, child = await _tree(server)
    record = await _record(
        server,
        child["id"],
        type="fact",
        content="Acme renews every March.",
        attributes={"account": "acme"},
        written_by={"kind": "member", "id": "someone-else", "type": "agent"},
        time={"valid_from": "2026-09-30T00:00:00Z", "written_at": "1999-01-01T00:00:00Z"},
    )
    assert record["content"] == [{"type": "text", "text": "Acme renews every March."}]
    assert record["trust"] == "untrusted" and record["memory_id"] == child["id"]
    assert record["version"] == 1 and record["supersedes"] is None
    assert record["status"] == "active" and record["attributes"] == {"account": "acme"}
    writer = record["written_by"]
    assert writer["kind"] == "member" and writer["id"] != "someone-else"
    assert writer["type"] == "human"
    assert record["time"]["valid_from"] == "2026-09-30T00:00:00Z"
    assert not record["time"]["written_at"].startswith("1999")  # the server's clock
    back = await server.client.get(f"/v1/memories/{child['id']}/records/{record['id']}")
    assert back.json() == record
    titled = await _record(server, child["id"], type="fact", title="Acme's year starts in Feb")
    assert titled["content"] == [] and titled["title"] == "Acme's year starts in Feb"
    carried = await _record(
        server,
        child["id"],
        type="x.calendar.event",
        content=[{"type": "text", "text": "Kick-off", "role": "user"}, {"type": "x.poll", "q": 1}],
    )
    assert carried["type"] == "x.calendar.event" and carried["content"][1] == {
        "type": "x.poll",
        "q": 1,
    }
    listed = (await server.client.get(f"/v1/memories/{child['id']}")).json()
    assert listed["records"] == {"count": 3}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"content": [{"type": "image", "url": "x"}]}, "memory_invalid"),
        ({"content": [{"type": "text"}]}, "memory_invalid"),
        ({"content": [{"type": "text", "text": "x", "role": "narrator"}]}, "memory_invalid"),
        ({"content": 5}, "memory_invalid"),
        ({}, "memory_invalid"),
        ({"content": "x", "type": "thought"}, "memory_invalid"),
        ({"content": "x", "title": "a\nb"}, "memory_invalid"),
        ({"content": "x", "title": "t" * 301}, "memory_invalid"),
        ({"content": "x", "attributes": []}, "memory_invalid"),
        ({"content": "x", "references": [{"rel": "about"}]}, "memory_invalid"),
        (
            {
                "content": "x",
                "references": [
                    {"rel": "subject", "record_id": "hrec_a"},
                    {"rel": "subject", "record_id": "hrec_b"},
                ],
            },
            "memory_invalid",
        ),
        ({"content": [{"type": "file", "file": {"id": "file_x"}}]}, "memory_invalid"),
        ({"content": [{"type": "file", "file": {}}]}, "memory_invalid"),
    ],
)
async def test_a_record_that_cannot_be_is_refused(
    server: InProcess, body: dict[str, Any], code: str
) -> None:
    root = await _memory(server, "Notes")
    answer = await server.client.post(f"/v1/memories/{root['id']}/records", json=body)
    assert answer.status_code == 422 and _code(answer) == code, answer.text
    listed = await server.client.get(f"/v1/memories/{root['id']}/records")
    assert listed.json()["data"] == []  # nothing was kept


async def test_a_revision_appends_a_version_and_keeps_what_it_does_not_state(
    server: InProcess,
) -> None:
    _, child = await _tree(server)
    first = await _record(
        server, child["id"], content="Acme renews in March.", attributes={"account": "acme"}
    )
    base = f"/v1/memories/{child['id']}/records/{first['id']}"
    revised = await server.client.patch(base, json={"content": "Acme renews in April."})
    assert revised.status_code == 200, revised.text
    second = revised.json()
    validate("MemoryRecord", second)
    assert second["id"] == first["id"] and second["version"] == 2 and second["supersedes"] == 1
    assert second["attributes"] == {"account": "acme"}  # not stated: kept
    history = (await server.client.get(base + "/history")).json()["data"]
    assert [v["version"] for v in history] == [1, 2]
    assert [v["status"] for v in history] == ["superseded", "active"]
    assert "March" in history[0]["content"][0]["text"] and history[0]["time"]["invalidated_at"]
    # as_of: the memory as it stood between the two
    between = history[0]["time"]["written_at"]
    then = await server.client.get(base, params={"as_of": between})
    assert then.json()["version"] == 1
    listed = await server.client.get(
        f"/v1/memories/{child['id']}/records", params={"as_of": between}
    )
    assert [r["version"] for r in listed.json()["data"]] == [1]
    assert (await server.client.get(base)).json()["version"] == 2
    refused = await server.client.patch(base, json={"type": "note"})
    assert refused.status_code == 422 and _code(refused) == "memory_invalid"
    bad_time = await server.client.get(base, params={"as_of": "yesterday"})
    assert bad_time.status_code == 422 and _code(bad_time) == "memory_invalid"


async def test_revisions_at_once_each_append_a_version(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    record = await _record(server, root["id"], content="v1")
    base = f"/v1/memories/{root['id']}/records/{record['id']}"
    answers = await asyncio.gather(
        *(server.client.patch(base, json={"content": f"v{n}"}) for n in range(2, 6))
    )
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert sorted(a.json()["version"] for a in answers) == [2, 3, 4, 5]
    history = (await server.client.get(base + "/history")).json()["data"]
    assert [v["version"] for v in history] == [1, 2, 3, 4, 5]
    assert [v["status"] for v in history] == ["superseded"] * 4 + ["active"]
    assert [v["supersedes"] for v in history] == [None, 1, 2, 3, 4]


async def test_a_forget_among_revisions_leaves_one_current_version(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    record = await _record(server, root["id"], content="v1")
    base = f"/v1/memories/{root['id']}/records/{record['id']}"
    answers = await asyncio.gather(
        server.client.patch(base, json={"content": "v2"}),
        server.client.delete(base),
        server.client.patch(base, json={"content": "v3"}),
    )
    # a revision that came after the forget is refused: the record was closed
    assert [a.status_code for a in answers][1] == 200
    assert all(a.status_code in (200, 422) for a in answers), [a.text for a in answers]
    history = (await server.client.get(base + "/history")).json()["data"]
    assert [v["status"] for v in history] == ["superseded"] * (len(history) - 1) + ["forgotten"]
    revised = sum(1 for a in (answers[0], answers[2]) if a.status_code == 200)
    assert len(history) == 1 + revised


async def test_the_same_grant_made_at_once_is_one_grant(server: InProcess) -> None:
    root = await _memory(server, "Shared")
    other = Other(server)
    url = f"/v1/memories/{root['id']}/grants"
    answers = await asyncio.gather(
        *(
            server.client.post(url, json={"principal": other.principal, "privileges": [p]})
            for p in ("read", "write", "create", "read")
        )
    )
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    grants = (await server.client.get(url)).json()["data"]
    assert [g["principal"] for g in grants].count(other.principal) == 1


async def test_the_types_are_the_core_types(server: InProcess) -> None:
    answer = await server.client.get("/v1/memories/types")
    assert answer.status_code == 200
    validate("MemoryTypeList", answer.json())
    assert [t["type"] for t in answer.json()["data"]] == [
        "episode",
        "fact",
        "note",
        "procedure",
        "link",
        "entity",
    ]


async def test_a_record_is_not_found_through_another_memory(server: InProcess) -> None:
    root, child = await _tree(server)
    record = await _record(server, child["id"], content="Kept in the child.")
    through = f"/v1/memories/{root['id']}/records/{record['id']}"
    for method, body in (("GET", None), ("PATCH", {"content": "x"}), ("DELETE", None)):
        answer = await server.client.request(method, through, json=body)
        assert answer.status_code == 404 and _code(answer) == "memory_record_not_found"
    history = await server.client.get(through + "/history")
    assert history.status_code == 404 and _code(history) == "memory_record_not_found"
    own = await server.client.get(f"/v1/memories/{child['id']}/records/{record['id']}")
    assert own.json()["status"] == "active" and own.json()["version"] == 1


async def test_forget_closes_a_record_and_keeps_its_trace(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    record = await _record(server, root["id"], content="Harlow Mills pays net sixty.")
    kept = await _record(server, root["id"], content="Harlow Mills is in Leeds.")
    base = f"/v1/memories/{root['id']}/records/{record['id']}"
    forgotten = await server.client.delete(base)
    assert forgotten.status_code == 200 and forgotten.json()["status"] == "forgotten"
    assert forgotten.json()["time"]["invalidated_at"] is not None
    assert (await server.client.get(base)).json()["status"] == "forgotten"
    records = f"/v1/memories/{root['id']}/records"
    assert [r["id"] for r in (await server.client.get(records)).json()["data"]] == [kept["id"]]
    everything = (await server.client.get(records, params={"include": "all"})).json()["data"]
    assert {r["id"] for r in everything} == {record["id"], kept["id"]}
    assert (await server.client.get(f"/v1/memories/{root['id']}")).json()["records"]["count"] == 1
    again = await server.client.patch(base, json={"content": "back"})
    assert again.status_code == 422 and _code(again) == "memory_invalid"
    history = (await server.client.get(base + "/history")).json()["data"]
    assert [v["status"] for v in history] == ["forgotten"]


@pytest.mark.skipif(
    postgres.TEST_DATABASE == "postgresql", reason="SQLite's own file: the PostgreSQL pass has none"
)
async def test_erased_words_are_gone_from_the_database_file(server: InProcess) -> None:
    # The full-text index keeps a deleted row's words in its segments until they are merged:
    # an erase merges them, so nothing of what was erased stays in the file.
    _, child = await _tree(server)
    word = "zebraquokka" + "42"
    record = await _record(server, child["id"], content=f"The code word is {word}.")
    await _record(server, child["id"], content="Something else entirely.")
    erased = await server.client.post(
        f"/v1/memories/{child['id']}/erase", json={"record_ids": [record["id"]]}
    )
    assert erased.status_code == 200, erased.text
    path = server.ctx.settings.db_path
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert word.encode() not in path.read_bytes()


async def test_erase_removes_every_version_for_good_and_needs_delete(server: InProcess) -> None:
    root, child = await _tree(server)
    record = await _record(server, child["id"], content="Harlow Mills pays net sixty.")
    kept = await _record(server, child["id"], content="Harlow Mills is in Leeds.")
    base = f"/v1/memories/{child['id']}/records/{record['id']}"
    await server.client.patch(base, json={"content": "Harlow Mills pays net ninety."})
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write", "create"]},
    )
    erase = f"/v1/memories/{child['id']}/erase"
    refused = await server.client.post(
        erase, json={"record_ids": [record["id"]]}, headers=other.headers
    )
    assert refused.status_code == 403 and _code(refused) == "memory_forbidden"
    # one id that is not a record of this memory: nothing is erased
    through = await server.client.post(
        f"/v1/memories/{root['id']}/erase", json={"record_ids": [record["id"]]}
    )
    assert through.status_code == 404 and _code(through) == "memory_record_not_found"
    mixed = await server.client.post(erase, json={"record_ids": [record["id"], "hrec_nothing"]})
    assert mixed.status_code == 404 and _code(mixed) == "memory_record_not_found"
    assert (await server.client.get(base)).status_code == 200
    bodies: list[dict[str, Any]] = [
        {},
        {"record_ids": []},
        {"record_ids": [3]},
        {"record_ids": "x"},
    ]
    for body in bodies:
        bad = await server.client.post(erase, json=body)
        assert bad.status_code == 422 and _code(bad) == "memory_invalid", body
    erased = await server.client.post(erase, json={"record_ids": [record["id"], record["id"]]})
    assert erased.status_code == 200, erased.text
    validate("MemoryErasure", erased.json())
    assert erased.json() == {"erased": [record["id"]], "unreachable": []}
    for path in (base, base + "/history", base + "?as_of=2000-01-01T00:00:00Z"):
        gone = await server.client.get(path)
        assert gone.status_code == 404 and _code(gone) == "memory_record_not_found", path
    everything = await server.client.get(
        f"/v1/memories/{child['id']}/records", params={"include": "all"}
    )
    assert [r["id"] for r in everything.json()["data"]] == [kept["id"]]


async def test_a_listing_is_paginated_and_filtered_by_type(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    ids = sorted([(await _record(server, root["id"], content=f"fact {n}"))["id"] for n in range(3)])
    note = await _record(server, root["id"], type="note", content="a note")
    records = f"/v1/memories/{root['id']}/records"
    first = (await server.client.get(records, params={"type": "fact", "limit": 2})).json()
    assert [r["id"] for r in first["data"]] == ids[:2] and first["next"] == ids[1]
    rest = await server.client.get(
        records, params={"type": "fact", "limit": 2, "cursor": first["next"]}
    )
    assert [r["id"] for r in rest.json()["data"]] == ids[2:] and rest.json()["next"] is None
    notes = (await server.client.get(records, params={"type": "note"})).json()["data"]
    assert [r["id"] for r in notes] == [note["id"]]
    for bad in ({"limit": "0"}, {"limit": "x"}, {"include": "some"}):
        answer = await server.client.get(records, params=bad)
        assert answer.status_code == 422 and _code(answer) == "memory_invalid", bad


async def test_observe_appends_episodes_as_they_arrived(server: InProcess) -> None:
    root = await _memory(server, "Agent notes")
    answer = await server.client.post(
        f"/v1/memories/{root['id']}/observe",
        json={
            "episodes": [
                {
                    "content": [
                        {"type": "text", "text": "When do we renew?", "role": "user"},
                        {"type": "text", "text": "In March.", "role": "assistant"},
                    ]
                },
                {"content": "A second turn.", "attributes": {"turn": 2}},
            ]
        },
    )
    assert answer.status_code == 200, answer.text
    validate("MemoryRecordList", answer.json())
    episodes = answer.json()["data"]
    assert [e["type"] for e in episodes] == ["episode", "episode"]
    assert [p["role"] for p in episodes[0]["content"]] == ["user", "assistant"]
    assert episodes[1]["attributes"] == {"turn": 2}
    bodies: list[dict[str, Any]] = [{}, {"episodes": []}, {"episodes": [{"attributes": {}}]}]
    for body in bodies:
        refused = await server.client.post(f"/v1/memories/{root['id']}/observe", json=body)
        assert refused.status_code == 422 and _code(refused) == "memory_invalid", body


# -- grants and two principals (§3, §13) -------------------------------------------------------
async def test_nothing_of_one_principal_reaches_another_without_a_grant(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    record = await _record(server, child["id"], content="Acme's discount is 12%.")
    other = Other(server)
    h = other.headers
    assert await _ids(server, "", headers=h) == []
    assert await _ids(server, "?granted=true", headers=h) == []
    paths = [
        ("GET", f"/v1/memories/{root['id']}", None),
        ("PUT", f"/v1/memories/{root['id']}", {"name": "Mine"}),
        ("DELETE", f"/v1/memories/{root['id']}", None),
        ("GET", f"/v1/memories?parent={root['id']}", None),
        ("GET", f"/v1/memories?ancestor={root['id']}", None),
        ("GET", f"/v1/memories/{root['id']}/grants", None),
        (
            "POST",
            f"/v1/memories/{root['id']}/grants",
            {"principal": other.principal, "privileges": ["read"]},
        ),
        ("POST", "/v1/memories", {"name": "Inside", "parent_id": root["id"]}),
        ("GET", f"/v1/memories/{child['id']}/records", None),
        ("GET", f"/v1/memories/{child['id']}/records/{record['id']}", None),
        ("GET", f"/v1/memories/{child['id']}/records/{record['id']}/history", None),
        ("PATCH", f"/v1/memories/{child['id']}/records/{record['id']}", {"content": "0%"}),
        ("DELETE", f"/v1/memories/{child['id']}/records/{record['id']}", None),
        ("POST", f"/v1/memories/{child['id']}/records", {"content": "planted"}),
        ("POST", f"/v1/memories/{child['id']}/observe", {"episodes": [{"content": "x"}]}),
    ]
    for method, path, body in paths:
        answer = await server.client.request(method, path, json=body, headers=h)
        # unknown and forbidden look the same: exactly the answer for a memory not there
        assert answer.status_code == 404 and _code(answer) == "memory_not_found", (method, path)
        assert answer.json()["error"]["message"] == "No memory with that id."
    # and none of it changed anything
    kept = (await server.client.get(f"/v1/memories/{child['id']}/records/{record['id']}")).json()
    assert kept["version"] == 1 and kept["status"] == "active"
    assert (await server.client.get(f"/v1/memories/{root['id']}")).json()["name"] == "Company"


async def test_a_grant_flows_down_and_a_restricted_memory_stops_it(server: InProcess) -> None:
    root, child = await _tree(server)
    private = await _memory(server, "Dana's notes", parent_id=child["id"], restricted=True)
    secret = await _record(server, private["id"], content="Dana is leaving in May.")
    other = Other(server)
    h = other.headers
    granted = await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    assert granted.status_code == 200, granted.text
    validate("MemoryGrant", granted.json())
    assert granted.json()["inherited"] is False and granted.json()["privileges"] == ["read"]
    # read reaches the child through the root; the restricted memory stays out of reach
    assert await _ids(server, "", headers=h) == [root["id"]]
    assert await _ids(server, f"?ancestor={root['id']}", headers=h) == [child["id"]]
    seen_child = (await server.client.get(f"/v1/memories/{child['id']}", headers=h)).json()
    assert seen_child["privileges"] == ["read"] and seen_child["children"] == {"count": 0}
    hidden = await server.client.get(f"/v1/memories/{private['id']}", headers=h)
    assert hidden.status_code == 404 and _code(hidden) == "memory_not_found"
    hidden_record = await server.client.get(
        f"/v1/memories/{private['id']}/records/{secret['id']}", headers=h
    )
    assert hidden_record.status_code == 404 and _code(hidden_record) == "memory_not_found"
    # what it sees without the privilege is forbidden, not unknown
    forbidden: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", f"/v1/memories/{child['id']}/records", {"content": "x"}),
        ("PUT", f"/v1/memories/{child['id']}", {"name": "x"}),
        ("DELETE", f"/v1/memories/{child['id']}", None),
        ("GET", f"/v1/memories/{child['id']}/grants", None),
        ("POST", "/v1/memories", {"name": "x", "parent_id": child["id"]}),
    ]
    for method, path, body in forbidden:
        answer = await server.client.request(method, path, json=body, headers=h)
        assert answer.status_code == 403 and _code(answer) == "memory_forbidden", (method, path)
    # a grant inside the restricted memory lets it in there, and only there
    await server.client.post(
        f"/v1/memories/{private['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    inside = (await server.client.get(f"/v1/memories/{private['id']}", headers=h)).json()
    assert inside["privileges"] == ["read", "write"]
    # it entered at the root and was given more below: both are what it was given
    assert await _ids(server, "?granted=true", headers=h) == [root["id"], private["id"]]
    written = await server.client.post(
        f"/v1/memories/{private['id']}/records",
        json={"content": "Noted.", "written_by": {"kind": "member", "id": "prin_owner"}},
        headers=h,
    )
    assert written.status_code == 200
    assert written.json()["written_by"] == {"kind": "member", "id": other.id, "type": "human"}
    # the grants as the owner reads them: the node each sits on, inherited or not
    owner = f"member:{root_writer(await _record(server, root['id'], content='x'))}"
    listed = await server.client.get(f"/v1/memories/{child['id']}/grants")
    validate("MemoryGrantList", listed.json())
    grants = {(g["memory_id"], g["principal"], g["inherited"]) for g in listed.json()["data"]}
    assert grants == {  # highest first: the root's, then the child's own (its creator's)
        (root["id"], owner, True),
        (root["id"], other.principal, True),
        (child["id"], owner, False),
    }
    assert listed.json()["data"][-1]["memory_id"] == child["id"]
    on_private = (await server.client.get(f"/v1/memories/{private['id']}/grants")).json()["data"]
    assert {(g["principal"], g["inherited"]) for g in on_private} == {  # the cutoff
        (owner, False),
        (other.principal, False),
    }


async def test_an_object_sent_back_as_it_was_read_moves_and_restricts_nothing(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{child['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    seen = (await server.client.get(f"/v1/memories/{child['id']}", headers=other.headers)).json()
    assert seen["parent_id"] is None and seen["ancestors"] == []  # the root is not its to see
    renamed = await server.client.put(
        f"/v1/memories/{child['id']}", json={**seen, "name": "Acme Ltd"}, headers=other.headers
    )
    assert renamed.status_code == 200, renamed.text
    owned = (await server.client.get(f"/v1/memories/{child['id']}")).json()
    assert owned["parent_id"] == root["id"] and owned["name"] == "Acme Ltd"  # not moved
    for change in ({"parent_id": None, "name": "x"}, {"restricted": True}):
        # null is what it sees, so the first moves nothing; restricting needs delete
        answer = await server.client.put(
            f"/v1/memories/{child['id']}", json={**seen, **change}, headers=other.headers
        )
        assert answer.status_code == (200 if "name" in change else 403), change
    assert (await server.client.get(f"/v1/memories/{child['id']}")).json()["restricted"] is False


async def test_a_grant_is_replaced_revoked_and_checked(server: InProcess) -> None:
    root = await _memory(server, "Shared")
    other = Other(server)
    url = f"/v1/memories/{root['id']}/grants"
    first = (
        await server.client.post(url, json={"principal": other.principal, "privileges": ["read"]})
    ).json()
    second = (
        await server.client.post(
            url, json={"principal": other.principal, "privileges": ["read", "write"]}
        )
    ).json()
    assert second["id"] == first["id"] and second["privileges"] == ["read", "write"]
    assert (await server.client.get(f"/v1/memories/{root['id']}", headers=other.headers)).json()[
        "privileges"
    ] == ["read", "write"]
    revoked = await server.client.delete(f"{url}/{first['id']}")
    assert revoked.status_code == 200 and revoked.json()["deleted"] is True
    gone = await server.client.get(f"/v1/memories/{root['id']}", headers=other.headers)
    assert gone.status_code == 404 and _code(gone) == "memory_not_found"
    again = await server.client.delete(f"{url}/{first['id']}")
    assert again.status_code == 404
    for body in (
        {"principal": "team:sales", "privileges": ["read"]},
        {"principal": "member:", "privileges": ["read"]},
        {"principal": "nobody", "privileges": ["read"]},
        {"principal": other.principal, "privileges": []},
        {"principal": other.principal, "privileges": ["admin"]},
        {"principal": other.principal},
    ):
        answer = await server.client.post(url, json=body)
        assert answer.status_code == 422 and _code(answer) == "memory_invalid", body
    for principal in ("group:sales", "x.team:blue"):
        ok = await server.client.post(url, json={"principal": principal, "privileges": ["read"]})
        assert ok.status_code == 200, ok.text


async def test_a_reference_shows_only_what_the_reader_may_read(server: InProcess) -> None:
    private = await _memory(server, "My notes", restricted=True)
    shared = await _memory(server, "Team")
    source = await _record(server, private["id"], type="entity", content="Dana")
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{shared['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    fact = await _record(
        server,
        shared["id"],
        content="Dana runs procurement.",
        references=[{"rel": "subject", "record_id": source["id"]}],
    )
    # the writer may read the target: placed in its memory, and shown whole
    assert fact["references"] == [
        {"memory_id": private["id"], "record_id": source["id"], "rel": "subject", "available": True}
    ]
    url = f"/v1/memories/{shared['id']}/records/{fact['id']}"
    seen = (await server.client.get(url, headers=other.headers)).json()
    assert seen["references"] == [{"record_id": source["id"], "available": False}]
    # the other revises the references it can see; the one it cannot stays as it was
    revised = await server.client.patch(
        url,
        json={"references": [{"rel": "about", "record_id": fact["id"], "memory_id": shared["id"]}]},
        headers=other.headers,
    )
    assert revised.status_code == 200, revised.text
    mine = (await server.client.get(url)).json()
    assert {(r["record_id"], r.get("rel")) for r in mine["references"]} == {
        (fact["id"], "about"),
        (source["id"], "subject"),
    }
    assert mine["written_by"]["id"] == other.id  # the version is the other's


# -- Idempotency-Key (§5.1) --------------------------------------------------------------------
async def test_a_write_repeated_with_its_idempotency_key_is_made_once(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    url = f"/v1/memories/{root['id']}/records"
    key = {"Idempotency-Key": "remember-1"}
    first = await server.client.post(url, json={"content": "Once."}, headers=key)
    again = await server.client.post(url, json={"content": "Once."}, headers=key)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    at_once = await asyncio.gather(
        *(
            server.client.post(url, json={"content": "Twice?"}, headers={"Idempotency-Key": "k2"})
            for _ in range(4)
        )
    )
    assert len({a.json()["id"] for a in at_once}) == 1
    listed = (await server.client.get(url)).json()["data"]
    assert sorted(r["content"][0]["text"] for r in listed) == ["Once.", "Twice?"]
    reused = await server.client.post(url, json={"content": "Other."}, headers=key)
    assert reused.status_code == 409 and _code(reused) == "uhpserver_idempotency_key_reused"
    elsewhere = await server.client.patch(
        f"{url}/{first.json()['id']}", json={"content": "Once."}, headers=key
    )
    assert elsewhere.status_code == 409  # the same key on another route is another request
    # revising twice with one key appends one version
    revise_key = {"Idempotency-Key": "revise-1"}
    for _ in range(2):
        revised = await server.client.patch(
            f"{url}/{first.json()['id']}", json={"content": "Revised."}, headers=revise_key
        )
        assert revised.json()["version"] == 2
    # keys are the principal's own: another's same key is another write
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "write"]},
    )
    theirs = await server.client.post(
        url, json={"content": "Once."}, headers={**key, **other.headers}
    )
    assert theirs.status_code == 200 and theirs.json()["id"] != first.json()["id"]


async def test_a_refused_write_gives_its_idempotency_key_back(server: InProcess) -> None:
    root = await _memory(server, "Notes")
    url = f"/v1/memories/{root['id']}/records"
    key = {"Idempotency-Key": "fix-and-retry"}
    refused = await server.client.post(url, json={"content": [{"type": "text"}]}, headers=key)
    assert refused.status_code == 422
    fixed = await server.client.post(url, json={"content": "Fixed."}, headers=key)
    assert fixed.status_code == 200, fixed.text
    too_long = await server.client.post(
        url, json={"content": "x"}, headers={"Idempotency-Key": "k" * 256}
    )
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "Idempotency-Key"


# -- hostile input: a clear error in the chapter's envelope, never a 5xx ----------------------
GARBAGE_BODIES = [
    b"",
    b"[]",
    b"null",
    b'"a string"',
    b"{",
    DEEP,
    b'{"name": NaN}',
    b'{"name": "a", "name": "b"}',
    b'{"name": "\\u0000", "content": "\\u0000", "principal": "member:\\u0000"}',
    b'{"name": {"a": 1}, "description": [], "parent_id": {}, "restricted": null}',
    b'{"content": [[]], "references": [{"record_id": {"a": 1}}], "time": []}',
    b'{"content": [{"type": null}], "attributes": null, "title": 5}',
    b'{"episodes": [[]], "record_ids": [null], "privileges": [null], "principal": 5}',
    b'{"episodes": {}, "record_ids": {}, "privileges": "read", "principal": []}',
    b'{"content": "' + b"x" * 40000 + b'", "title": "' + b"t" * 40000 + b'"}',
    b'{"principal": "member:' + b"x" * 5000 + b'", "privileges": ["read"]}',
    b'{"references": [' + b",".join([b'{"record_id": "r"}'] * 500) + b'], "content": "x"}',
]
GARBAGE_QUERIES = [
    {"limit": "99999999999999999999999"},
    {"limit": "-1"},
    {"limit": "\u00b2", "version": "\u00b2"},  # a digit to str.isdigit(), not to int()
    {"as_of": "9999-12-31T23:59:59+14:00"},
    {"as_of": "0001-01-01T00:00:00-14:00"},
    {"as_of": "\x00"},
    {"include": "all", "type": "x" * 5000, "cursor": "\u202e" * 100},
    {"granted": "true", "parent": "hmem_nothing"},
    {"parent": "", "ancestor": ""},
]


async def test_no_input_reaches_a_5xx_on_any_route_of_the_chapter(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        memories="preview",
        max_request_bytes=BODY_CAP,
    ) as server:
        root, child = await _tree(server)
        record = await _record(server, child["id"], content="A fact.")
        grant = (await server.client.get(f"/v1/memories/{root['id']}/grants")).json()["data"][0]
        ids = {
            "memory_id": child["id"],
            "record_id": record["id"],
            "grant_id": "hgnt_nothing",
            "name": "a_query",
            "index": "0",
            "job_id": "job_nothing",
            "run_id": "hcon_nothing",
        }
        routes = [
            (method, route.path)
            for route in memories_door.router.routes
            if isinstance(route, APIRoute)
            for method in sorted(route.methods or ())
        ]
        assert len(routes) >= 17
        codes: set[str] = set()
        for method, template in routes:
            path = template.format(**ids)
            for body in GARBAGE_BODIES if method in ("POST", "PUT", "PATCH") else [b""]:
                answer = await server.client.request(
                    method, path, content=body, headers={"Content-Type": "application/json"}
                )
                assert answer.status_code < 500, (method, path, body[:80], answer.text)
                if answer.status_code >= 400:
                    validate("ErrorEnvelope", answer.json())
                    codes.add(answer.json()["error"]["code"])
            for query in GARBAGE_QUERIES if method == "GET" else []:
                answer = await server.client.request(method, path, params=query)
                assert answer.status_code < 500, (method, path, query, answer.text)
            for odd in ("x" * 3000, "%00", "..%2f..", "\u202e"):
                answer = await server.client.request(
                    method, template.format(**{k: odd for k in ids}), json={}
                )
                assert answer.status_code < 500, (method, template, odd, answer.text)
        # the routes were reached, and refused what they were sent in the chapter's words
        assert {"memory_invalid", "invalid_input", "memory_not_found"} <= codes, codes
        # and the owner's tree is as it was
        assert (await server.client.get(f"/v1/memories/{root['id']}")).json()["name"] == "Company"
        assert grant["principal"].startswith("member:")


async def test_a_nul_character_is_refused_and_a_shared_memorys_filters_keep_working(
    server: InProcess,
) -> None:
    """JSON may carry U+0000, but PostgreSQL keeps none in text and its `json` operators fail
    on one: kept in one record's attributes, it made every filtered recall covering that
    record a 500, for every reader of a shared memory (found in review). Every body of the
    chapter holding one, anywhere, is refused `422 memory_invalid` naming where, and loses
    nothing; the memory's filters answer as before. Runs on both databases."""
    team = await _memory(server, "Team")
    mid = team["id"]
    kept = await _record(server, mid, content="renewal", attributes={"account": "acme"})
    asked = {"filters": {"field": "attributes.account", "op": "eq", "value": "acme"}}
    hostile: list[tuple[str, str, dict[str, Any], str]] = [
        (
            "POST",
            f"/v1/memories/{mid}/records",
            {"content": "p", "attributes": {"zz": "\0"}},
            "attributes.zz",
        ),
        (
            "POST",
            f"/v1/memories/{mid}/records",
            {"content": "p", "attributes": {"z\0": 1}},
            "attributes",
        ),
        ("POST", f"/v1/memories/{mid}/records", {"content": "a\0b"}, "content"),
        ("POST", f"/v1/memories/{mid}/records", {"title": "t\0"}, "title"),
        (
            "PATCH",
            f"/v1/memories/{mid}/records/{kept['id']}",
            {"attributes": {"n": ["\0"]}},
            "attributes.n[0]",
        ),
        (
            "POST",
            f"/v1/memories/{mid}/recall",
            {"filters": {**asked["filters"], "value": "\0"}},
            "filters.value",
        ),
        ("POST", f"/v1/memories/{mid}/recall", {"text": "renewal\0"}, "text"),
        ("POST", "/v1/memories", {"name": "N\0"}, "name"),
    ]
    for method, url, body, where in hostile:
        answer = await server.client.request(method, url, json=body)
        assert answer.status_code == 422, (url, body, answer.text)
        assert _code(answer) == "memory_invalid" and answer.json()["error"]["param"] == where
    answer = await server.client.post(f"/v1/memories/{mid}/recall", json=asked)
    assert answer.status_code == 200, answer.text
    assert [hit["record"]["id"] for hit in answer.json()["results"]] == [kept["id"]]
    listed = await server.client.get(f"/v1/memories/{mid}/records")
    assert [r["id"] for r in listed.json()["data"]] == [kept["id"]]  # nothing else was written
    # An id holding one is no id here: not found, never a 5xx.
    for path in ("/v1/memories/hmem_%00", f"/v1/memories/{mid}/records/hrec_%00"):
        got = await server.client.get(path)
        assert got.status_code == 404, (path, got.text)
