"""Memories for every door (Memories chapter §2-§5): the tree, its grants, and the records
its providers keep.

Every operation first decides what the caller may do (memories/access.py) over the tree and
the caller's grants, read in one transaction, and only then asks a provider anything, by the
ids it may reach. A memory the caller may not see is `memory_not_found`, exactly as one that
is not there; one it sees without the privilege needed is `memory_forbidden`. Records are
stamped here with who wrote them: nothing a caller sends says who it is.

Recall (§6.1-§6.3) is memory_recall.py's, named queries (§6.4) memory_queries.py's; the
graph (§6.6), files, types, snapshots, consolidation and the agent's part (§9) are not
built here.
The graph (§6.6) is walked in memory_graph.py, file parts (§4.3, §7) are completed and
their bytes kept in memory_files.py, snapshots (§5.3) named in memory_snapshots.py. Recall
(§6), extension types and consolidation runs are not built here (their routes refuse
honestly: memory_unsupported), nor is the agent's part (§9).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any, NoReturn

from storage import harnesses as harness_store
from storage import memories as store
from storage import memory_snapshots as snapshot_store
from storage.blobs import BlobStore
from storage.db import Database, Order
from storage.tables import MemoryGrantRow, MemoryRow
from uhp_server.engine.facade import memory_queries, memory_recall
from uhp_server.engine.facade import memory_snapshots as snapshots
from uhp_server.engine.facade.memory_files import MemoryFiles, PartBytes, file_ids
from uhp_server.engine.facade.memory_graph import GraphWalk
from uhp_server.engine.facade.memory_reach import Seen as _Seen
from uhp_server.engine.facade.memory_recall import instant
from uhp_server.engine.facade.memory_recall import recall as recall_below
from uhp_server.engine.facade.memory_replays import Replays
from uhp_server.errors import ApiError
from uhp_server.ids import PREFIXES, new_id
from uhp_server.memories.access import (
    ALL,
    CREATE,
    DELETE,
    MEMBER,
    READ,
    WRITE,
    Access,
    Caller,
    checked_principal,
    checked_privileges,
    ordered,
)
from uhp_server.memories.agent import AGENT
from uhp_server.memories.content import Invalid, Statement, Unsupported, stated
from uhp_server.memories.errors import (
    memory_forbidden,
    memory_invalid,
    memory_not_found,
    memory_unsupported,
    record_not_found,
)
from uhp_server.memories.graph import MemoryGraph, graph_request
from uhp_server.memories.provider import (
    Capabilities,
    Erasure,
    Listing,
    MemoryProvider,
    NewRecord,
    Version,
)
from uhp_server.memories.records import (
    Grant,
    Memory,
    MemoryDeleted,
    MemoryRecord,
    NamedQuery,
    RecallResult,
    RecordPage,
    RecordTime,
    Reference,
    Writer,
)
from uhp_server.memories.snapshots import Snapshot, stated_snapshot

MAX_NAME = 200
MAX_DESCRIPTION = 2000
MAX_PAGE = 200
MAX_EPISODES = 100
REVISE_TRIES = 5  # a revision that keeps losing to others' is refused after this many


def new_memory_rows(
    creator: Caller,
    parent_id: str | None,
    name: str,
    description: str,
    restricted: bool,
    provider: str,
) -> tuple[MemoryRow, MemoryGrantRow]:
    """A new memory's row and its creator's grant, to insert together: whoever creates a
    memory holds all four privileges on it, a grant like any other."""
    now = store.now_ms()
    row = MemoryRow(
        id=new_id("memory"),
        parent_id=parent_id,
        name=name,
        description=description,
        restricted=restricted,
        provider=provider,
        owner_id=creator.member_id,
        created_at_ms=now,
        updated_at_ms=now,
    )
    grant = MemoryGrantRow(
        id=new_id("memory_grant"),
        memory_id=row.id,
        principal=creator.principal,
        privileges=ordered(ALL),
        created_at_ms=now,
    )
    return row, grant


class Memories:
    def __init__(
        self,
        db: Database,
        providers: dict[str, MemoryProvider],
        default_provider: str,
        replays: Replays,
        blobs: BlobStore | None = None,
        max_per_principal: int | None = None,
    ) -> None:
        self.db = db
        # The most memories one principal may create (None: no limit), so that the tree
        # one tenant grows stays bounded (UHP_MEMORY_MAX_PER_PRINCIPAL).
        self.max_per_principal = max_per_principal
        self.providers = providers
        self.default_provider = default_provider
        self.replays = replays  # writes made with an Idempotency-Key
        self.files = MemoryFiles(db, blobs)  # file parts: the server's file store

    async def aclose(self) -> None:
        """Each provider that holds something open (files, a client) closes it."""
        for provider in self.providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                await close()

    # -- who sees what --------------------------------------------------------------------
    def _seen(self, caller: Caller) -> _Seen:
        """Nothing read yet: each operation reads the part of the tree it touches
        (memory_reach.py), never the whole tree."""
        return _Seen(self.db, caller)

    async def _requiring(
        self, caller: Caller, memory_id: str, privilege: str, param: str | None = None
    ) -> _Seen:
        seen = self._seen(caller)
        await seen.reach([memory_id])
        _require(seen.access, memory_id, privilege, param=param)
        return seen

    # -- the tree (§2) --------------------------------------------------------------------
    async def create(self, caller: Caller, body: dict[str, Any]) -> Memory:
        name = _name(body.get("name"))
        description = _text(body.get("description"), "description", MAX_DESCRIPTION)
        restricted = _flag(body.get("restricted"), "restricted")
        parent_id = body.get("parent_id")
        seen = self._seen(caller)
        if parent_id is not None:
            if not isinstance(parent_id, str):
                raise memory_invalid("`parent_id` is a memory's id, or null.", "parent_id")
            seen = await self._requiring(caller, parent_id, CREATE, param="parent_id")
        provider = self._provider_named(body.get("provider"), seen, parent_id)
        row, owner = new_memory_rows(
            caller, parent_id, name, description or "", bool(restricted), provider
        )
        try:
            inserted = await self.db.write(
                store.insert_memory, row, owner, self.max_per_principal, order=Order.ANY
            )
        except store.TooMany:
            raise _too_many(self.max_per_principal) from None
        if inserted is None:
            raise memory_not_found(param="parent_id")
        return await self.get(caller, row.id)

    def _provider_named(self, value: object, seen: _Seen, parent_id: str | None) -> str:
        if value is None:
            return seen.providers[parent_id] if parent_id else self.default_provider
        if not isinstance(value, str) or value not in self.providers:
            raise memory_invalid(
                f"`provider` names a provider this server is connected to: "
                f"{', '.join(sorted(self.providers))}.",
                "provider",
            )
        return value

    async def get(self, caller: Caller, memory_id: str) -> Memory:
        seen = await self._requiring(caller, memory_id, READ)
        return (await self._memories(seen, [memory_id]))[0]

    async def listing(
        self,
        caller: Caller,
        parent: str | None = None,
        ancestor: str | None = None,
        granted: bool = False,
    ) -> list[Memory]:
        """One level (`parent`), where the caller enters (neither), every descendant it may
        see (`ancestor`), or what it was given (`granted`)."""
        seen = self._seen(caller)
        access = seen.access
        if granted:
            await seen.enter()
            ids = access.given()
        elif parent is not None:
            seen = await self._requiring(caller, parent, READ, param="parent")
            await seen.expand([parent])
            ids = seen.access.children(parent)
        elif ancestor is not None:
            seen = await self._requiring(caller, ancestor, READ, param="ancestor")
            await seen.subtree(ancestor)
            ids = seen.access.below(ancestor)
        else:
            await seen.enter()
            ids = access.entries()
        return await self._memories(seen, ids)

    async def overview(self, caller: Caller, most: int) -> tuple[list[Memory], bool]:
        """Where the caller enters the tree and the children of each, entries first, at most
        `most` in all, and whether some were left out: a page that shows what one may see
        from reads that do not grow with the subtrees below (a deeper level is a memory's
        own children, `listing(parent=…)`)."""
        seen = self._seen(caller)
        await seen.enter()
        entries = seen.access.entries()[: most + 1]
        await seen.expand(entries[:most])
        found = [
            *entries,
            *(kid for entry in entries[:most] for kid in seen.access.children(entry)),
        ]
        return await self._memories(seen, found[:most]), len(found) > most

    async def update(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> Memory:
        """Names and descriptions need `write`; restricting or moving needs `delete`, and a
        move `create` on the new parent. A field that says what the caller already sees
        (its `restricted`, its `parent_id`: null where it may not see the parent) changes
        nothing, so an object read back and sent again moves nothing."""
        name = _name(body.get("name")) if "name" in body else None
        description = (
            _text(body.get("description"), "description", MAX_DESCRIPTION)
            if "description" in body
            else None
        )
        restricted = _flag(body.get("restricted"), "restricted")
        seen = await self._requiring(caller, memory_id, WRITE if "name" in body else READ)
        if restricted == seen.access.tree.nodes[memory_id].restricted:
            restricted = None
        move = "parent_id" in body and body["parent_id"] != seen.access.visible_parent(memory_id)
        if "provider" in body and body["provider"] != seen.providers[memory_id]:
            raise memory_unsupported(
                "A memory's provider is set when it is created; this server does not move "
                "records between providers.",
                "provider",
            )
        needed = DELETE if restricted is not None or move else WRITE
        _require(seen.access, memory_id, needed)
        if move:
            await self._check_move(seen, memory_id, body["parent_id"])
        changes = store.MemoryChanges(
            name=name,
            description=description,
            restricted=restricted,
            move=move,
            parent_id=body.get("parent_id"),
        )
        if await self.db.write(store.update_memory, memory_id, changes, order=Order.ANY) is None:
            raise memory_not_found()
        return await self.get(caller, memory_id)

    async def _check_move(self, seen: _Seen, memory_id: str, parent_id: object) -> None:
        if parent_id is None:
            return
        if not isinstance(parent_id, str):
            raise memory_invalid("`parent_id` is a memory's id, or null.", "parent_id")
        await seen.reach([parent_id])
        _require(seen.access, parent_id, CREATE, param="parent_id")
        # Under one of its descendants: it is among the new parent's ancestors.
        if parent_id == memory_id or memory_id in seen.access.tree.ancestors(parent_id):
            raise memory_invalid(
                "A memory cannot move under itself or one of its descendants.", "parent_id"
            )

    async def delete(self, caller: Caller, memory_id: str) -> MemoryDeleted:
        """The memory and its whole subtree, records included; the answer names the ones
        the caller could see (naming the others would say they exist)."""
        seen = await self._requiring(caller, memory_id, DELETE)
        await seen.subtree(memory_id)  # the whole of it: every memory below goes too
        subtree = [memory_id, *seen.access.tree.descendants(memory_id)]
        by_provider: dict[str, list[str]] = {}
        for node in subtree:
            by_provider.setdefault(seen.providers[node], []).append(node)
        await self.db.write(store.delete_memories, subtree, order=Order.ANY)
        await self.db.write(snapshot_store.delete_snapshots, subtree, order=Order.ANY)
        for name, ids in by_provider.items():
            if name in self.providers:
                await self.providers[name].drop(ids)
        await self.files.release_memories(subtree)
        visible = [node for node in subtree if seen.access.sees(node)]
        return MemoryDeleted(memory_id, visible)

    async def _memories(self, seen: _Seen, ids: list[str]) -> list[Memory]:
        await seen.expand(ids)  # each one's children are counted
        counts = await self._counts(seen, ids)
        rows = await self.db.read(store.memories_by_ids, ids)
        access = seen.access
        return [
            Memory(
                id=node,
                name=rows[node].name,
                description=rows[node].description,
                parent_id=access.visible_parent(node),
                ancestors=access.ancestors(node),
                restricted=rows[node].restricted,
                provider=rows[node].provider,
                privileges=ordered(access.on(node)),
                records=counts.get(node, 0),
                children=len(access.children(node)),
                created_at_ms=rows[node].created_at_ms,
                updated_at_ms=rows[node].updated_at_ms,
            )
            for node in ids
            if node in rows  # (deleted since the tree was read)
        ]

    async def _counts(self, seen: _Seen, ids: Iterable[str]) -> dict[str, int]:
        by_provider: dict[str, list[str]] = {}
        for node in ids:
            by_provider.setdefault(seen.providers[node], []).append(node)
        counts: dict[str, int] = {}
        for name, nodes in by_provider.items():
            if name in self.providers:
                counts.update(await self.providers[name].counts(nodes))
        return counts

    # -- grants (§3.1) --------------------------------------------------------------------
    async def grants(self, caller: Caller, memory_id: str) -> list[Grant]:
        """The grants on this memory and on each ancestor whose grants reach it (up to and
        including the nearest restricted one), highest first."""
        seen = await self._requiring(caller, memory_id, DELETE)
        reaching = _reaching(seen, memory_id)
        rows = await self.db.read(store.grants_on, reaching)
        depth = {node: index for index, node in enumerate(reaching)}
        rows.sort(key=lambda row: depth[row.memory_id])
        return [_grant(row, inherited=row.memory_id != memory_id) for row in rows]

    async def grant(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> Grant:
        try:
            principal = checked_principal(body.get("principal"))
            privileges = checked_privileges(body.get("privileges"))
        except ValueError as exc:
            raise memory_invalid(str(exc)) from None
        await self._requiring(caller, memory_id, DELETE)
        await self._may_let_in(caller, principal)
        row = MemoryGrantRow(
            id=new_id("memory_grant"),
            memory_id=memory_id,
            principal=principal,
            privileges=ordered(privileges),
            created_at_ms=store.now_ms(),
        )
        put = await self.db.write(store.put_grant, row, caller.member_id, order=Order.ANY)
        return _grant(put, inherited=False)

    async def _may_let_in(self, caller: Caller, principal: str) -> None:
        """A harness's agent (`member:<harness id>`, §9) is let in by its harness's owner
        alone: a grant from anyone else would put their memory in that agent's instructions
        and its tools, and lead it to write the owner's data where they read it. Another
        principal's harness and one that is not there are refused alike."""
        kind, ident = principal.split(":", 1)
        if kind != MEMBER or not ident.startswith(PREFIXES["harness"]):
            return
        if caller.type == AGENT or not await self.db.read(
            harness_store.get_harness, caller.member_id, ident
        ):
            raise memory_invalid(
                "No harness of yours has that id: a harness's agent is let into a memory by "
                "the harness's owner.",
                "principal",
            )

    async def revoke(self, caller: Caller, memory_id: str, grant_id: str) -> None:
        await self._requiring(caller, memory_id, DELETE)
        revoked = await self.db.write(
            store.delete_grant, memory_id, grant_id, caller.member_id, order=Order.ANY
        )
        if not revoked:
            raise ApiError(404, "not_found", "No grant with that id on this memory.")

    # -- records (§4, §5) -----------------------------------------------------------------
    async def remember(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> MemoryRecord:
        statement = _stated(body)
        seen = await self._requiring(caller, memory_id, WRITE)
        provider = self._provider_of(seen, memory_id)
        statement = await self._with_files(caller, provider, statement)
        references = await self._placed(seen, statement.references or [])
        record = _new_record(memory_id, statement, references, _writer(caller))
        stored = await provider.remember([record])
        if stored is None:
            raise memory_not_found()
        await self.files.note(stored)
        return await self._shown(seen, stored[0])

    async def _with_files(
        self,
        caller: Caller,
        provider: MemoryProvider,
        statement: Statement,
        already_named: frozenset[str] = frozenset(),
    ) -> Statement:
        """The statement with its file parts completed from the file store (§4.3)."""
        if statement.content is None:
            return statement
        content = await self.files.complete(
            caller.member_id, provider, statement.content, already_named
        )
        return dataclasses.replace(statement, content=content)

    async def observe(
        self, caller: Caller, memory_id: str, body: dict[str, Any]
    ) -> list[MemoryRecord]:
        """Episodes appended as they arrived (§5.1). The embedded provider derives nothing
        from them yet (`derivation: none`), so it answers at once with what it kept."""
        episodes = body.get("episodes")
        if not isinstance(episodes, list) or not 0 < len(episodes) <= MAX_EPISODES:
            raise memory_invalid(
                f"`episodes` is a list of 1 to {MAX_EPISODES} episodes.", "episodes"
            )
        records = []
        for index, episode in enumerate(episodes):
            if not isinstance(episode, dict) or "content" not in episode:
                raise memory_invalid(f"episodes[{index}] carries its `content`.", "episodes")
            statement = _stated({"type": "episode", **_only(episode, "content", "attributes")})
            records.append(statement)
        seen = await self._requiring(caller, memory_id, WRITE)
        writer = _writer(caller)
        provider = self._provider_of(seen, memory_id)
        records = [await self._with_files(caller, provider, each) for each in records]
        stored = await provider.remember(
            [_new_record(memory_id, statement, [], writer) for statement in records]
        )
        if stored is None:
            raise memory_not_found()
        await self.files.note(stored)
        return [await self._shown(seen, version) for version in stored]

    async def records(
        self,
        caller: Caller,
        memory_id: str,
        *,
        type: str | None = None,
        include: str | None = None,
        as_of: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RecordPage:
        if include not in (None, "active", "all"):
            raise memory_invalid("`include` is active or all.", "include")
        size = MAX_PAGE if limit is None else limit
        if not 0 < size <= MAX_PAGE:
            raise memory_invalid(f"`limit` is between 1 and {MAX_PAGE}.", "limit")
        seen = await self._requiring(caller, memory_id, READ)
        listing = Listing(
            memory_id=memory_id,
            type=type,
            include_forgotten=include == "all",
            as_of=instant(as_of),
            after=cursor,
            limit=size,
        )
        versions = await self._provider_of(seen, memory_id).listing(listing)
        shown = [await self._shown(seen, version) for version in versions]
        return RecordPage(shown, shown[-1].id if len(shown) == size else None)

    async def record(
        self, caller: Caller, memory_id: str, record_id: str, as_of: str | None = None
    ) -> MemoryRecord:
        moment = instant(as_of)
        seen = await self._requiring(caller, memory_id, READ)
        version = await self._provider_of(seen, memory_id).get(memory_id, record_id, moment)
        if version is None:
            raise record_not_found()
        return await self._shown(seen, version)

    async def primed(self, caller: Caller, memory_id: str) -> list[MemoryRecord]:
        """What the memory's provider marks as always relevant (§9.1), as this caller reads
        it; needs `read`."""
        seen = await self._requiring(caller, memory_id, READ)
        versions = await self._provider_of(seen, memory_id).prime(memory_id)
        return [await self._shown(seen, version) for version in versions]

    async def history(self, caller: Caller, memory_id: str, record_id: str) -> list[MemoryRecord]:
        seen = await self._requiring(caller, memory_id, READ)
        versions = await self._provider_of(seen, memory_id).history(memory_id, record_id)
        if not versions:
            raise record_not_found()
        return [await self._shown(seen, version) for version in versions]

    async def revise(
        self, caller: Caller, memory_id: str, record_id: str, body: dict[str, Any]
    ) -> MemoryRecord:
        """A new version; the one before stays in the history. What is not stated is kept,
        and so is every reference the reviser may not read (§4.2: it can neither restate
        nor remove one it was shown as unavailable)."""
        statement = _stated(body, revising=True)
        seen = await self._requiring(caller, memory_id, WRITE)
        provider = self._provider_of(seen, memory_id)
        for _ in range(REVISE_TRIES):
            current = await provider.get(memory_id, record_id, None)
            if current is None:
                raise record_not_found()
            _revisable(current)
            # A reviser may send back the files it read in the version it revises.
            named = frozenset(file_ids(current.record.content))
            restated = await self._with_files(caller, provider, statement, named)
            record = await self._revised(seen, current, restated, _writer(caller))
            stored = await provider.append(record_id, current.version, record)
            if stored is not None:
                await self.files.note([stored])
                return await self._shown(seen, stored)
            await asyncio.sleep(0)  # another change came first: revise what it left
        raise ApiError(409, "memory_busy", "This record is being changed by others; try again.")

    async def _revised(
        self, seen: _Seen, current: Version, statement: Statement, writer: Writer
    ) -> NewRecord:
        was = current.record
        references = was.references
        if statement.references is not None:
            await seen.reach(_targets(was.references))
            hidden = [ref for ref in was.references if not _readable(seen, ref)]
            stated_refs = await self._placed(seen, statement.references)
            references = [*stated_refs, *(ref for ref in hidden if ref not in stated_refs)]
            _one_subject_and_object(references)
        return NewRecord(
            memory_id=was.memory_id,
            type=was.type,
            title=statement.title if statement.title is not None else was.title,
            content=statement.content if statement.content is not None else was.content,
            attributes=statement.attributes if statement.attributes is not None else was.attributes,
            references=references,
            valid_from=statement.valid_from or was.valid_from,
            valid_to=statement.valid_to or was.valid_to,
            written_by=writer,
        )

    async def forget(self, caller: Caller, memory_id: str, record_id: str) -> MemoryRecord:
        seen = await self._requiring(caller, memory_id, WRITE)
        provider = self._provider_of(seen, memory_id)
        current = await provider.get(memory_id, record_id, None)
        if current is None:
            raise record_not_found()
        if current.follows is not None:
            _revisable(current)
        forgotten = await provider.forget(memory_id, record_id)
        if forgotten is None:
            raise record_not_found()
        return await self._shown(seen, forgotten)

    async def erase(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> Erasure:
        """Removes records for good (§5.2): a person's act, needing `delete`, never a tool."""
        record_ids = body.get("record_ids")
        if (
            not isinstance(record_ids, list)
            or not 0 < len(record_ids) <= MAX_PAGE
            or not all(isinstance(rid, str) for rid in record_ids)
        ):
            raise memory_invalid(
                f"`record_ids` is a list of 1 to {MAX_PAGE} record ids.", "record_ids"
            )
        seen = await self._requiring(caller, memory_id, DELETE)
        unique = list(dict.fromkeys(record_ids))
        erased = await self._provider_of(seen, memory_id).erase(memory_id, unique)
        if erased is None:
            raise record_not_found()
        # The bytes of its files go too, where nothing else uses them; a record whose
        # file stays readable elsewhere is named in `unreachable` (§7).
        kept = await self.files.release_records(erased.erased)
        unreachable = list(dict.fromkeys([*erased.unreachable, *kept]))
        return Erasure(erased.erased, unreachable)

    # -- the graph (§6.6) -----------------------------------------------------------------
    async def graph(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> MemoryGraph:
        """Records as nodes and references as edges, around one record or over the memory
        and what is below it that the caller may read (memory_graph.py)."""
        ask = graph_request(body)
        seen = await self._requiring(caller, memory_id, READ)
        scope, capped = await memory_recall.scope(seen, memory_id, None)

        async def shown(version: Version) -> MemoryRecord:
            return await self._shown(seen, version)

        walk = GraphWalk(self.db, seen.access, seen.providers, self.providers, shown, seen.reach)
        if capped:
            walk.degraded.append(memory_recall.subtree_capped())
        return await walk.graph(scope, ask)

    # -- file parts (§4.3, §7) ------------------------------------------------------------
    async def content(
        self,
        caller: Caller,
        memory_id: str,
        record_id: str,
        index: int,
        as_of: str | None = None,
        version: int | None = None,
    ) -> PartBytes:
        """The bytes of one file part of a record, to whoever may read the record: of the
        current version, the one held `as_of`, or a `version` of its history."""
        at = instant(as_of)
        seen = await self._requiring(caller, memory_id, READ)
        provider = self._provider_of(seen, memory_id)
        if version is None:
            found = await provider.get(memory_id, record_id, at)
        else:
            history = await provider.history(memory_id, record_id)
            found = next((v for v in history if v.version == version), None)
        if found is None:
            raise record_not_found()
        return await self.files.bytes_of(found, index)

    # -- snapshots (§5.3) -----------------------------------------------------------------
    async def snapshot(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> Snapshot:
        name, message = stated_snapshot(body)
        await self._requiring(caller, memory_id, WRITE)
        return await snapshots.take(self.db, memory_id, name, message, _writer(caller))

    async def snapshots(self, caller: Caller, memory_id: str) -> list[Snapshot]:
        await self._requiring(caller, memory_id, READ)
        return await snapshots.of_memory(self.db, memory_id)

    # -- what the providers here do not do --------------------------------------------------
    async def job(self, caller: Caller, memory_id: str, job_id: str) -> None:
        """Observe answers at once here (§5.1): no job is ever made, so none is found."""
        await self._requiring(caller, memory_id, READ)
        raise ApiError(
            404,
            "not_found",
            "No job with that id: this memory's observe answers with its records at once.",
        )

    async def operate(self, caller: Caller, memory_id: str, record_id: str, name: str) -> None:
        """§8: an operation is offered by an extension type; no provider here registers one."""
        seen = await self._requiring(caller, memory_id, READ)
        if await self._provider_of(seen, memory_id).get(memory_id, record_id, None) is None:
            raise record_not_found()
        raise memory_unsupported(
            f"No operation `{name[:100]}` on this record: this memory's provider registers no "
            "extension types, so its records offer no operations (`types: false`)."
        )

    async def consolidation(self, caller: Caller, memory_id: str) -> None:
        """§9.2: the providers here consolidate nothing (`consolidate: false`)."""
        await self._requiring(caller, memory_id, READ)
        raise memory_unsupported(
            "This memory's provider runs no consolidation (`consolidate: false`): it keeps "
            "what is written as written."
        )

    # -- recall (§6) -------------------------------------------------------------------------
    async def recall(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> RecallResult:
        """A question asked of this memory and of what is below it that the caller may read
        (memory_recall.py)."""
        return await recall_below(self, caller, memory_id, body)

    async def queries(self, caller: Caller, memory_id: str) -> list[NamedQuery]:
        return await memory_queries.listing(self, caller, memory_id)

    async def define_query(
        self, caller: Caller, memory_id: str, name: str, body: dict[str, Any]
    ) -> NamedQuery:
        return await memory_queries.define(self, caller, memory_id, name, body)

    async def run_query(
        self, caller: Caller, memory_id: str, name: str, body: dict[str, Any]
    ) -> RecallResult:
        return await memory_queries.run(self, caller, memory_id, name, body)

    async def free_query(self, caller: Caller, memory_id: str, body: dict[str, Any]) -> NoReturn:
        """§6.5: no provider here declares `queries.free`; always memory_unsupported."""
        await memory_queries.free(self, caller, memory_id)

    def turns_sent_to(self, provider: str) -> str | None:
        """Where a memory of this provider sends what it observes beyond this server (§9.1's
        notice); None when it stays here, or the provider is not connected (nothing is sent)."""
        connected = self.providers.get(provider)
        return connected.turns_sent_to() if connected is not None else None

    def provider_documents(self) -> list[Capabilities]:
        """What each connected provider does (§10.2), the default one first."""
        names = sorted(self.providers, key=lambda name: (name != self.default_provider, name))
        return [self.providers[name].capabilities() for name in names]

    async def _rows(self, memory_ids: list[str]) -> dict[str, MemoryRow]:
        return await self.db.read(store.memories_by_ids, memory_ids)

    def _provider_of(self, seen: _Seen, memory_id: str) -> MemoryProvider:
        name = seen.providers[memory_id]
        if name not in self.providers:
            raise ApiError(
                503, "memory_unavailable", f"The provider `{name}` of this memory is not connected."
            )
        return self.providers[name]

    async def _placed(self, seen: _Seen, references: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """References as kept: one that names no memory is given the memory its record is
        in, when a provider here keeps it (the reader's privileges decide what it shows)."""
        unplaced = [ref["record_id"] for ref in references if "memory_id" not in ref]
        found: dict[str, str] = {}
        if unplaced:
            for provider in self.providers.values():
                found.update(await provider.locate(unplaced))
        return [
            ref
            if "memory_id" in ref or ref["record_id"] not in found
            else {**ref, "memory_id": found[ref["record_id"]]}
            for ref in references
        ]

    async def _shown(self, seen: _Seen, version: Version) -> MemoryRecord:
        record = version.record
        await seen.reach(_targets(record.references))  # whether the reader may follow each
        return MemoryRecord(
            id=version.id,
            memory_id=version.memory_id,
            type=record.type,
            title=record.title,
            content=record.content,
            attributes=record.attributes,
            version=version.version,
            status=version.status,
            supersedes=version.supersedes,
            time=RecordTime(
                record.valid_from, record.valid_to, version.written_at_ms, version.invalidated_at_ms
            ),
            written_by=record.written_by,
            references=[_reference(seen, ref) for ref in record.references],
            follows=version.follows,
        )


# -- helpers ----------------------------------------------------------------------------------
def _targets(references: Iterable[dict[str, Any]]) -> list[str]:
    return [ref["memory_id"] for ref in references if isinstance(ref.get("memory_id"), str)]


def _too_many(most: int | None) -> ApiError:
    return ApiError(
        422,
        "memory_invalid",
        f"You have created {most} memories, as many as this server keeps for one principal "
        "(UHP_MEMORY_MAX_PER_PRINCIPAL); delete some first.",
        detail={"max_memories": most},
    )


def _require(access: Access, memory_id: str, privilege: str, param: str | None = None) -> None:
    held = access.on(memory_id)
    if not held:
        raise memory_not_found(param=param)
    if privilege not in held:
        raise memory_forbidden(privilege)


def _reaching(seen: _Seen, memory_id: str) -> list[str]:
    """The nodes whose grants reach this one, highest first: itself, and its ancestors up
    to and including the nearest restricted one."""
    chain = [memory_id]
    node = seen.access.tree.nodes[memory_id]
    while (
        not node.restricted
        and node.parent_id in seen.access.tree.nodes
        and node.parent_id not in chain
    ):
        chain.append(node.parent_id)
        node = seen.access.tree.nodes[node.parent_id]
    return chain[::-1]


def _grant(row: MemoryGrantRow, inherited: bool) -> Grant:
    return Grant(row.id, row.memory_id, row.principal, ordered(row.privileges or ()), inherited)


def _readable(seen: _Seen, ref: dict[str, Any]) -> bool:
    target = ref.get("memory_id")
    return isinstance(target, str) and READ in seen.access.on(target)


def _reference(seen: _Seen, ref: dict[str, Any]) -> Reference:
    if not _readable(seen, ref):
        return Reference(record_id=ref["record_id"], available=False)
    return Reference(
        record_id=ref["record_id"], available=True, rel=ref.get("rel"), memory_id=ref["memory_id"]
    )


def _writer(caller: Caller) -> Writer:
    """The stamp (§13): the authenticated caller, whatever the body said."""
    return Writer(kind="member", id=caller.member_id, type=caller.type)


def _new_record(
    memory_id: str, statement: Statement, references: list[dict[str, Any]], writer: Writer
) -> NewRecord:
    return NewRecord(
        memory_id=memory_id,
        type=statement.type or "fact",
        title=statement.title,
        content=statement.content or [],
        attributes=statement.attributes or {},
        references=references,
        valid_from=statement.valid_from,
        valid_to=statement.valid_to,
        written_by=writer,
    )


def _stated(body: dict[str, Any], revising: bool = False) -> Statement:
    try:
        return stated(body, revising=revising)
    except Invalid as exc:
        raise memory_invalid(str(exc), exc.param) from None
    except Unsupported as exc:
        raise memory_unsupported(str(exc), "content") from None


def _one_subject_and_object(references: list[dict[str, Any]]) -> None:
    """§4.2 holds after a revision too: what the reviser states, with the references it
    may not read and so keeps, names at most one `subject` and one `object`."""
    for rel in ("subject", "object"):
        if sum(1 for ref in references if ref.get("rel") == rel) > 1:
            raise memory_invalid(
                f"A record names at most one `{rel}`, and this one keeps a reference you may "
                f"not read that would be a second: state no `{rel}`, or write a new record.",
                "references",
            )


def _revisable(version: Version) -> None:
    if version.follows is not None:
        source = version.follows.get("name") or version.follows.get("id") or "its source"
        raise memory_unsupported(
            f"This record follows {source}: change it there, and the record follows."
        )
    if version.status != store.ACTIVE:
        raise memory_invalid("This record was forgotten; write a new record instead.")


def _only(body: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: body[name] for name in names if name in body}


def _name(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME:
        raise memory_invalid(f"`name` is text of 1 to {MAX_NAME} characters.", "name")
    return value


def _text(value: object, name: str, most: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > most:
        raise memory_invalid(f"`{name}` is text of at most {most} characters.", name)
    return value


def _flag(value: object, name: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise memory_invalid(f"`{name}` is true or false.", name)
    return value
