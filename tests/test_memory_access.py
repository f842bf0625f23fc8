"""Who may do what on which memory (Memories §3), the rules alone: grants inherited down the
tree, the restricted cutoff, where a caller enters and what it was given (§2)."""

from __future__ import annotations

import pytest

from uhp_server.memories.access import (
    Access,
    Caller,
    Node,
    Tree,
    checked_principal,
    checked_privileges,
    ordered,
)

#   company
#   ├── sales
#   │   ├── acme
#   │   └── dana (restricted)
#   │       └── dana-drafts
#   └── ops
TREE = Tree.of(
    [
        Node("company", None, False),
        Node("sales", "company", False),
        Node("acme", "sales", False),
        Node("dana", "sales", True),
        Node("dana-drafts", "dana", False),
        Node("ops", "company", False),
    ]
)


def _access(**granted: set[str]) -> Access:
    return Access(TREE, {node.replace("_", "-"): frozenset(p) for node, p in granted.items()})


def test_privileges_are_the_union_of_the_grants_on_the_node_and_above() -> None:
    access = _access(company={"read"}, sales={"write"}, acme={"create"})
    assert access.on("company") == {"read"}
    assert access.on("sales") == {"read", "write"}
    assert access.on("acme") == {"read", "write", "create"}
    assert access.on("ops") == {"read"}
    assert ordered(access.on("acme")) == ["read", "write", "create"]


def test_a_restricted_memory_stops_what_is_granted_above_and_passes_its_own_down() -> None:
    access = _access(company={"read", "write", "create", "delete"})
    assert access.on("dana") == frozenset() and access.on("dana-drafts") == frozenset()
    assert not access.sees("dana")
    inside = _access(company={"read"}, dana={"write"})
    assert inside.on("dana") == {"write"}  # the cutoff: nothing from company
    assert inside.on("dana-drafts") == {"write"}  # its own grants flow down


def test_no_grant_is_no_access_and_an_unknown_memory_is_the_same() -> None:
    access = _access(acme={"read"})
    assert access.on("company") == frozenset() and access.on("sales") == frozenset()
    assert access.on("nowhere") == frozenset()
    assert access.visible_parent("acme") is None  # a hidden parent looks like a root
    assert access.ancestors("acme") == []


def test_where_a_caller_enters_and_what_it_was_given() -> None:
    access = _access(sales={"read"}, acme={"write"}, dana={"write"})
    assert access.entries() == ["sales"]  # dana's parent, sales, is visible: not an entry
    # given: where it enters, then every memory where what it may do differs from above
    assert access.given() == ["sales", "acme", "dana"]
    same = _access(sales={"read"}, dana={"read"})
    assert same.given() == ["sales"]  # the same there as on its parent: nothing to say
    assert access.children("sales") == ["acme", "dana"]
    assert access.below("sales") == ["acme", "dana", "dana-drafts"]
    only_drafts = _access(company={"read"}, dana_drafts={"read"})
    # behind the cutoff, only what it holds a grant on there, entered on its own
    assert only_drafts.below("company") == ["sales", "ops", "acme", "dana-drafts"]
    assert only_drafts.entries() == ["company", "dana-drafts"]
    assert only_drafts.ancestors("dana-drafts") == []  # a gap: dana stands between


def test_ancestors_are_root_first_as_far_up_as_the_caller_sees() -> None:
    access = _access(company={"read"})
    assert access.ancestors("acme") == ["company", "sales"]
    assert access.visible_parent("acme") == "sales"
    assert TREE.descendants("sales") == ["acme", "dana", "dana-drafts"]


def test_a_caller_holds_its_own_grants_and_its_groups() -> None:
    caller = Caller("prin_1", groups=frozenset({"sales"}))
    assert caller.principal == "member:prin_1"
    assert caller.principals() == {"member:prin_1", "group:sales"}


@pytest.mark.parametrize("principal", ["member:prin_1", "group:sales", "x.team:blue", "member:a:b"])
def test_a_grant_names_a_member_a_group_or_a_kind_of_the_servers_own(principal: str) -> None:
    assert checked_principal(principal) == principal


@pytest.mark.parametrize(
    "principal", ["team:sales", "provider:native", "member:", "member: ", "prin_1", 7, None]
)
def test_any_other_principal_is_refused(principal: object) -> None:
    with pytest.raises(ValueError):
        checked_principal(principal)


def test_privileges_are_the_four_and_at_least_one() -> None:
    assert checked_privileges(["read", "delete"]) == {"read", "delete"}
    for bad in ([], ["admin"], "read", None):
        with pytest.raises(ValueError):
            checked_privileges(bad)


def test_a_question_covers_what_is_below_that_the_caller_may_read_never_above() -> None:
    access = _access(company={"read"}, dana_drafts={"read"}, ops={"write"})
    # dana is behind the cutoff and not searched; dana-drafts is granted and is
    assert access.searched("company") == ["company", "sales", "ops", "acme", "dana-drafts"]
    assert access.searched("company", depth=0) == ["company"]
    assert access.searched("company", depth=1) == ["company", "sales", "ops"]
    assert access.searched("acme") == ["acme"]  # never its parent
    assert access.searched("dana") == []  # a memory it may not read searches nothing
    write_only = _access(ops={"write"})
    assert write_only.searched("ops") == []  # seen, but not readable
