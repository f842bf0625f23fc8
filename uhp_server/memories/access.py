"""Who may do what on which memory (Memories §3): a caller's grants, inherited down the tree
and stopped by a restricted node, as privileges per node.

Decided here, before any provider is asked anything: a provider never sees a memory the
caller may not reach. Pure: the tree and the grants are given (storage/memories.py reads
them), so the rules are tested without a database.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

READ, WRITE, CREATE, DELETE = "read", "write", "create", "delete"
PRIVILEGES = (READ, WRITE, CREATE, DELETE)  # in the order they are reported
ALL = frozenset(PRIVILEGES)

MEMBER, GROUP = "member", "group"
# A kind of the server's own is `x.`-prefixed; no other unprefixed kind holds a grant (§3).
_KIND = re.compile(r"^(member|group|x\.[a-z0-9_.-]+)$")
MAX_PRINCIPAL = 256


@dataclass(frozen=True)
class Caller:
    """Who acts, as the access model sees it: a member (a person or an agent, `type` says
    which and no rule depends on it) and the groups the server puts it in."""

    member_id: str
    type: str = "human"  # "human" or "agent"
    groups: frozenset[str] = frozenset()

    @property
    def principal(self) -> str:
        return principal_of(MEMBER, self.member_id)

    def principals(self) -> frozenset[str]:
        """Every principal whose grants are this caller's."""
        return frozenset({self.principal, *(principal_of(GROUP, g) for g in self.groups)})


def principal_of(kind: str, ident: str) -> str:
    return f"{kind}:{ident}"


def checked_principal(value: object) -> str:
    """A grant's principal, `<kind>:<id>`; ValueError saying what is wrong otherwise."""
    if not isinstance(value, str) or ":" not in value or len(value) > MAX_PRINCIPAL:
        raise ValueError("`principal` is `<kind>:<id>`: member:<id>, group:<id> or x.<kind>:<id>.")
    kind, ident = value.split(":", 1)
    if not _KIND.match(kind):
        raise ValueError(
            f"`{kind}` is not a kind a grant may name: member, group, or an x.-prefixed kind."
        )
    if not ident.strip():
        raise ValueError("`principal` names no id after its kind.")
    return value


def checked_privileges(value: object) -> frozenset[str]:
    if not isinstance(value, list) or not value:
        raise ValueError("`privileges` is a non-empty list of read, write, create and delete.")
    unknown = [p for p in value if p not in ALL]
    if unknown:
        raise ValueError(f"Unknown privileges {unknown!r}: read, write, create and delete.")
    return frozenset(value)


def ordered(privileges: Iterable[str]) -> list[str]:
    held = set(privileges)
    return [p for p in PRIVILEGES if p in held]


@dataclass(frozen=True)
class Node:
    id: str
    parent_id: str | None
    restricted: bool
    created_at_ms: int = 0  # siblings are listed oldest first


@dataclass
class Tree:
    """The memories as a tree, or the part of it one request needs (the facade reads each
    node with its whole chain of ancestors, so what is decided for a node read is decided
    as over the whole tree): each node's parent and children, oldest child first."""

    nodes: dict[str, Node] = field(default_factory=dict)
    children: dict[str | None, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Tree:
        tree = cls()
        tree.add(nodes)
        return tree

    def add(self, nodes: Iterable[Node]) -> None:
        """Nodes read since, each with its ancestors: a node already here stays as it is."""
        grown: set[str | None] = set()
        for node in nodes:
            if node.id in self.nodes:
                continue
            self.nodes[node.id] = node
            self.children.setdefault(node.parent_id, []).append(node.id)
            grown.add(node.parent_id)
        for parent in grown:  # stable: siblings made in one millisecond keep their order
            self.children[parent].sort(key=lambda kid: self.nodes[kid].created_at_ms)

    def ancestors(self, memory_id: str) -> list[str]:
        """From the root down to the parent."""
        chain: list[str] = []
        parent = self.nodes[memory_id].parent_id
        while parent is not None and parent in self.nodes and parent not in chain:
            chain.append(parent)
            parent = self.nodes[parent].parent_id
        return chain[::-1]

    def descendants(self, memory_id: str) -> list[str]:
        """Every node below, parents before their children."""
        found: list[str] = []
        seen = {memory_id}  # a cycle cannot be made (storage refuses it), nor loop here
        frontier = [kid for kid in self.children.get(memory_id, []) if kid not in seen]
        while frontier:
            found.extend(frontier)
            seen.update(frontier)
            frontier = [
                kid for node in frontier for kid in self.children.get(node, []) if kid not in seen
            ]
        return found

    def depth(self, memory_id: str) -> int:
        return len(self.ancestors(memory_id))


class Access:
    """One caller's effective privileges on every node (§3.1, §3.2): the union of its grants
    on the node and on each ancestor, up to and including the nearest restricted node."""

    def __init__(self, tree: Tree, granted: dict[str, frozenset[str]]) -> None:
        self.tree = tree
        self._granted = dict(granted)  # the caller's own grants, by the node they sit on
        self._known: dict[str, frozenset[str]] = {}

    def add(self, nodes: Iterable[Node], granted: Iterable[tuple[str, Iterable[str]]]) -> None:
        """More of the tree, with the caller's grants on it. Each node comes with its
        ancestors, so what was decided before still holds and stays known."""
        fresh = [node for node in nodes if node.id not in self.tree.nodes]
        self.tree.add(fresh)
        new = {node.id for node in fresh}
        for memory_id, privileges in granted:
            if memory_id in new:
                self._granted[memory_id] = self._granted.get(memory_id, frozenset()) | frozenset(
                    privileges
                )

    def on(self, memory_id: str) -> frozenset[str]:
        """Empty for a memory that is not there: unknown and forbidden are the same."""
        if memory_id in self._known:
            return self._known[memory_id]
        node = self.tree.nodes.get(memory_id)
        if node is None:
            return frozenset()
        # Walked up iteratively, the chain below kept: no recursion into a deep tree.
        chain: list[Node] = []
        walked: set[str] = set()
        held: frozenset[str] = frozenset()
        while node is not None and node.id not in self._known and node.id not in walked:
            chain.append(node)
            walked.add(node.id)
            if node.restricted or node.parent_id is None:
                node = None
            else:
                node = self.tree.nodes.get(node.parent_id)
        if node is not None and node.id in self._known:
            held = self._known[node.id]
        for below in reversed(chain):
            held = held | self._granted.get(below.id, frozenset())
            self._known[below.id] = held
        return self._known[memory_id]

    def sees(self, memory_id: str) -> bool:
        return bool(self.on(memory_id))

    def visible_parent(self, memory_id: str) -> str | None:
        """The parent when the caller may see it; None on a root and equally when it may not."""
        parent = self.tree.nodes[memory_id].parent_id
        return parent if parent is not None and self.sees(parent) else None

    def ancestors(self, memory_id: str) -> list[str]:
        """From the highest the caller may see, without a gap, down to the parent."""
        seen: list[str] = []
        for ancestor in reversed(self.tree.ancestors(memory_id)):
            if not self.sees(ancestor):
                break
            seen.append(ancestor)
        return seen[::-1]

    def children(self, memory_id: str | None) -> list[str]:
        return [kid for kid in self.tree.children.get(memory_id, []) if self.sees(kid)]

    def entries(self) -> list[str]:
        """Where the caller enters the tree: each memory it may see whose parent it cannot."""
        return self._highest_first(
            node for node in self.tree.nodes if self.sees(node) and not self.visible_parent(node)
        )

    def given(self) -> list[str]:
        """What the caller was given (§2 `granted=true`): where it enters, and every memory
        below those where what it may do differs from what it may do on the parent."""
        entries = set(self.entries())
        found = [
            node
            for node in self.tree.nodes
            if node in entries
            or (
                self.sees(node)
                and (parent := self.visible_parent(node)) is not None
                and self.on(node) != self.on(parent)
            )
        ]
        return self._highest_first(found)

    def below(self, memory_id: str) -> list[str]:
        """Every descendant the caller may see, each judged on its own: behind a cutoff it
        is not let through, only what it holds a grant on there."""
        return [node for node in self.tree.descendants(memory_id) if self.sees(node)]

    def searched(self, memory_id: str, depth: int | None = None) -> list[str]:
        """The memories a question asked of `memory_id` covers (§6.1): it and every
        descendant down to `depth` levels (all of them when None) that the caller may read,
        each judged on its own; never an ancestor. Recall's scope, decided before any
        provider is asked."""
        if READ not in self.on(memory_id):
            return []
        found = [memory_id]
        level = [memory_id]
        for _ in range(depth if depth is not None else len(self.tree.nodes)):
            level = [kid for node in level for kid in self.tree.children.get(node, [])]
            if not level:
                break
            found.extend(node for node in level if READ in self.on(node))
        return found

    def _highest_first(self, nodes: Iterable[str]) -> list[str]:
        order = {node: index for index, node in enumerate(self.tree.nodes)}
        return sorted(
            nodes,
            key=lambda node: (
                self.tree.depth(node),
                self.tree.nodes[node].created_at_ms,
                order[node],
            ),
        )
