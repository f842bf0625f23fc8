"""The mem0 memory provider against a real mem0 (local mode: Qdrant embedded on disk, history
in SQLite), its vectors from the scripted model provider's /v1/embeddings reached the way the
gateway reaches the configured provider (uhp_server/gateway/embeddings.py): the seam's
operations, recall by meaning, isolation between memories, erase, and the chapter's routes on
a memory bound to mem0. Nothing here is a mock: the only stand-in is the scripted provider.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MODELS, PROVIDER_KEY
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.in_process import in_process
from uhp_server.errors import ApiError
from uhp_server.gateway.embeddings import (
    GatewayEmbedder,
    embedder_for,
)
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.memories.mem0 import CAPABILITIES, FACTORY, Mem0Provider
from uhp_server.memories.provider import (
    FieldFilter,
    Listing,
    NewRecord,
    Question,
)
from uhp_server.memories.records import Writer
from uhp_server.memories.registry import ProviderSetup, ProviderSetupError, named_providers
from uhp_server.settings import Settings

pytestmark = pytest.mark.heavy  # a real mem0 opening Qdrant on disk: seconds per test, no CLI

EMBEDDING_MODEL = "embed-test"
WRITER = Writer(kind="member", id="prn_test")
A, B = "hmem_aaaa", "hmem_bbbb"


def _settings(provider: RunningProvider, **more: Any) -> Settings:
    return Settings(
        providers_file=None,
        OPENAI_API_KEY=PROVIDER_KEY,
        OPENAI_BASE_URL=provider.base_url,
        **more,
    )


@pytest.fixture
async def upstreams(provider: RunningProvider) -> AsyncIterator[Upstreams]:
    upstreams = Upstreams(_settings(provider))
    yield upstreams
    await upstreams.aclose()


@pytest.fixture
def embedder(provider: RunningProvider, upstreams: Upstreams) -> GatewayEmbedder:
    settings = _settings(provider, memory_embedding_model=EMBEDDING_MODEL)
    found = embedder_for(settings, upstreams)
    assert found is not None
    return found


@pytest.fixture
async def mem0(tmp_path: Path, embedder: GatewayEmbedder) -> AsyncIterator[Mem0Provider]:
    provider = Mem0Provider(embedder, tmp_path / "mem0")
    yield provider
    await provider.aclose()


def fact(memory_id: str, text: str, **fields: Any) -> NewRecord:
    return NewRecord(
        memory_id=memory_id,
        type=fields.pop("type", "fact"),
        title=fields.pop("title", None),
        content=[{"type": "text", "text": text}],
        attributes=fields.pop("attributes", {}),
        references=fields.pop("references", []),
        valid_from=None,
        valid_to=None,
        written_by=WRITER,
    )


# -- the seam's operations ------------------------------------------------------------------
async def test_remember_revise_forget_keep_every_version_in_mem0(mem0: Mem0Provider) -> None:
    stored = await mem0.remember(
        [fact(A, "Acme renews every March"), fact(A, "Dana leads the team", type="note")]
    )
    assert stored is not None
    first, second = stored
    assert (first.version, first.status, first.memory_id) == (1, "active", A)
    got = await mem0.get(A, first.id, None)
    assert got is not None and got.record.content == [
        {"type": "text", "text": "Acme renews every March"}
    ]
    assert got.record.written_by == WRITER

    revised = await mem0.append(first.id, 1, fact(A, "Acme renews every April"))
    assert revised is not None and (revised.version, revised.supersedes) == (2, 1)
    assert await mem0.append(first.id, 1, fact(A, "a stale revision")) is None
    history = await mem0.history(A, first.id)
    assert [(v.version, v.status) for v in history] == [(1, "superseded"), (2, "active")]
    assert history[0].invalidated_at_ms == history[1].written_at_ms
    held = await mem0.get(A, first.id, history[0].written_at_ms)
    assert held is not None and held.version == 1

    assert await mem0.counts([A]) == {A: 2}
    notes = await mem0.listing(Listing(A, type="note"))
    assert [v.id for v in notes] == [second.id]
    forgotten = await mem0.forget(A, second.id)
    assert forgotten is not None and forgotten.status == "forgotten"
    assert [v.id for v in await mem0.listing(Listing(A))] == [first.id]
    everything = await mem0.listing(Listing(A, include_forgotten=True))
    assert sorted(v.id for v in everything) == sorted([first.id, second.id])
    assert await mem0.counts([A]) == {A: 1}
    assert await mem0.locate([first.id, second.id, "hrec_none"]) == {first.id: A, second.id: A}


async def test_records_stay_on_disk_across_a_reopen(
    tmp_path: Path, embedder: GatewayEmbedder
) -> None:
    provider = Mem0Provider(embedder, tmp_path / "kept")
    stored = await provider.remember([fact(A, "kept across a restart")])
    await provider.aclose()
    reopened = Mem0Provider(embedder, tmp_path / "kept")
    try:
        assert stored is not None
        got = await reopened.get(A, stored[0].id, None)
        assert got is not None and got.record.content[0]["text"] == "kept across a restart"
    finally:
        await reopened.aclose()


async def test_pages_of_a_listing_follow_the_record_ids(mem0: Mem0Provider) -> None:
    stored = await mem0.remember([fact(A, f"fact number {i}") for i in range(5)])
    assert stored is not None
    ids = sorted(v.id for v in stored)
    page = await mem0.listing(Listing(A, limit=2))
    assert [v.id for v in page] == ids[:2]
    rest = await mem0.listing(Listing(A, after=ids[1], limit=10))
    assert [v.id for v in rest] == ids[2:]


async def test_referrers_are_the_current_records_naming_a_record(mem0: Mem0Provider) -> None:
    stored = await mem0.remember([fact(A, "Dana", type="entity")])
    assert stored is not None
    dana = stored[0].id
    more = await mem0.remember(
        [
            fact(A, "Dana moved to Berlin", references=[{"record_id": dana, "rel": "subject"}]),
            fact(A, "unrelated"),
        ]
    )
    assert more is not None
    found = await mem0.referrers([A], [dana])
    assert [v.id for v in found] == [more[0].id]


async def test_prime_is_the_records_stated_to_prime_newest_first(mem0: Mem0Provider) -> None:
    stored = await mem0.remember(
        [
            fact(A, "Always answer in English", attributes={"prime": True}),
            fact(A, "An ordinary fact"),
            fact(A, "an observed turn", type="episode", attributes={"prime": True}),
            fact(A, "Never push to main", attributes={"prime": True}),
        ]
    )
    await mem0.remember([fact(B, "B's own instructions", attributes={"prime": True})])
    assert stored is not None
    english, _, _, main = stored
    forgotten = await mem0.remember([fact(A, "forgotten", attributes={"prime": True})])
    assert forgotten is not None
    await mem0.forget(A, forgotten[0].id)
    primed = await mem0.prime(A)
    assert sorted(v.id for v in primed) == sorted([english.id, main.id])
    assert [v.written_at_ms for v in primed] == sorted(
        (v.written_at_ms for v in primed), reverse=True
    )


# -- recall ---------------------------------------------------------------------------------
async def test_recall_finds_a_stated_fact_by_meaning(mem0: Mem0Provider) -> None:
    stored = await mem0.remember(
        [
            fact(A, "The office coffee machine is broken again"),
            fact(A, "Acme renews its support contract every March"),
            fact(A, "Dana leads the platform team in Berlin"),
        ]
    )
    assert stored is not None
    answer = await mem0.recall(Question((A,), query="When does Acme renew the contract?"))
    assert answer.found[0].version.id == stored[1].id
    assert answer.found[0].why == ("query",) and 0 < answer.found[0].score <= 1
    assert answer.degraded == [] and answer.abstain is False

    unrelated = await mem0.recall(Question((A,), query="zebra xylophone quantum"))
    assert unrelated.abstain is True and unrelated.found == []  # nothing in common: not found


async def test_recall_names_the_signals_it_lacks_and_reads_as_of(mem0: Mem0Provider) -> None:
    stored = await mem0.remember([fact(A, "Acme renews every March")])
    assert stored is not None
    record = stored[0]
    answer = await mem0.recall(
        Question(
            (A,),
            query="Acme renewal",
            text="renews",
            filters=(FieldFilter("time.written_at", "gt", 0),),
        )
    )
    assert answer.degraded == ["text:not_supported", "filters:not_supported"]
    assert [f.version.id for f in answer.found] == [record.id]
    assert answer.found[0].why == ("query",)
    no_query = await mem0.recall(Question((A,), text="renews"))
    assert no_query.found == [] and no_query.degraded == ["text:not_supported"]
    assert no_query.abstain is True

    revised = await mem0.append(record.id, 1, fact(A, "Acme renews every April"))
    assert revised is not None
    now = await mem0.recall(Question((A,), query="Acme renews"))
    assert [(f.version.id, f.version.version) for f in now.found] == [(record.id, 2)]
    then = await mem0.recall(Question((A,), query="Acme renews", as_of=record.written_at_ms))
    assert [(f.version.id, f.version.version) for f in then.found] == [(record.id, 1)]
    await mem0.forget(A, record.id)
    assert (await mem0.recall(Question((A,), query="Acme renews"))).found == []
    kept = await mem0.recall(Question((A,), query="Acme renews", include_forgotten=True))
    assert [f.version.status for f in kept.found] == ["forgotten"]


async def test_recall_filters_on_type_and_attributes_in_mem0(mem0: Mem0Provider) -> None:
    stored = await mem0.remember(
        [
            fact(A, "Acme renews every March", attributes={"account": "acme", "seats": 40}),
            fact(A, "Globex renews every May", attributes={"account": "globex", "seats": 5}),
            fact(
                A, "Dana knows when the account renews", type="note", attributes={"account": "acme"}
            ),
        ]
    )
    assert stored is not None
    acme, globex, note = (v.id for v in stored)

    by_meaning = await mem0.recall(
        Question(
            (A,),
            query="When does the account renew?",
            filters=(FieldFilter("attributes.account", "eq", "acme"),),
        )
    )
    assert sorted(f.version.id for f in by_meaning.found) == sorted([acme, note])
    assert {f.why for f in by_meaning.found} == {("query", "filters")}
    assert by_meaning.degraded == []

    alone = await mem0.recall(
        Question(
            (A,),
            filters=(
                FieldFilter("type", "eq", "fact"),
                FieldFilter("attributes.seats", "gte", 10),
            ),
        )
    )
    assert [(f.version.id, f.score, f.why) for f in alone.found] == [(acme, 1.0, ("filters",))]
    listed = await mem0.recall(
        Question((A,), filters=(FieldFilter("attributes.account", "in", ["globex", "initech"]),))
    )
    assert [f.version.id for f in listed.found] == [globex]
    none = await mem0.recall(
        Question((A,), filters=(FieldFilter("attributes.account", "ne", "x"),))
    )
    assert len(none.found) == 3


# -- isolation ------------------------------------------------------------------------------
async def test_one_memory_never_answers_with_anothers_records(mem0: Mem0Provider) -> None:
    stored_a = await mem0.remember([fact(A, "Acme renews every March")])
    stored_b = await mem0.remember([fact(B, "Acme renews every March, says B")])
    assert stored_a is not None and stored_b is not None
    of_a, of_b = stored_a[0].id, stored_b[0].id

    answer = await mem0.recall(Question((A,), query="When does Acme renew?"))
    assert [f.version.id for f in answer.found] == [of_a]
    both = await mem0.recall(Question((A, B), query="When does Acme renew?"))
    assert sorted((f.version.memory_id, f.version.id) for f in both.found) == sorted(
        [(A, of_a), (B, of_b)]
    )
    # By id through the wrong memory: not found, not changed, not erased.
    assert await mem0.get(A, of_b, None) is None
    assert await mem0.history(A, of_b) == []
    assert await mem0.forget(A, of_b) is None
    assert await mem0.append(of_b, 1, fact(A, "taken over")) is None
    assert await mem0.erase(A, [of_b]) is None
    assert [v.id for v in await mem0.listing(Listing(A))] == [of_a]
    assert await mem0.counts([A, B]) == {A: 1, B: 1}
    still = await mem0.get(B, of_b, None)
    assert still is not None and still.status == "active"


# -- erase and drop -------------------------------------------------------------------------
async def test_erase_removes_every_version_and_mem0s_own_history_of_it(
    tmp_path: Path, mem0: Mem0Provider
) -> None:
    secret = "the vault code is 4711"
    stored = await mem0.remember([fact(A, secret), fact(A, "kept")])
    assert stored is not None
    record, kept = stored
    assert await mem0.append(record.id, 1, fact(A, secret + " and 0815")) is not None

    kept_on_disk = [f for f in (tmp_path / "mem0").rglob("*") if f.is_file()]
    assert [f for f in kept_on_disk if b"vault code" in f.read_bytes()]  # (what erase removes)
    assert await mem0.erase(A, [record.id, "hrec_not_here"]) is None  # nothing erased
    assert len(await mem0.history(A, record.id)) == 2
    erased = await mem0.erase(A, [record.id])
    assert erased is not None and erased.erased == [record.id] and erased.unreachable == []
    assert await mem0.get(A, record.id, None) is None
    assert await mem0.history(A, record.id) == []
    assert await mem0.locate([record.id]) == {}
    answer = await mem0.recall(Question((A,), query="vault code"))
    assert record.id not in [f.version.id for f in answer.found]
    # mem0 keeps a deleted memory's text in its history table: none is left.
    with sqlite3.connect(tmp_path / "mem0" / "history.sqlite3") as history:
        rows = history.execute(
            "SELECT count(*) FROM history WHERE old_memory LIKE ? OR new_memory LIKE ?",
            ("%vault%", "%vault%"),
        ).fetchone()
    assert rows == (0,)
    assert await mem0.get(A, kept.id, None) is not None

    await mem0.drop([A])
    assert await mem0.counts([A]) == {} and await mem0.listing(Listing(A)) == []
    # Nor is it left in any file mem0 keeps (Qdrant's storage, its history), once closed.
    await mem0.aclose()
    files = [f for f in (tmp_path / "mem0").rglob("*") if f.is_file()]
    assert files and not [f for f in files if b"vault code" in f.read_bytes()]


async def test_without_embeddings_a_write_is_refused_as_unavailable(tmp_path: Path) -> None:
    chat_only = start_provider(PROVIDER_KEY, MODELS, chat_only=True)
    settings = _settings(chat_only, memory_embedding_model=EMBEDDING_MODEL)
    upstreams = Upstreams(settings)
    try:
        embedder = embedder_for(settings, upstreams)
        assert embedder is not None
        provider = Mem0Provider(embedder, tmp_path / "mem0")
        with pytest.raises(ApiError) as refused:
            await provider.remember([fact(A, "anything")])
        assert refused.value.status == 503 and refused.value.code == "memory_unavailable"
        await provider.aclose()
    finally:
        await upstreams.aclose()
        chat_only.stop()


# -- the registry and the capability document ----------------------------------------------
async def test_the_capability_document_says_what_is_emulated_and_what_is_missing(
    mem0: Mem0Provider,
) -> None:
    said = mem0.capabilities()
    assert said is CAPABILITIES and said.id == "mem0"
    assert (said.isolation, said.derivation) == ("enforced_filter", "none")
    assert said.recall.signals == ("query", "filters") and said.recall.abstain is True
    assert (said.revise, said.forget) == ("emulated", "emulated")
    assert said.erase_unreachable == "reported"
    assert said.graph_entities == "stated"
    assert said.content.media == () == mem0.media and said.prime is True


async def test_mem0_sends_no_telemetry(mem0: Mem0Provider) -> None:
    """mem0 posts usage events to a server of its own unless told not to: the server
    reaches no host but its configured providers."""
    await mem0.counts([A])  # opened
    from mem0.memory import main, telemetry

    assert telemetry.MEM0_TELEMETRY is False and main.MEM0_TELEMETRY is False


def test_mem0_without_an_embedding_model_is_refused_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ProviderSetupError, match="UHP_MEMORY_EMBEDDING_MODEL"):
        FACTORY.build(ProviderSetup(db=None, embedder=None, folder=tmp_path))  # type: ignore[arg-type]  # refused before the database is read
    with pytest.raises(ProviderSetupError, match="names no memory provider"):
        named_providers(" , ")


# -- through the chapter's routes -----------------------------------------------------------
async def test_a_memory_bound_to_mem0_through_the_routes(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        memories="preview",
        memory_providers="embedded,mem0",
        memory_embedding_model=EMBEDDING_MODEL,
    ) as server:
        client = server.client
        created = await client.post("/v1/memories", json={"name": "Acme", "provider": "mem0"})
        assert created.status_code == 200, created.text
        memory = created.json()
        assert memory["provider"] == "mem0"
        default = (await client.post("/v1/memories", json={"name": "Other"})).json()
        assert default["provider"] == "embedded"
        unknown = await client.post("/v1/memories", json={"name": "X", "provider": "zep"})
        assert unknown.status_code == 422

        mid = memory["id"]
        body = {"type": "fact", "content": [{"type": "text", "text": "Acme renews in March"}]}
        written = await client.post(f"/v1/memories/{mid}/records", json=body)
        assert written.status_code == 200, written.text
        rid = written.json()["id"]
        revised = await client.patch(
            f"/v1/memories/{mid}/records/{rid}",
            json={"content": [{"type": "text", "text": "Acme renews in April"}]},
        )
        assert revised.status_code == 200, revised.text
        assert revised.json()["version"] == 2
        history = (await client.get(f"/v1/memories/{mid}/records/{rid}/history")).json()
        assert [v["version"] for v in history["data"]] == [1, 2]
        listed = (await client.get(f"/v1/memories/{mid}")).json()
        assert listed["records"] == {"count": 1}
        # Through the other memory, the record is not there.
        wrong = await client.get(f"/v1/memories/{default['id']}/records/{rid}")
        assert wrong.status_code == 404

        erased = await client.post(f"/v1/memories/{mid}/erase", json={"record_ids": [rid]})
        assert erased.status_code == 200, erased.text
        assert erased.json()["unreachable"] == []
        gone = await client.get(f"/v1/memories/{mid}/records/{rid}")
        assert gone.status_code == 404
        mem0 = server.ctx.engine.memories.providers["mem0"]
        assert await mem0.counts([mid]) == {}

        episodes = {"episodes": [{"content": [{"type": "text", "text": "We renew in May."}]}]}
        observed = await client.post(f"/v1/memories/{mid}/observe", json=episodes)
        assert observed.status_code == 200, observed.text
        assert await mem0.counts([mid]) == {mid: 1}
        deleted = await client.delete(f"/v1/memories/{mid}")
        assert deleted.status_code == 200, deleted.text
        assert await mem0.counts([mid]) == {}
        assert await mem0.listing(Listing(mid, include_forgotten=True)) == []
