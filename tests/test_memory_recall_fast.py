"""Recall (Memories §6.1-§6.3), named and free queries (§6.4, §6.5) and the providers'
capability document (§10.2), in process, on the embedded provider: full-text recall on the
database under test (SQLite FTS5, or PostgreSQL text search with UHP_TEST_DATABASE=
postgresql), filters, fusion, `as_of`, and two principals: a recall never reaches a memory
the caller may not read, finds a granted memory inside a branch behind a cutoff, and never
looks above the memory asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from storage import memories as store
from storage import memory_search
from storage.memory_attributes import Lookup
from storage.unit import Tx
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.in_process import InProcess, in_process
from tests.support.schema import validate
from tests.test_memories_fast import Other, _code, _memory, _record, _tree, root_writer
from uhp_server.engine.facade import memory_recall
from uhp_server.errors import ApiError
from uhp_server.memories.access import Caller


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider):
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as running:
        yield running


async def _recall(
    server: InProcess, mid: str, headers: dict[str, str] | None = None, **body: Any
) -> dict[str, Any]:
    answer = await server.client.post(f"/v1/memories/{mid}/recall", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    validate("MemoryRecall", answer.json())
    return answer.json()


def _found(answer: dict[str, Any]) -> list[str]:
    return [hit["record"]["id"] for hit in answer["results"]]


async def _refused(server: InProcess, mid: str, body: Any) -> httpx.Response:
    answer = await server.client.post(f"/v1/memories/{mid}/recall", json=body)
    assert answer.status_code == 422, answer.text
    return answer


# -- the question covers the memory and what is below it (§6.1, §6.3) ---------------------
async def test_a_question_asked_of_a_parent_finds_below_names_where_and_never_looks_above(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    fact = await _record(
        server,
        child["id"],
        content="Quillon Freight renews its contract every March.",
        attributes={"account": "quillon"},
    )
    top = await _record(server, root["id"], content="Vellacourt is the parent's own fact.")
    own = await _recall(server, child["id"], text="renewal Quillon")
    assert _found(own) == [fact["id"]]
    assert own["parent"]["id"] == root["id"] and own["parent"]["records"] == {"count": 1}
    assert own["children"] == [] and own["degraded"] == [] and own["abstain"] is False
    hit = own["results"][0]
    assert hit["why"] == ["text"] and 0 < hit["score"] <= 1
    assert hit["record"]["trust"] == "untrusted" and hit["record"]["written_by"]["kind"] == "member"
    # asked of the parent: found below, and the result says where
    up = await _recall(server, root["id"], text="Quillon")
    assert _found(up) == [fact["id"]]
    assert up["results"][0]["memory"] == {"id": child["id"], "name": "Acme"}
    assert "parent" not in up  # a root
    assert up["children"] == [
        {
            "id": child["id"],
            "name": "Acme",
            "description": "What is known about Acme.",
            "records": {"count": 1},
        }
    ]
    assert _found(await _recall(server, root["id"], text="Quillon", depth=0)) == []
    # never above: the parent's own fact is not found from the child
    assert _found(await _recall(server, root["id"], text="Vellacourt")) == [top["id"]]
    below = await _recall(server, child["id"], text="Vellacourt")
    assert below["results"] == [] and below["abstain"] is True


async def test_what_the_provider_does_not_do_is_said_and_a_bad_request_is_refused(
    server: InProcess,
) -> None:
    _, child = await _tree(server)
    await _record(server, child["id"], content="Harlow Mills pays net sixty.")
    documents = (await server.client.get("/v1/memories/providers")).json()
    validate("MemoryProviderList", documents)
    embedded = documents["data"][0]
    assert embedded["id"] == "embedded" and embedded["recall"]["signals"] == ["text", "filters"]
    assert embedded["queries"]["free"] is False and embedded["queries"]["named"] is True
    # meaning is not declared (no embeddings): said, never ignored; words still answer
    alone = await _recall(server, child["id"], query="who pays late?")
    assert alone["degraded"] == ["query:not_supported"] and alone["results"] == []
    assert alone["abstain"] is True
    both = await _recall(server, child["id"], query="who pays late?", text="Harlow")
    assert both["degraded"] == ["query:not_supported"] and len(both["results"]) == 1
    for body, param in (
        ({}, None),
        ({"text": ""}, "text"),
        ({"text": "x", "limit": 0}, "limit"),
        ({"text": "x", "limit": 101}, "limit"),
        ({"text": "x", "depth": -1}, "depth"),
        ({"text": "x", "include": "some"}, "include"),
        ({"text": "x", "as_of": "yesterday"}, "as_of"),
        ({"text": "x", "types": "fact"}, "types"),
        ({"text": "x", "rerank": True}, "rerank"),
        ({"filters": {"field": "secret", "op": "eq", "value": 1}}, "filters"),
        ({"filters": {"field": "type", "op": "like", "value": "f"}}, "filters"),
        ({"filters": {"field": "attributes.a", "op": "in", "value": []}}, "filters"),
        ({"filters": {"field": "attributes.a", "op": "gt", "value": True}}, "filters"),
        ({"filters": {"or": []}}, "filters"),
        (
            {
                "filters": {
                    "and": [
                        {
                            "and": [
                                {"and": [{"and": [{"field": "type", "op": "eq", "value": "fact"}]}]}
                            ]
                        }
                    ]
                }
            },
            "filters",
        ),
    ):
        refused = await _refused(server, child["id"], body)
        assert _code(refused) == "memory_invalid", body
        if param is not None:
            assert refused.json()["error"]["param"] == param, body
    missing = await server.client.post("/v1/memories/hmem_nothing/recall", json={"text": "x"})
    assert missing.status_code == 404 and _code(missing) == "memory_not_found"


async def test_filters_fuse_with_words_and_reach_types_attributes_and_times(
    server: InProcess,
) -> None:
    _, child = await _tree(server)
    mid = child["id"]
    acme = await _record(
        server,
        mid,
        content="Acme wants its discount kept at renewal.",
        attributes={"account": "acme", "seats": 40, "vip": True, "region": {"code": "eu"}},
    )
    other = await _record(
        server,
        mid,
        type="note",
        content="Renewal talks with Harlow start in May.",
        attributes={"account": "harlow", "seats": 5},
    )
    untitled = await _record(server, mid, type="entity", title="Acme Corp")

    async def ids(filters: Any, **more: Any) -> set[str]:
        return set(_found(await _recall(server, mid, filters=filters, **more)))

    assert await ids({"field": "attributes.account", "op": "eq", "value": "acme"}) == {acme["id"]}
    assert await ids({"field": "attributes.account", "op": "ne", "value": "acme"}) == {other["id"]}
    assert await ids({"field": "attributes.seats", "op": "gt", "value": 10}) == {acme["id"]}
    assert await ids({"field": "attributes.seats", "op": "lte", "value": 40}) == {
        acme["id"],
        other["id"],
    }
    assert await ids({"field": "attributes.vip", "op": "eq", "value": True}) == {acme["id"]}
    assert await ids({"field": "attributes.region.code", "op": "eq", "value": "eu"}) == {acme["id"]}
    assert await ids({"field": "attributes.account", "op": "in", "value": ["acme", "harlow"]}) == {
        acme["id"],
        other["id"],
    }
    # a number is not a string: "40" matches nothing
    assert await ids({"field": "attributes.seats", "op": "eq", "value": "40"}) == set()
    assert await ids({"field": "type", "op": "eq", "value": "entity"}) == {untitled["id"]}
    assert await ids(
        {
            "or": [
                {"field": "type", "op": "eq", "value": "entity"},
                {"field": "attributes.seats", "op": "lt", "value": 10},
            ]
        }
    ) == {untitled["id"], other["id"]}
    assert await ids(
        [
            {"field": "type", "op": "eq", "value": "fact"},
            {"field": "time.written_at", "op": "gte", "value": "2020-01-01T00:00:00Z"},
        ]
    ) == {acme["id"]}
    assert (
        await ids({"field": "time.written_at", "op": "lt", "value": "2020-01-01T00:00:00Z"})
        == set()
    )
    # `types` narrows every signal
    assert set(_found(await _recall(server, mid, text="renewal", types=["note"]))) == {other["id"]}
    # words and fields fused: a record both find ranks first, and says both
    fused = await _recall(
        server,
        mid,
        text="renewal",
        filters={"field": "attributes.account", "op": "eq", "value": "acme"},
    )
    assert fused["results"][0]["record"]["id"] == acme["id"]
    assert fused["results"][0]["why"] == ["text", "filters"]
    assert [h["why"] for h in fused["results"][1:]] == [["text"]]
    assert fused["results"][0]["score"] > fused["results"][1]["score"] > 0
    # the title is searched with the content
    assert _found(await _recall(server, mid, text="Corp")) == [untitled["id"]]
    # fields alone that match nothing abstain; `limit` bounds the results
    nothing = await _recall(server, mid, filters={"field": "type", "op": "eq", "value": "link"})
    assert nothing["results"] == [] and nothing["abstain"] is True
    assert len((await _recall(server, mid, text="renewal Acme", limit=1))["results"]) == 1


async def test_nan_and_infinity_are_refused_and_a_malformed_stored_row_fails_no_filter(
    server: InProcess,
) -> None:
    """JSON has no NaN or Infinity, though Python's parser reads them: a write stating one
    is refused, and a row kept with one before (which SQLite's JSON functions cannot read)
    makes no filtered recall over it fail, the owner's nor a grantee's."""
    root, child = await _tree(server)
    mid = child["id"]
    as_json = {"content-type": "application/json"}
    url = f"/v1/memories/{mid}/records"
    # NaN and Infinity are not JSON, and 1e999 overflows to an infinity: the API's body
    # parser refuses each before the engine
    for raw in (b'{"a": NaN}', b'{"a": {"b": [1, Infinity]}}', b'{"a": -1e999}'):
        body = b'{"content": "seats", "attributes": ' + raw + b"}"
        refused = await server.client.post(url, content=body, headers=as_json)
        assert refused.status_code == 400 and _code(refused) == "invalid_input", refused.text
    kept = await _record(server, mid, content="Seats counted.", attributes={"seats": 1})
    # the engine refuses them from any door (the console's form, an agent's tools)
    caller = Caller(root_writer(kept))
    for said, param in (
        ({"content": "seats", "attributes": {"a": {"b": [1, float("inf")]}}}, "attributes"),
        ({"content": [{"type": "text", "text": "x", "x.n": float("nan")}]}, None),
    ):
        with pytest.raises(ApiError) as refusal:
            await server.ctx.engine.memories.remember(caller, mid, said)
        assert refusal.value.status == 422 and refusal.value.code == "memory_invalid"
        assert refusal.value.param == param
    listed = (await server.client.get(f"/v1/memories/{mid}/records")).json()["data"]
    assert [r["id"] for r in listed] == [kept["id"]]
    # a row as one was kept before the refusal: attributes no JSON parser here accepts
    plain = await _record(server, mid, content="Seats counted twice.", attributes={"seats": 12})
    spoilt = server.ctx.db.run(_spoil_attributes, kept["id"])
    untouched = set() if spoilt else {kept["id"]}  # (seats 1, where it could not be spoilt)
    other = Other(server)
    granted = await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    assert granted.status_code == 200
    for headers in (None, other.headers):
        for op in ("gte", "eq", "ne", "lt"):
            seats = {"field": "attributes.seats", "op": op, "value": 12}
            found = set(_found(await _recall(server, root["id"], headers, filters=seats)))
            assert found == ({plain["id"]} if op in ("gte", "eq") else untouched)
        vip = {"field": "attributes.vip", "op": "ne", "value": True}
        assert set(_found(await _recall(server, mid, headers, filters=vip))) == set()


# Attributes a filter on `account` must tell apart: strings near the one asked, one too long
# to be indexed, other JSON types, nested, absent.
_LOOKALIKES: list[Any] = [
    "acme",
    "ACME",
    "acme ",
    "é",
    "x" * 300,
    5,
    "5",
    True,
    None,
    ["acme"],
    {"code": "acme"},
]


async def test_a_filter_looked_up_in_the_attribute_index_finds_what_reading_every_version_does(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: a condition `attributes.<name>` eq (or in) a string is looked up in the
    index of attributes, not evaluated on every version covered. The index only narrows:
    each question, asked with the index and again reading every version, finds the same
    records in the same order, over the current versions, `as_of` an earlier instant, with
    forgotten ones, and after an erasure (which leaves no row of the record in the index)."""
    root, child = await _tree(server)
    mid = child["id"]
    made = [
        await _record(server, mid, content=f"Lookalike {i}.", attributes={"account": value})
        for i, value in enumerate(_LOOKALIKES)
    ]
    other_name = await _record(server, mid, content="Named otherwise.", attributes={"acct": "acme"})
    above = await _record(
        server, root["id"], content="At the root.", attributes={"account": "acme"}
    )
    moved = made[1]  # ACME, then acme: an earlier instant finds it by its first version
    before = moved["time"]["written_at"]
    patched = await server.client.patch(
        f"/v1/memories/{mid}/records/{moved['id']}", json={"attributes": {"account": "acme"}}
    )
    assert patched.status_code == 200, patched.text
    forgotten = made[2]
    assert (await server.client.delete(f"/v1/memories/{mid}/records/{forgotten['id']}")).is_success
    erased = made[3]
    gone = await server.client.post(
        f"/v1/memories/{mid}/erase", json={"record_ids": [erased["id"]]}
    )
    assert gone.status_code == 200, gone.text
    assert server.ctx.db.run(_indexed_rows, erased["id"]) == 0
    assert server.ctx.db.run(_indexed_rows, made[0]["id"]) == 1

    def account(op: str, value: Any) -> dict[str, Any]:
        return {"field": "attributes.account", "op": op, "value": value}

    questions: list[dict[str, Any]] = [
        {"filters": account("eq", "acme")},
        {"filters": account("eq", "ACME"), "as_of": before},
        {"filters": account("eq", "acme "), "include": "all"},
        {"filters": account("eq", "é")},
        {"filters": account("eq", "x" * 300)},
        {"filters": account("eq", "5")},
        {"filters": account("in", ["acme", "5", "nobody"])},
        {
            "filters": {
                "or": [
                    account("eq", "acme"),
                    {"field": "attributes.acct", "op": "eq", "value": "acme"},
                ]
            }
        },
        {
            "filters": {
                "and": [account("eq", "acme"), {"field": "type", "op": "eq", "value": "fact"}]
            }
        },
        {"filters": [account("ne", "acme"), account("eq", "5")]},
        {"filters": account("eq", "acme"), "text": "lookalike"},
    ]
    indexed = [await _recall(server, root["id"], **question) for question in questions]
    monkeypatch.setattr(memory_search, "lookups", lambda conditions: None)  # every version
    for question, answer in zip(questions, indexed, strict=True):
        assert answer == await _recall(server, root["id"], **question), question
    first, by_then, with_forgotten = (set(_found(a)) for a in indexed[:3])
    assert first == {made[0]["id"], moved["id"], above["id"]}
    assert by_then == {moved["id"]}
    assert with_forgotten == {forgotten["id"]}
    assert set(_found(indexed[4])) == {made[4]["id"]}  # too long to be indexed: read
    assert set(_found(indexed[5])) == {made[6]["id"]}  # "5", not 5
    assert set(_found(indexed[7])) == first | {other_name["id"]}


def _indexed_rows(tx: Tx, record_id: str) -> int:
    rows = tx.rows("SELECT count(*) FROM memory_record_attribute WHERE record_id = ?", (record_id,))
    return int(rows[0][0])


def test_only_string_conditions_on_a_top_level_attribute_are_looked_up() -> None:
    """What may be looked up (every version holding the value is in the index) and what is
    read instead: numbers, true and null, `ne` and ranges, nested names, strings too long,
    an `or` with any member that cannot be looked up."""
    account = memory_search.Condition("attributes.account", "eq", "acme")
    assert memory_search.lookups([account]) == [Lookup("account", ("acme",))]
    among = memory_search.Condition("attributes.account", "in", ["a", "b"])
    assert memory_search.lookups([among]) == [Lookup("account", ("a", "b"))]
    kind = memory_search.Condition("type", "eq", "fact")
    assert memory_search.lookups([kind, account]) == [Lookup("account", ("acme",))]
    assert memory_search.lookups([memory_search.AllOf((kind, account))]) == [
        Lookup("account", ("acme",))
    ]
    either = memory_search.AnyOf((account, memory_search.Condition("attributes.b", "eq", "c")))
    assert memory_search.lookups([either]) == [Lookup("account", ("acme",)), Lookup("b", ("c",))]
    for unindexed in (
        memory_search.Condition("attributes.seats", "eq", 5),
        memory_search.Condition("attributes.vip", "eq", True),
        memory_search.Condition("attributes.gone", "eq", None),
        memory_search.Condition("attributes.account", "ne", "acme"),
        memory_search.Condition("attributes.account", "gte", "a"),
        memory_search.Condition("attributes.region.code", "eq", "eu"),
        memory_search.Condition("attributes.account", "eq", "x" * 300),
        memory_search.Condition("attributes.account", "in", ["acme", 5]),
        memory_search.AnyOf((account, kind)),
        kind,
    ):
        assert memory_search.lookups([unindexed]) is None, unindexed


def _spoil_attributes(tx: Tx, record_id: str) -> bool:
    """Attributes as Python's json.dumps wrote a NaN before writes refused it. On SQLite
    (a text column) such a row could be kept; PostgreSQL's json column never took one, so
    there nothing is changed (False)."""
    if tx.dialect.name != "sqlite":
        return False
    spoilt = '{"seats": NaN}'
    tx.execute("UPDATE memory_record SET attributes = ? WHERE id = ?", (spoilt, record_id))
    return True


async def test_recall_reads_as_of_an_instant_and_forgotten_records_only_when_asked(
    server: InProcess,
) -> None:
    _, child = await _tree(server)
    mid = child["id"]
    first = await _record(server, mid, content="The office is in Leeds.")
    before = first["time"]["written_at"]
    revised = await server.client.patch(
        f"/v1/memories/{mid}/records/{first['id']}", json={"content": "The office is in York."}
    )
    assert revised.status_code == 200
    assert _found(await _recall(server, mid, text="Leeds")) == []
    assert _found(await _recall(server, mid, text="York")) == [first["id"]]
    then = await _recall(server, mid, text="Leeds", as_of=before)
    assert _found(then) == [first["id"]] and then["results"][0]["record"]["version"] == 1
    assert _found(await _recall(server, mid, text="York", as_of=before)) == []
    await server.client.delete(f"/v1/memories/{mid}/records/{first['id']}")
    assert _found(await _recall(server, mid, text="York")) == []
    kept = await _recall(server, mid, text="York", include="all")
    assert _found(kept) == [first["id"]] and kept["results"][0]["record"]["status"] == "forgotten"


async def test_a_question_covers_at_most_the_cap_nearest_first_and_says_so(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_recall, "MAX_MEMORIES", 2)
    root, child = await _tree(server)
    deeper = await _memory(server, "Deeper", parent_id=child["id"])
    for mid in (root["id"], child["id"], deeper["id"]):
        await _record(server, mid, content=f"Ledger entry kept in {mid}.")
    capped = await _recall(server, root["id"], text="ledger")
    assert capped["degraded"] == ["subtree:capped_at_2_memories"]
    assert {h["memory"]["id"] for h in capped["results"]} == {root["id"], child["id"]}
    whole = await _recall(server, child["id"], text="ledger")
    assert whole["degraded"] == [] and len(whole["results"]) == 2


async def test_memories_the_caller_may_not_read_use_up_no_part_of_the_cap(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grantee that fills the owner's memory with restricted children of its own neither
    hides the owner's memories from its recall and graph nor shows in `degraded`; only past
    the bound on memories read is what lies further said to be left out."""
    monkeypatch.setattr(memory_recall, "MAX_MEMORIES", 5)
    monkeypatch.setattr(memory_recall, "MAX_READ", 30)
    root = await _memory(server, "Shared")
    mine = await _memory(server, "Notes", parent_id=root["id"])
    deep = await _memory(server, "Deep", parent_id=mine["id"])
    fact = await _record(server, deep["id"], content="The ledger is blue.")
    other = Other(server)
    granted = await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read", "create"]},
    )
    assert granted.status_code == 200

    async def junk(count: int) -> None:
        for index in range(count):
            made = await server.client.post(
                "/v1/memories",
                json={"name": f"junk {index}", "parent_id": root["id"], "restricted": True},
                headers=other.headers,
            )
            assert made.status_code == 200, made.text

    await junk(8)  # the nearest 5 below the root are now mostly the other's
    answer = await _recall(server, root["id"], text="ledger")
    assert _found(answer) == [fact["id"]] and answer["degraded"] == []
    graph = await server.client.post(f"/v1/memories/{root['id']}/graph", json={})
    assert graph.status_code == 200, graph.text
    assert [n["record"]["id"] for n in graph.json()["nodes"]] == [fact["id"]]
    assert graph.json()["degraded"] == []
    # the other reads its own junk and the owner's memories: 11 it may read, 5 covered
    theirs = await _recall(server, root["id"], other.headers, text="ledger")
    assert theirs["degraded"] == ["subtree:capped_at_5_memories"]
    # past the bound on memories read (30), what lies further is unknown: said to be capped
    await junk(25)
    bounded = await _recall(server, root["id"], text="ledger")
    assert _found(bounded) == [] and bounded["degraded"] == ["subtree:capped_at_5_memories"]


async def test_a_second_read_of_the_subtree_is_sized_by_the_share_the_caller_may_read(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: when the nearest memories read hold a few the caller may not read (a
    grantee's restricted children), the next read takes about as many more as that share
    says are missing, not five times as many; the question still covers the nearest it may
    read, and says it left some out."""
    monkeypatch.setattr(memory_recall, "MAX_MEMORIES", 10)
    reads: list[int | None] = []
    subtree = store.subtree

    def recorded(tx: Tx, memory_id: str, depth: int | None, most: int | None) -> store.Subtree:
        reads.append(most)
        return subtree(tx, memory_id, depth, most)

    monkeypatch.setattr(store, "subtree", recorded)
    root = await _memory(server, "Shared")
    other = Other(server)
    granted = await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["create"]},
    )
    assert granted.status_code == 200
    for index in range(3):  # the oldest, so the nearest: the owner may not read them
        made = await server.client.post(
            "/v1/memories",
            json={"name": f"theirs {index}", "parent_id": root["id"], "restricted": True},
            headers=other.headers,
        )
        assert made.status_code == 200, made.text
    mine = [(await _memory(server, f"mine {i}", parent_id=root["id"]))["id"] for i in range(14)]
    last = await _record(server, mine[-1], content="The ledger is green.")
    first = await _record(server, mine[0], content="The ledger is blue.")
    reads.clear()
    answer = await _recall(server, root["id"], text="ledger")
    # 10 read, 7 readable: 10 x 11 / 7 x 1.25 = 20 next (it was 50), and the nearest 10
    assert reads == [10, 20]
    assert _found(answer) == [first["id"]] and last["id"] not in _found(answer)
    assert answer["degraded"] == ["subtree:capped_at_10_memories"]


# -- two principals ----------------------------------------------------------------------------
async def test_no_recall_hit_of_one_principal_reaches_another_without_a_grant(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    secret = await _record(server, child["id"], content="The Quillon discount is 12 percent.")
    other = Other(server)
    h = other.headers
    mine = await _memory(server, "Mine", description="x")  # the other's own, below
    assert mine  # (the first principal's; the other makes its own)
    theirs = await server.client.post("/v1/memories", json={"name": "Theirs"}, headers=h)
    assert theirs.status_code == 200
    tid = theirs.json()["id"]
    await server.client.post(
        f"/v1/memories/{tid}/records", json={"content": "Quillon notes of the other."}, headers=h
    )
    for mid in (root["id"], child["id"]):
        refused = await server.client.post(
            f"/v1/memories/{mid}/recall", json={"text": "Quillon"}, headers=h
        )
        assert refused.status_code == 404 and _code(refused) == "memory_not_found"
    own = await _recall(server, tid, headers=h, text="Quillon discount")
    assert secret["id"] not in _found(own) and len(own["results"]) == 1
    # granted the child only: it finds the child's records, and sees no parent
    granted = await server.client.post(
        f"/v1/memories/{child['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    assert granted.status_code == 200
    there = await _recall(server, child["id"], headers=h, text="Quillon")
    assert _found(there) == [secret["id"]] and "parent" not in there
    assert (
        await server.client.post(
            f"/v1/memories/{root['id']}/recall", json={"text": "Quillon"}, headers=h
        )
    ).status_code == 404


async def test_a_recall_of_a_parent_finds_a_granted_memory_behind_a_cutoff_and_nothing_else(
    server: InProcess,
) -> None:
    root = await _memory(server, "Company")
    private = await _memory(server, "Private", parent_id=root["id"], restricted=True)
    shared = await _memory(server, "Shared inside", parent_id=private["id"])
    hidden = await _memory(server, "Hidden inside", parent_id=private["id"])
    open_child = await _memory(server, "Open", parent_id=root["id"])
    records = {
        mid: (await _record(server, mid, content=f"Beacon report for {name}."))["id"]
        for mid, name in (
            (root["id"], "root"),
            (private["id"], "private"),
            (shared["id"], "shared"),
            (hidden["id"], "hidden"),
            (open_child["id"], "open"),
        )
    }
    other = Other(server)
    for mid in (root["id"], shared["id"]):
        answer = await server.client.post(
            f"/v1/memories/{mid}/grants",
            json={"principal": other.principal, "privileges": ["read"]},
        )
        assert answer.status_code == 200
    found = await _recall(server, root["id"], headers=other.headers, text="beacon", limit=20)
    assert set(_found(found)) == {
        records[root["id"]],
        records[open_child["id"]],
        records[shared["id"]],
    }
    assert {c["id"] for c in found["children"]} == {open_child["id"]}  # the cut-off one unseen
    # asked of the granted memory inside the cutoff: its parent is not readable, not named
    inside = await _recall(server, shared["id"], headers=other.headers, text="beacon")
    assert _found(inside) == [records[shared["id"]]] and "parent" not in inside
    # the owner finds all five
    everything = await _recall(server, root["id"], text="beacon", limit=20)
    assert set(_found(everything)) == set(records.values())


async def test_a_reference_in_a_recalled_record_is_resolved_for_the_reader(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    target = await _record(server, root["id"], type="entity", title="Dana")
    fact = await _record(
        server,
        child["id"],
        content="Dana leads procurement at Quillon.",
        references=[{"rel": "about", "record_id": target["id"]}],
    )
    other = Other(server)
    await server.client.post(
        f"/v1/memories/{child['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    mine = await _recall(server, child["id"], text="procurement")
    assert mine["results"][0]["record"]["references"][0]["available"] is True
    theirs = await _recall(server, child["id"], headers=other.headers, text="procurement")
    assert _found(theirs) == [fact["id"]]
    assert theirs["results"][0]["record"]["references"] == [
        {"record_id": target["id"], "available": False}
    ]


# -- named and free queries (§6.4, §6.5) -----------------------------------------------------
TEMPLATE = {
    "text": {"$param": "topic"},
    "filters": {"field": "attributes.account", "op": "eq", "value": {"$param": "account"}},
}
OPEN_DEALS = {
    "description": "Deals for one account.",
    "params": {
        "type": "object",
        "required": ["account"],
        "properties": {"account": {"type": "string"}, "topic": {"type": "string"}},
        "additionalProperties": False,
    },
    "body": json.dumps(TEMPLATE),
}


async def test_a_named_query_is_defined_by_a_writer_and_runs_on_its_memory_alone(
    server: InProcess,
) -> None:
    root, child = await _tree(server)
    base = f"/v1/memories/{root['id']}/queries"
    deal = await _record(
        server,
        root["id"],
        content="Acme deal: 40 seats, renewal pending.",
        attributes={"account": "acme"},
    )
    below = await _record(
        server, child["id"], content="Acme deal in the child.", attributes={"account": "acme"}
    )
    defined = await server.client.put(f"{base}/deals_for", json=OPEN_DEALS)
    assert defined.status_code == 200, defined.text
    validate("MemoryQuery", defined.json())
    assert defined.json()["language"] == "uhp.recall" and defined.json()["requires"] == "read"
    listed = (await server.client.get(base)).json()
    validate("MemoryQueryList", listed)
    assert [q["name"] for q in listed["data"]] == ["deals_for"]
    ran = await server.client.post(f"{base}/deals_for", json={"params": {"account": "acme"}})
    assert ran.status_code == 200, ran.text
    validate("MemoryRecall", ran.json())
    assert _found(ran.json()) == [deal["id"]]  # the memory named, not the one below
    assert below["id"] not in _found(ran.json())
    worded = await server.client.post(
        f"{base}/deals_for", json={"params": {"account": "acme", "topic": "renewal"}}
    )
    assert worded.json()["results"][0]["why"] == ["text", "filters"]
    for params in ({}, {"account": 5}, {"account": "acme", "extra": 1}):
        refused = await server.client.post(f"{base}/deals_for", json={"params": params})
        assert refused.status_code == 422 and _code(refused) == "memory_invalid", params
    missing = await server.client.post(f"{base}/nothing", json={"params": {}})
    assert missing.status_code == 404
    # definitions that cannot be run are refused
    for name, body in (
        ("Bad Name", OPEN_DEALS),
        ("q", {**OPEN_DEALS, "body": "not json"}),
        ("q", {**OPEN_DEALS, "body": '{"text": {"$param": "undeclared"}}'}),
        ("q", {**OPEN_DEALS, "body": '{"text": "x", "depth": 3}'}),
        ("q", {**OPEN_DEALS, "params": {"type": "string"}}),
        ("q", {**OPEN_DEALS, "requires": "delete"}),
    ):
        refused = await server.client.put(f"{base}/{name}", json=body)
        assert refused.status_code == 422 and _code(refused) == "memory_invalid", (name, body)
    other_language = await server.client.put(f"{base}/q", json={**OPEN_DEALS, "language": "cypher"})
    assert other_language.status_code == 422 and _code(other_language) == "memory_unsupported"
    # free queries: not declared, so refused, after the memory is checked like any read
    free = await server.client.post(
        f"/v1/memories/{root['id']}/query", json={"language": "sql", "statement": "SELECT 1"}
    )
    assert free.status_code == 422 and _code(free) == "memory_unsupported"
    unknown = await server.client.post(
        "/v1/memories/hmem_nothing/query", json={"language": "sql", "statement": "SELECT 1"}
    )
    assert unknown.status_code == 404 and _code(unknown) == "memory_not_found"


async def test_named_queries_need_write_to_define_and_read_to_run(server: InProcess) -> None:
    root, _ = await _tree(server)
    base = f"/v1/memories/{root['id']}/queries"
    assert (await server.client.put(f"{base}/deals_for", json=OPEN_DEALS)).status_code == 200
    other = Other(server)
    h = other.headers
    unseen = await server.client.post(
        f"{base}/deals_for", json={"params": {"account": "a"}}, headers=h
    )
    assert unseen.status_code == 404 and _code(unseen) == "memory_not_found"
    assert (await server.client.get(base, headers=h)).status_code == 404
    await server.client.post(
        f"/v1/memories/{root['id']}/grants",
        json={"principal": other.principal, "privileges": ["read"]},
    )
    ran = await server.client.post(
        f"{base}/deals_for", json={"params": {"account": "a"}}, headers=h
    )
    assert ran.status_code == 200
    refused = await server.client.put(f"{base}/mine", json=OPEN_DEALS, headers=h)
    assert refused.status_code == 403 and _code(refused) == "memory_forbidden"
    writes = await server.client.put(
        f"{base}/writers_only", json={**OPEN_DEALS, "requires": "write"}
    )
    assert writes.status_code == 200
    needs = await server.client.post(
        f"{base}/writers_only", json={"params": {"account": "a"}}, headers=h
    )
    assert needs.status_code == 403 and _code(needs) == "memory_forbidden"


@pytest.mark.parametrize(
    "params",
    [
        # A regular expression runs on the server's loop: ^(a+)+$ on 30 a's and a ! takes
        # minutes, for every tenant at once.
        {"type": "object", "properties": {"t": {"type": "string", "pattern": "^(a+)+$"}}},
        {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}},
        # A reference to nothing, or to somewhere else, would only fail (or fetch) when run.
        {"type": "object", "properties": {"t": {"$ref": "#/nope"}}},
        {"type": "object", "properties": {"t": {"$ref": "http://example.com/s.json"}}},
        {"type": "object", "properties": {"t": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"t": {"$dynamicRef": "#meta"}}},
    ],
)
async def test_a_query_schema_that_would_cost_or_fail_at_run_time_is_refused(
    server: InProcess, params: dict[str, Any]
) -> None:
    root, _ = await _tree(server)
    body = {**OPEN_DEALS, "params": params}
    refused = await server.client.put(f"/v1/memories/{root['id']}/queries/q", json=body)
    assert refused.status_code == 422 and _code(refused) == "memory_invalid", refused.text
    assert refused.json()["error"]["param"] == "params"


async def test_a_query_schema_may_refer_to_its_own_definitions(server: InProcess) -> None:
    root, _ = await _tree(server)
    params = {
        "type": "object",
        "$defs": {"account": {"type": "string", "maxLength": 40}},
        "required": ["account"],
        "properties": {"account": {"$ref": "#/$defs/account"}, "topic": {"type": "string"}},
    }
    base = f"/v1/memories/{root['id']}/queries/deals"
    assert (await server.client.put(base, json={**OPEN_DEALS, "params": params})).is_success
    ran = await server.client.post(base, json={"params": {"account": "a"}})
    assert ran.status_code == 200, ran.text
    long = await server.client.post(base, json={"params": {"account": "a" * 41}})
    assert long.status_code == 422 and _code(long) == "memory_invalid"
    huge = await server.client.post(base, json={"params": {"account": "a" * 70_000}})
    assert huge.status_code == 422 and "at most" in huge.json()["error"]["message"]
