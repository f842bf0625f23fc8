"""The part of the memory tree one request needs, as one caller sees it (issue 29).

Access (memories/access.py) is decided over nodes read here, never over the whole tree, so
what one principal keeps, however much, is never read to answer another's request: a node
is read with its chain of ancestors (the grants that reach it sit there), a subtree only
when a question covers it (recall, the graph, a listing below, a delete), and each time
with the caller's own grants on what was read. Each read is one statement or a few, by
index; nothing here scans the tree.

Every node is read with its whole chain up to its root, so a node read is decided exactly
as over the whole tree; a node not read is one the caller cannot see (which is safe: it is
refused as unknown). Each operation reads what it touches before it decides.
"""

from __future__ import annotations

from collections.abc import Iterable

from storage import memories as store
from storage.db import Database
from storage.unit import Tx
from uhp_server.memories.access import Access, Caller, Node, Tree

Granted = list[tuple[str, list[str]]]  # (memory, privileges), one per grant


class Seen:
    """The tree as one caller sees it so far, and each node's provider."""

    def __init__(self, db: Database, caller: Caller) -> None:
        self.db = db
        self.principals = sorted(caller.principals())
        self.access = Access(Tree(), {})
        self.providers: dict[str, str] = {}  # by memory
        self._expanded: set[str] = set()  # whose children are all read

    async def reach(self, memory_ids: Iterable[str]) -> None:
        """Each memory named (when it is there) with its ancestors."""
        wanted = [m for m in set(memory_ids) if m not in self.access.tree.nodes]
        if wanted:
            self._add(*await self.db.read(_reached, wanted, self.principals))

    async def enter(self) -> None:
        """Every memory the caller holds a grant on, with its ancestors: where it enters
        the tree and what it was given are among those."""
        self._add(*await self.db.read(_granted, self.principals))

    async def expand(self, memory_ids: Iterable[str]) -> None:
        """The children of each memory named (read already)."""
        wanted = [m for m in set(memory_ids) if m not in self._expanded]
        if wanted:
            self._add(*await self.db.read(_children, wanted, self.principals))
            self._expanded.update(wanted)

    async def subtree(
        self, memory_id: str, depth: int | None = None, most: int | None = None
    ) -> bool:
        """The memory (read already) and its descendants, `depth` levels down (all when
        None), nearest first, at most `most` memories in all (all when None); whether
        some were left out."""
        await self.reach([memory_id])
        below, granted = await self.db.read(_subtree, memory_id, depth, most, self.principals)
        self._add(below.nodes, granted)
        # (a node already read with its children before keeps them: nothing is lost)
        self._expanded.update(below.complete)
        return below.capped

    def _add(self, nodes: list[store.Skeleton], granted: Granted) -> None:
        self.access.add(
            (Node(n.id, n.parent_id, n.restricted, n.created_at_ms) for n in nodes), granted
        )
        for node in nodes:
            self.providers.setdefault(node.id, node.provider)


# -- each read, in one transaction: the nodes and the caller's grants on them -----------------
def _reached(
    tx: Tx, memory_ids: list[str], principals: list[str]
) -> tuple[list[store.Skeleton], Granted]:
    return _with_grants(tx, store.with_ancestors(tx, memory_ids), principals)


def _granted(tx: Tx, principals: list[str]) -> tuple[list[store.Skeleton], Granted]:
    return _with_grants(tx, store.granted_with_ancestors(tx, principals), principals)


def _children(
    tx: Tx, memory_ids: list[str], principals: list[str]
) -> tuple[list[store.Skeleton], Granted]:
    return _with_grants(tx, store.children_of(tx, memory_ids), principals)


def _subtree(
    tx: Tx, memory_id: str, depth: int | None, most: int | None, principals: list[str]
) -> tuple[store.Subtree, Granted]:
    below = store.subtree(tx, memory_id, depth, most)
    return below, store.grants_held(tx, principals, (node.id for node in below.nodes))


def _with_grants(
    tx: Tx, nodes: list[store.Skeleton], principals: list[str]
) -> tuple[list[store.Skeleton], Granted]:
    return nodes, store.grants_held(tx, principals, (node.id for node in nodes))
