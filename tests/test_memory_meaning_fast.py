"""Recall by meaning (Memories §6.2 `query`) on the embedded provider, in process: vectors
from the scripted model provider's /v1/embeddings (model `embed-test`, near for texts that
share words) reached through the gateway, kept beside each version and ranked by sqlite-vec on
SQLite, pgvector on PostgreSQL (UHP_TEST_DATABASE=postgresql). A fact is found by meaning,
fused with words by reciprocal rank, only within the memories the server decided (another
principal's never), as it was held `as_of` an instant, forgotten only when asked; an embedder
that fails keeps the write and recall says what it missed. On a PostgreSQL database without
pgvector, `query` is not declared, start-up says why, and writes go on."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlmodel import col, select

from storage import memory_search as search
from storage import memory_vectors, vector_extension
from storage.memory_vectors import Meaning
from storage.tables import MemoryVectorRow
from storage.unit import Tx
from tests.conftest import MODELS, PROVIDER_KEY
from tests.scripted_provider import RunningProvider, start_provider
from tests.support import postgres
from tests.support.in_process import InProcess, in_process
from tests.test_memories_fast import Other, _memory, _record, _tree
from tests.test_memory_recall_fast import _found, _recall
from uhp_server.gateway.embeddings import GatewayEmbedder
from uhp_server.memories.meaning import QUERY_PARTIAL, QUERY_UNAVAILABLE

EMBEDDING_MODEL = "embed-test"
ON_POSTGRESQL = postgres.TEST_DATABASE == "postgresql"


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> AsyncIterator[InProcess]:
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        memory_embedding_model=EMBEDDING_MODEL,
    ) as running:
        yield running


def _vectors(server: InProcess, record_id: str) -> list[MemoryVectorRow]:
    def read(tx: Tx) -> list[MemoryVectorRow]:
        query = select(MemoryVectorRow).where(col(MemoryVectorRow.id) == record_id)
        return list(tx.orm.exec(query.order_by(col(MemoryVectorRow.version))))

    return server.ctx.db.run(read)


@pytest.mark.skipif(ON_POSTGRESQL, reason="sqlite-vec is SQLite's; the SQLite pass runs it")
def test_this_python_loads_sqlite_vec() -> None:
    """What the rest needs: without it the provider declares no `query` (docs/memory-providers.md
    says which Python loads extensions: Debian's does, pyenv's does not unless built so)."""
    connection = sqlite3.connect(":memory:")
    assert vector_extension.load(connection), (
        f"{sys.executable}: its sqlite3 cannot load sqlite-vec; make the venv from a Python "
        "whose sqlite3 allows extensions (/usr/bin/python3.11 on Debian)"
    )
    assert connection.execute("SELECT vec_version()").fetchone()[0] == "v0.1.9"


async def test_query_is_declared_and_a_fact_is_found_by_meaning_alone(
    server: InProcess,
) -> None:
    documents = (await server.client.get("/v1/memories/providers")).json()
    embedded = documents["data"][0]
    assert embedded["id"] == "embedded"
    assert embedded["recall"]["signals"] == ["query", "text", "filters"]
    _, child = await _tree(server)
    mid = child["id"]
    late = await _record(server, mid, content="Harlow Logistics settles its invoices late.")
    await _record(server, mid, content="The office closes at noon on Fridays.")
    # No word of the question is the record's word for word but "invoices" and "late":
    # found by meaning, and only by it (full text is not asked).
    found = await _recall(server, mid, query="Which customer pays invoices late?")
    assert _found(found) == [late["id"]]
    assert found["results"][0]["why"] == ["query"] and found["degraded"] == []
    assert found["abstain"] is False and 0 < found["results"][0]["score"] <= 1
    # A question that shares nothing with any record: nothing near, so recall abstains.
    nothing = await _recall(server, mid, query="quantum chromodynamics lattice")
    assert nothing["results"] == [] and nothing["abstain"] is True
    # Asked of the parent, the child's fact is found by meaning too.
    root_found = await _recall(server, child["id"], query="invoices settled late")
    assert _found(root_found) == [late["id"]]


async def test_meaning_and_words_are_fused_and_each_hit_says_which_found_it(
    server: InProcess,
) -> None:
    mid = (await _memory(server, "Accounts"))["id"]
    both = await _record(server, mid, content="Quillon Freight renews its contract in March.")
    meaning_only = await _record(server, mid, content="Contract renewal dates are in the ledger.")
    answer = await _recall(server, mid, query="When does the contract renew?", text="Quillon")
    assert _found(answer) == [both["id"], meaning_only["id"]]
    why = {hit["record"]["id"]: hit["why"] for hit in answer["results"]}
    assert why == {both["id"]: ["query", "text"], meaning_only["id"]: ["query"]}
    assert answer["results"][0]["score"] == 1.0 and answer["degraded"] == []


async def test_observed_episodes_and_revisions_are_found_by_their_own_meaning(
    server: InProcess,
) -> None:
    mid = (await _memory(server, "Agent notes"))["id"]
    observed = await server.client.post(
        f"/v1/memories/{mid}/observe",
        json={"episodes": [{"content": "The customer asked about warehouse capacity."}]},
    )
    assert observed.status_code == 200, observed.text
    episode = observed.json()["data"][0]
    assert _found(await _recall(server, mid, query="warehouse capacity")) == [episode["id"]]
    assert len(_vectors(server, episode["id"])) == 1


async def test_as_of_finds_the_version_held_then_and_forgotten_records_only_when_asked(
    server: InProcess,
) -> None:
    mid = (await _memory(server, "Offices"))["id"]
    first = await _record(server, mid, content="Headquarters moved to Leeds harbour.")
    before = first["time"]["written_at"]
    revised = await server.client.patch(
        f"/v1/memories/{mid}/records/{first['id']}",
        json={"content": "Headquarters relocated inland to York."},
    )
    assert revised.status_code == 200
    assert [v.version for v in _vectors(server, first["id"])] == [1, 2]
    # now: the old words mean nothing to the current version
    assert _found(await _recall(server, mid, query="Leeds harbour")) == []
    assert _found(await _recall(server, mid, query="relocated York")) == [first["id"]]
    # then: the version held at that instant, by its own meaning
    then = await _recall(server, mid, query="Leeds harbour", as_of=before)
    assert _found(then) == [first["id"]] and then["results"][0]["record"]["version"] == 1
    assert _found(await _recall(server, mid, query="relocated York", as_of=before)) == []
    await server.client.delete(f"/v1/memories/{mid}/records/{first['id']}")
    assert _found(await _recall(server, mid, query="relocated York")) == []
    kept = await _recall(server, mid, query="relocated York", include="all")
    assert _found(kept) == [first["id"]] and kept["results"][0]["record"]["status"] == "forgotten"


async def test_no_hit_by_meaning_of_one_principal_reaches_another(server: InProcess) -> None:
    _, child = await _tree(server)
    secret = await _record(server, child["id"], content="The Quillon discount is twelve percent.")
    other = Other(server)
    theirs = await server.client.post(
        "/v1/memories", json={"name": "Theirs"}, headers=other.headers
    )
    tid = theirs.json()["id"]
    own = await server.client.post(
        f"/v1/memories/{tid}/records",
        json={"content": "Quillon discount negotiations are pending."},
        headers=other.headers,
    )
    answer = await _recall(server, tid, headers=other.headers, query="Quillon discount percent")
    assert _found(answer) == [own.json()["id"]]
    refused = await server.client.post(
        f"/v1/memories/{child['id']}/recall",
        json={"query": "Quillon discount"},
        headers=other.headers,
    )
    assert refused.status_code == 404
    # and the first principal's question never finds the other's record
    mine = await _recall(server, child["id"], query="Quillon discount negotiations")
    assert _found(mine) == [secret["id"]]


async def test_vectors_rank_by_cosine_distance_then_newest_and_none_below_the_floor(
    server: InProcess,
) -> None:
    """The ranking itself, on vectors set by hand, the same on SQLite and PostgreSQL: nearest
    first, the newer version first at an equal distance, nothing less than MIN_SIMILARITY
    alike, only vectors of the question's model and width (one of another width under the
    same model name is never compared, and breaks nothing), only within the scope given."""
    mid = (await _memory(server, "Ranked"))["id"]
    elsewhere = (await _memory(server, "Elsewhere"))["id"]
    older, newer, above, below, narrow, other_model, outside = [
        (await _record(server, where, content=f"record {n}"))["id"]
        for n, where in enumerate([mid] * 6 + [elsewhere])
    ]
    floor = memory_vectors.MIN_SIMILARITY

    def alike(cosine: float) -> list[float]:
        """A unit vector `cosine` alike with (1, 0, 0)."""
        return [cosine, (1 - cosine**2) ** 0.5, 0.0]

    given = {
        older: Meaning("m", [1.0, 0.0, 0.0]),
        newer: Meaning("m", [2.0, 0.0, 0.0]),  # the same direction: the same distance
        above: Meaning("m", alike(floor + 0.01)),
        below: Meaning("m", alike(floor - 0.01)),
        narrow: Meaning("m", [1.0, 0.0]),
        other_model: Meaning("other", [1.0, 0.0, 0.0]),
        outside: Meaning("m", [1.0, 0.0, 0.0]),
    }

    def set_vectors(tx: Tx) -> None:
        memory_vectors.unindex_records(tx, list(given))
        for record_id, meaning in given.items():
            row = MemoryVectorRow(
                id=record_id,
                version=1,
                memory_id=elsewhere if record_id == outside else mid,
                model=meaning.model,
                dimensions=len(meaning.vector),
                embedding=meaning.vector,
            )
            tx.orm.add(row)
        # Two writes may share a millisecond: the older one made a second older.
        tx.execute(
            "UPDATE memory_record SET written_at_ms = written_at_ms - 1000 WHERE id = ?",
            (older,),
        )

    server.ctx.db.run(set_vectors)
    scope = search.Scope(memory_ids=(mid,))
    question = Meaning("m", [1.0, 0.0, 0.0])
    found = server.ctx.db.run(memory_vectors.nearest, scope, question, 10)
    assert found == [(newer, 1), (older, 1), (above, 1)]
    assert server.ctx.db.run(memory_vectors.nearest, scope, question, 1) == [(newer, 1)]
    narrow_question = Meaning("m", [1.0, 0.0])
    assert server.ctx.db.run(memory_vectors.nearest, scope, narrow_question, 10) == [(narrow, 1)]
    # every version of the scope has a vector of `m` but the one kept under `other`
    assert server.ctx.db.run(memory_vectors.without_meaning, scope, "m") == 1


async def test_erasing_a_record_removes_its_vectors(server: InProcess) -> None:
    mid = (await _memory(server, "Vault"))["id"]
    record = await _record(server, mid, content="The vault code is kept offsite.")
    await server.client.patch(
        f"/v1/memories/{mid}/records/{record['id']}", json={"content": "The vault code changed."}
    )
    assert len(_vectors(server, record["id"])) == 2
    erased = await server.client.post(
        f"/v1/memories/{mid}/erase", json={"record_ids": [record["id"]]}
    )
    assert erased.status_code == 200, erased.text
    assert _vectors(server, record["id"]) == []
    assert _found(await _recall(server, mid, query="vault code")) == []


async def test_an_embedder_that_fails_keeps_the_write_and_recall_says_what_it_missed(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Written while the model provider has no embeddings route: the record is kept without
    a vector; a question by meaning then cannot be embedded either (`query:unavailable`) and
    words still answer. Once embeddings answer again, the record is one meaning does not
    cover (`query:records_without_vectors`), found by words, never silently missed."""
    data = tmp_path / "data"
    chat_only = start_provider(PROVIDER_KEY, MODELS, chat_only=True)
    try:
        async with in_process(
            data, chat_only.base_url, PROVIDER_KEY, memory_embedding_model=EMBEDDING_MODEL
        ) as failing:
            mid = (await _memory(failing, "Ledger"))["id"]
            kept = await _record(failing, mid, content="Harlow Logistics settles invoices late.")
            assert _vectors(failing, kept["id"]) == []
            answer = await _recall(failing, mid, query="invoices late", text="Harlow")
            assert answer["degraded"] == [QUERY_UNAVAILABLE]
            assert _found(answer) == [kept["id"]] and answer["results"][0]["why"] == ["text"]
    finally:
        chat_only.stop()
    async with in_process(
        data, provider.base_url, PROVIDER_KEY, memory_embedding_model=EMBEDDING_MODEL
    ) as server:
        fresh = await _record(server, mid, content="Vellacourt settles invoices early.")
        answer = await _recall(server, mid, query="invoices settled", text="Harlow")
        assert answer["degraded"] == [QUERY_PARTIAL]
        why = {hit["record"]["id"]: hit["why"] for hit in answer["results"]}
        assert why == {fresh["id"]: ["query"], kept["id"]: ["text"]}


async def test_without_an_embedder_query_is_not_declared_and_writes_keep_no_vector(
    tmp_path: Path, provider: RunningProvider
) -> None:
    async with in_process(tmp_path / "data", provider.base_url, PROVIDER_KEY) as server:
        documents = (await server.client.get("/v1/memories/providers")).json()
        assert documents["data"][0]["recall"]["signals"] == ["text", "filters"]
        mid = (await _memory(server, "Plain"))["id"]
        record = await _record(server, mid, content="Harlow Logistics settles invoices late.")
        assert _vectors(server, record["id"]) == []
        answer = await _recall(server, mid, query="invoices late")
        assert answer["degraded"] == ["query:not_supported"] and answer["results"] == []


@pytest.mark.skipif(not ON_POSTGRESQL, reason="the PostgreSQL pass runs it")
def test_each_test_database_has_pgvector(server: InProcess) -> None:
    """What the PostgreSQL pass needs: without it the provider declares no `query` there
    (scripts/postgres.sh builds pgvector and creates it in template1, which each test's
    database is made from)."""
    created = server.ctx.db.run(
        lambda tx: tx.rows("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    )
    assert created == [("0.8.0",)], "run `bash scripts/postgres.sh` (as root): it builds pgvector"


@pytest.mark.skipif(not ON_POSTGRESQL, reason="the PostgreSQL pass runs it")
async def test_on_postgresql_without_pgvector_query_is_not_declared_and_writes_go_on(
    tmp_path: Path, provider: RunningProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A database whose user may not create pgvector (the test role is no superuser, and the
    database is made without it): the migrations run whole, start-up says why `query` is
    not declared (and what an administrator runs), writes go on and recall by words answers."""
    with postgres.bare_database() as url:
        caplog.set_level("WARNING")
        async with in_process(
            tmp_path / "data",
            provider.base_url,
            PROVIDER_KEY,
            memory_embedding_model=EMBEDDING_MODEL,
            database_url=url,
        ) as server:
            documents = (await server.client.get("/v1/memories/providers")).json()
            assert documents["data"][0]["recall"]["signals"] == ["text", "filters"]
            mid = (await _memory(server, "Ledger"))["id"]
            record = await _record(server, mid, content="Harlow Logistics settles invoices late.")
            assert _vectors(server, record["id"]) == []
            answer = await _recall(server, mid, query="invoices late", text="Harlow")
            assert answer["degraded"] == ["query:not_supported"]
            assert _found(answer) == [record["id"]]
        why = [r for r in caplog.records if r.getMessage() == "memory_query_not_declared"]
        assert why and "CREATE EXTENSION vector" in why[0].__dict__["reason"]


async def test_a_value_too_small_for_float32_is_kept_as_zero_and_the_write_stands(
    server: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`real` and pgvector refuse 1e-50 ("underflow") where float32 rounds it to 0: an
    embedding model answering one must not lose the write (found in review: a 500 on
    PostgreSQL, the record gone). Kept as float32 holds it, on both databases."""
    real_embed = GatewayEmbedder.embed

    async def tiny_first(self: GatewayEmbedder, texts: list[str]) -> list[list[float]]:
        return [[1e-50, *vector[1:]] for vector in await real_embed(self, texts)]

    monkeypatch.setattr(GatewayEmbedder, "embed", tiny_first)
    mid = (await _memory(server, "Accounts"))["id"]
    late = await _record(server, mid, content="Harlow Logistics settles its invoices late.")
    [kept] = _vectors(server, late["id"])
    assert kept.embedding[0] == 0.0
    found = await _recall(server, mid, query="Which customer pays invoices late?")
    assert _found(found) == [late["id"]]
