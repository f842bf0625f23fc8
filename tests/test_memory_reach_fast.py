"""Access decided over the part of the tree a request reads (issue 29), on SQLite and on
PostgreSQL (UHP_TEST_DATABASE=postgresql): every answer is the one the access model gives
over the whole tree (grants on an ancestor, a restricted cutoff, a grant inside it, the
agent principal `member:<harness id>`), no request of one principal reads another's
memories, and one principal creates at most UHP_MEMORY_MAX_PER_PRINCIPAL memories."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storage import memories as store
from storage.tables import MemoryGrantRow, MemoryRow
from storage.unit import Tx
from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support import postgres
from tests.support.in_process import InProcess, in_process
from tests.test_memories_fast import Other
from uhp_server.errors import ApiError
from uhp_server.ids import new_id
from uhp_server.memories.access import READ, Access, Caller, Node, Tree, ordered
from uhp_server.memories.agent import agent_caller

ON_POSTGRESQL = postgres.TEST_DATABASE == "postgresql"


@pytest.fixture
async def server(tmp_path: Path, provider: RunningProvider) -> Any:
    async with in_process(
        tmp_path / "data", provider.base_url, PROVIDER_KEY, memory_max_per_principal=12
    ) as running:
        yield running


async def _memory(server: InProcess, name: str, **body: Any) -> str:
    made = await server.client.post("/v1/memories", json={"name": name, **body})
    assert made.status_code == 200, made.text
    return str(made.json()["id"])


async def _grant(server: InProcess, memory_id: str, principal: str, *privileges: str) -> None:
    body = {"principal": principal, "privileges": list(privileges)}
    granted = await server.client.post(f"/v1/memories/{memory_id}/grants", json=body)
    assert granted.status_code == 200, granted.text


def _whole_tree(tx: Tx) -> list[tuple[str, str | None, bool, int]]:
    rows = tx.rows(
        "SELECT id, parent_id, restricted, created_at_ms FROM memory ORDER BY created_at_ms, id"
    )
    return [(str(i), p, bool(r), int(c)) for i, p, r, c in rows]


def _oracle(server: InProcess, caller: Caller) -> Access:
    """The access model over the whole tree, as every request decided before issue 29."""
    nodes = server.ctx.db.run(_whole_tree)
    grants = server.ctx.db.run(store.grants_of, sorted(caller.principals()))
    granted: dict[str, frozenset[str]] = {}
    for grant in grants:
        granted[grant.memory_id] = granted.get(grant.memory_id, frozenset()) | frozenset(
            grant.privileges or ()
        )
    return Access(Tree.of(Node(i, p, r, c) for i, p, r, c in nodes), granted)


async def _company(server: InProcess) -> dict[str, str]:
    """root > sales > (acme, dana [restricted] > drafts > deep), root > ops [restricted] >
    ops-leaf; a record saying "ledger" in each."""
    tree: dict[str, str] = {}
    tree["root"] = await _memory(server, "Company")
    tree["sales"] = await _memory(server, "Sales", parent_id=tree["root"])
    tree["acme"] = await _memory(server, "Acme", parent_id=tree["sales"])
    tree["dana"] = await _memory(server, "Dana", parent_id=tree["sales"], restricted=True)
    tree["drafts"] = await _memory(server, "Drafts", parent_id=tree["dana"])
    tree["deep"] = await _memory(server, "Deep", parent_id=tree["drafts"])
    tree["ops"] = await _memory(server, "Ops", parent_id=tree["root"], restricted=True)
    tree["ops-leaf"] = await _memory(server, "Ops leaf", parent_id=tree["ops"])
    for name, memory_id in tree.items():
        body = {"content": f"The ledger of {name}."}
        written = await server.client.post(f"/v1/memories/{memory_id}/records", json=body)
        assert written.status_code == 200, written.text
    return tree


async def _code_of(call: Any) -> str | None:
    try:
        await call
    except ApiError as exc:
        return exc.code
    return None


async def _agrees_with_the_whole_tree(server: InProcess, caller: Caller) -> None:
    memories = server.ctx.engine.memories
    oracle = _oracle(server, caller)
    for node in oracle.tree.nodes:
        held = oracle.on(node)
        if not held:  # unknown and forbidden alike, exactly as before
            assert await _code_of(memories.get(caller, node)) == "memory_not_found"
            assert await _code_of(memories.recall(caller, node, {"text": "x"})) == (
                "memory_not_found"
            )
            continue
        if READ not in held:  # seen, and forbidden
            assert await _code_of(memories.get(caller, node)) == "memory_forbidden"
            assert await _code_of(memories.listing(caller, parent=node)) == "memory_forbidden"
            continue
        shown = await memories.get(caller, node)
        assert shown.privileges == ordered(held)
        assert shown.parent_id == oracle.visible_parent(node)
        assert shown.ancestors == oracle.ancestors(node)
        assert shown.children == len(oracle.children(node))
        children = await memories.listing(caller, parent=node)
        assert [m.id for m in children] == oracle.children(node)
        below = await memories.listing(caller, ancestor=node)
        assert [m.id for m in below] == oracle.below(node)
        found = await memories.recall(caller, node, {"text": "ledger", "limit": 100})
        assert {hit.memory_id for hit in found.results} == set(oracle.searched(node))
        assert found.degraded == []
    assert [m.id for m in await memories.listing(caller)] == oracle.entries()
    assert [m.id for m in await memories.listing(caller, granted=True)] == oracle.given()


async def test_every_answer_is_the_whole_trees_for_a_person_and_an_agent(
    server: InProcess,
) -> None:
    tree = await _company(server)
    other = Other(server)
    await _grant(server, tree["root"], other.principal, "read")  # reaches all but the cutoffs
    await _grant(server, tree["drafts"], other.principal, "read", "write")  # inside one
    made = await server.client.post("/v1/harnesses", json={"base": "fake", "name": "Agent"})
    harness = str(made.json()["id"])
    await _grant(server, tree["deep"], f"member:{harness}", "read")
    await _grant(server, tree["ops"], f"member:{harness}", "write")  # seen, not readable
    owner = Caller(member_id=str(server.ctx.db.run(_owner_of, tree["root"])))
    for caller in (owner, Caller(member_id=other.id), agent_caller(harness)):
        await _agrees_with_the_whole_tree(server, caller)
    # the agent's own answers, spelt out: it never climbs above what it was granted
    agent = agent_caller(harness)
    memories = server.ctx.engine.memories
    deep = await memories.get(agent, tree["deep"])
    assert deep.parent_id is None and deep.ancestors == [] and deep.privileges == ["read"]
    for above in ("root", "sales", "dana", "drafts"):
        assert await _code_of(memories.get(agent, tree[above])) == "memory_not_found"
    assert await _code_of(memories.get(agent, tree["ops-leaf"])) == "memory_forbidden"
    written = await memories.remember(agent, tree["ops-leaf"], {"content": "Noted."})
    assert written.written_by.id == harness
    assert await _code_of(memories.recall(agent, tree["ops"], {"text": "ledger"})) == (
        "memory_forbidden"
    )
    # another principal's harness holds nothing of it
    elsewhere = agent_caller("chrn_nothere")
    assert await memories.listing(elsewhere) == []
    assert await _code_of(memories.get(elsewhere, tree["deep"])) == "memory_not_found"


def _owner_of(tx: Tx, memory_id: str) -> str:
    row = store.get_memory(tx, memory_id)
    assert row is not None
    return row.owner_id


async def test_a_cutoff_met_on_the_way_down_is_kept_after_a_move(server: InProcess) -> None:
    tree = await _company(server)
    other = Other(server)
    await _grant(server, tree["sales"], other.principal, "read")
    # acme moves under the restricted dana: the grant on sales no longer reaches it
    moved = await server.client.put(
        f"/v1/memories/{tree['acme']}", json={"parent_id": tree["dana"]}
    )
    assert moved.status_code == 200, moved.text
    await _agrees_with_the_whole_tree(server, Caller(member_id=other.id))
    hidden = await server.client.get(f"/v1/memories/{tree['acme']}", headers=other.headers)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "memory_not_found"
    # and a move under its own descendant is still refused
    cycle = await server.client.put(
        f"/v1/memories/{tree['sales']}", json={"parent_id": tree["deep"]}
    )
    assert cycle.status_code == 422 and cycle.json()["error"]["code"] == "memory_invalid"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """Every memory id a request reads to decide access."""
    seen: set[str] = set()

    def recorded(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            found = fn(*args, **kwargs)
            nodes = found.nodes if isinstance(found, store.Subtree) else found
            seen.update(node.id for node in nodes)
            return found

        return wrapper

    for name in ("with_ancestors", "granted_with_ancestors", "children_of", "subtree"):
        monkeypatch.setattr(store, name, recorded(getattr(store, name)))
    yield seen


async def test_no_request_reads_another_principals_memories(
    server: InProcess, reads: set[str]
) -> None:
    theirs = await _company(server)  # the API key's principal: tenant A
    reads.clear()  # (what A's own requests read)
    tenant_b = Other(server, "tenant-b")
    h = tenant_b.headers

    async def mine(name: str, **body: Any) -> str:
        made = await server.client.post("/v1/memories", json={"name": name, **body}, headers=h)
        assert made.status_code == 200, made.text
        return str(made.json()["id"])

    root = await mine("B's root")
    kid = await mine("B's child", parent_id=root)
    record = await server.client.post(
        f"/v1/memories/{kid}/records", json={"content": "B's ledger."}, headers=h
    )
    assert record.status_code == 200
    asked = [
        ("GET", f"/v1/memories/{root}", None),
        ("GET", "/v1/memories", None),
        ("GET", "/v1/memories?granted=true", None),
        ("GET", f"/v1/memories?parent={root}", None),
        ("GET", f"/v1/memories?ancestor={root}", None),
        ("GET", f"/v1/memories/{root}/grants", None),
        ("POST", f"/v1/memories/{root}/recall", {"text": "ledger"}),
        ("POST", f"/v1/memories/{root}/graph", {}),
        ("GET", f"/v1/memories/{kid}/records", None),
        ("PUT", f"/v1/memories/{kid}", {"name": "B's renamed child"}),
        ("DELETE", f"/v1/memories/{kid}", None),
    ]
    for method, path, body in asked:
        answer = await server.client.request(method, path, json=body, headers=h)
        assert answer.status_code == 200, (method, path, answer.text)
    assert reads and reads <= {root, kid}
    # and asking for one of A's memories reads its chain, refused as unknown
    reads.clear()
    refused = await server.client.get(f"/v1/memories/{theirs['deep']}", headers=h)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "memory_not_found"


async def test_one_principal_creates_at_most_its_limit_of_memories(server: InProcess) -> None:
    made = [await _memory(server, f"Mine {i}") for i in range(12)]
    refused = await server.client.post("/v1/memories", json={"name": "One too many"})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "memory_invalid" and error["detail"]["max_memories"] == 12
    assert "UHP_MEMORY_MAX_PER_PRINCIPAL" in error["message"]
    below = await server.client.post("/v1/memories", json={"name": "Below", "parent_id": made[0]})
    assert below.status_code == 422 and below.json()["error"]["code"] == "memory_invalid"
    # another principal is not held back by it
    other = Other(server)
    theirs = await server.client.post(
        "/v1/memories", json={"name": "Theirs"}, headers=other.headers
    )
    assert theirs.status_code == 200, theirs.text
    # a memory deleted makes room again
    assert (await server.client.delete(f"/v1/memories/{made[-1]}")).status_code == 200
    assert (await server.client.post("/v1/memories", json={"name": "Again"})).status_code == 200


async def test_memories_kept_from_their_creator_count_against_whoever_took_them(
    server: InProcess,
) -> None:
    """A grantee's memories under another's root stop counting against the grantee once the
    other takes its `delete` there (revoking its grant, or granting it less), and count
    against the one who took it; a creator that gives up its own grant still pays."""
    root = await _memory(server, "Shared inbox")
    b = Other(server, "tenant-b")
    await _grant(server, root, b.principal, "read", "create")

    async def create(as_b: bool, name: str) -> int:
        body = {"name": name, "parent_id": root}
        made = await server.client.post(
            "/v1/memories", json=body, headers=b.headers if as_b else None
        )
        assert made.status_code in (200, 422), made.text
        return made.status_code

    made = []
    for i in range(12):
        answer = await server.client.post(
            "/v1/memories", json={"name": f"B's {i}", "parent_id": root}, headers=b.headers
        )
        assert answer.status_code == 200, answer.text
        made.append(answer.json()["id"])
    assert await create(True, "B's one too many") == 422

    async def b_grant(memory_id: str) -> dict[str, Any]:
        grants = (await server.client.get(f"/v1/memories/{memory_id}/grants")).json()["data"]
        return next(g for g in grants if g["principal"] == b.principal and not g["inherited"])

    # A revokes B's grant on three and leaves B only `read` on three more
    for memory_id in made[:3]:
        grant = await b_grant(memory_id)
        revoked = await server.client.delete(f"/v1/memories/{memory_id}/grants/{grant['id']}")
        assert revoked.status_code == 200, revoked.text
        gone = await server.client.delete(f"/v1/memories/{memory_id}", headers=b.headers)
        assert gone.status_code == 403  # B sees it (its read on the root) and cannot delete it
    for memory_id in made[3:6]:
        await _grant(server, memory_id, b.principal, "read")
    # B counts 6 of the 12 now: 6 more, then refused
    assert [await create(True, f"B's again {i}") for i in range(7)] == [200] * 6 + [422]
    # A counts its root and the 6 it took: 5 more of its own, then refused
    assert [await create(False, f"A's {i}") for i in range(6)] == [200] * 5 + [422]
    # B taking its own grant away from one of its memories frees nothing of B's share
    mine = next(
        m["id"]
        for m in (
            await server.client.get("/v1/memories?ancestor=" + root, headers=b.headers)
        ).json()["data"]
        if m["name"] == "B's 6"
    )
    grant = await b_grant(mine)
    revoked = await server.client.delete(
        f"/v1/memories/{mine}/grants/{grant['id']}", headers=b.headers
    )
    assert revoked.status_code == 200, revoked.text
    assert await create(True, "B's after giving one up") == 422


def _inserted_and_held(
    tx: Tx, row: MemoryRow, grant: MemoryGrantRow, most: int, done: threading.Event
) -> None:
    """A creation that stays uncommitted until the other one finishes or 2 s pass."""
    store.insert_memory(tx, row, grant, most)
    done.wait(2.0)


@pytest.mark.skipif(not ON_POSTGRESQL, reason="the PostgreSQL pass runs it (SQLite: one writer)")
async def test_two_creations_at_once_never_pass_the_limit_on_postgresql(
    server: InProcess,
) -> None:
    """PostgreSQL's READ COMMITTED lets two transactions count the same rows: the second
    creation, counted while the first (the creator's last allowed) is still uncommitted,
    waits for it and is refused, where it would have counted 11 and gone in too."""
    for i in range(11):
        await _memory(server, f"Mine {i}")
    owner = _the_one_creator(server)
    rows = [_memory_row(owner, f"Racing {i}") for i in range(2)]
    done = threading.Event()
    first = threading.Thread(
        target=server.ctx.db.run, args=(_inserted_and_held, *rows[0], 12, done)
    )
    first.start()
    await asyncio.sleep(0.5)  # the first has counted 11 and inserted, uncommitted
    refused: list[BaseException] = []

    def second() -> None:
        try:
            server.ctx.db.run(store.insert_memory, *rows[1], 12)
        except store.TooMany as exc:
            refused.append(exc)
        finally:
            done.set()

    await asyncio.to_thread(second)
    first.join()
    assert len(refused) == 1
    count = server.ctx.db.run(store.owned_count, owner)
    assert count == 12


def _the_one_creator(server: InProcess) -> str:
    rows = server.ctx.db.run(lambda tx: tx.rows("SELECT DISTINCT owner_id FROM memory"))
    assert len(rows) == 1
    return str(rows[0][0])


def _memory_row(owner: str, name: str) -> tuple[MemoryRow, MemoryGrantRow]:
    now = store.now_ms()
    row = MemoryRow(
        id=new_id("memory"),
        name=name,
        provider="embedded",
        owner_id=owner,
        created_at_ms=now,
        updated_at_ms=now,
    )
    grant = MemoryGrantRow(
        id=new_id("memory_grant"),
        memory_id=row.id,
        principal=f"member:{owner}",
        privileges=["read", "write", "create", "delete"],
        created_at_ms=now,
    )
    return row, grant


async def test_a_subtree_read_says_whose_children_it_read_them_all(server: InProcess) -> None:
    """Recall reads the nearest memories below, level by level, up to a cap; the memories
    whose children were all read need no second read of them (issue 29): every memory when
    nothing was left out, else those two levels above the farthest kept, never one at the
    depth asked."""
    root = await _memory(server, "Root")
    kids = [await _memory(server, f"Kid {i}", parent_id=root) for i in range(3)]
    grandkids = [await _memory(server, f"Grandkid {i}", parent_id=kids[i % 3]) for i in range(4)]

    def read(depth: int | None, most: int | None) -> store.Subtree:
        return server.ctx.db.run(store.subtree, root, depth, most)

    whole = read(None, None)
    assert not whole.capped and set(whole.complete) == {root, *kids, *grandkids}
    level_one = read(None, 4)  # the root and its three children: theirs are not all read
    assert level_one.capped and level_one.complete == []
    partly = read(None, 6)  # and two of the four grandchildren: the root's children are all in
    assert partly.capped and partly.complete == [root]
    assert read(1, None).complete == [root]  # the children, at the depth asked, are not read
    assert read(0, None).complete == []
