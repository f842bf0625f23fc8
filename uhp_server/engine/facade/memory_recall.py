"""Recall (Memories §6.1-§6.3): a question asked of a memory and of what is below it.

The server decides the memories a question covers before any provider is asked
(`Access.searched`): the memory asked and each descendant the caller may read, each judged
on its own (a grant inside a branch behind a cutoff is searched, the rest of that branch
is not), `depth` levels down, never an ancestor, the nearest `MAX_MEMORIES` of those (a
cap said in `degraded`; memories the caller may not read do not count, and at most
`MAX_READ` are read to find them). Each provider is asked only about its own
memories among those; what it did not do comes back in `degraded`, and the answers merge by
score.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from uhp_server.memories.access import READ, Caller
from uhp_server.memories.errors import memory_invalid
from uhp_server.memories.provider import (
    AllOf,
    Answer,
    AnyOf,
    FieldFilter,
    Filter,
    Found,
    Question,
)
from uhp_server.memories.records import Neighbour, RecallHit, RecallResult

if TYPE_CHECKING:
    from uhp_server.engine.facade.memories import Memories
    from uhp_server.engine.facade.memory_reach import Seen as _Seen

MAX_MEMORIES = 200  # one question covers at most this many memories (§6.1 MAY cap)
# The most memories below one question reads to find those it covers: the cap counts what
# the caller may read, so what others keep there (memories it may not read) neither uses it
# up nor costs more than this. Read in growing chunks: the common case reads the cap alone.
MAX_READ = 5000
READ_GROWTH = 5
# After the first chunk, the next is sized once by the share of it the caller could read
# (a restricted branch among the nearest, say), with this margin: a tenth of the cap short
# then reads a few more memories, not five times as many. Never more than READ_GROWTH.
ESTIMATE_MARGIN = 1.25
DEFAULT_LIMIT, MAX_LIMIT = 8, 100
MAX_QUESTION = 2000  # characters of `query` or `text`
MAX_TYPES = 50
MAX_CONDITIONS = 32  # in one request's `filters`, nested ones included
MAX_NESTING = 4
OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "in")
MAX_IN = 100
TIME_FIELDS = ("time.valid_from", "time.valid_to", "time.written_at", "time.invalidated_at")
KNOWN = ("query", "text", "filters", "types", "as_of", "include", "depth", "limit")


@dataclass(frozen=True)
class RecallRequest:
    """A recall as asked (§6.2), checked."""

    query: str | None
    text: str | None
    filters: tuple[Filter, ...]
    types: tuple[str, ...] | None
    as_of: int | None  # ms
    include_forgotten: bool
    depth: int | None
    limit: int


async def recall(
    memories: Memories, caller: Caller, memory_id: str, body: dict[str, Any]
) -> RecallResult:
    asked = parse_recall(body)
    seen = await memories._requiring(caller, memory_id, READ)
    return await answer(memories, seen, memory_id, asked)


async def answer(
    memories: Memories, seen: _Seen, memory_id: str, asked: RecallRequest
) -> RecallResult:
    """The question over what `seen` may read below `memory_id` (read already checked):
    the nearest `MAX_MEMORIES` the caller may read (`scope`)."""
    covered, capped = await scope(seen, memory_id, asked.depth)
    await seen.expand([memory_id])  # where the caller can go from here: every child
    degraded: list[str] = [subtree_capped()] if capped else []
    answers = [
        await memories._provider_of(seen, ids[0]).recall(_question(asked, ids))
        for ids in _by_provider(seen, covered).values()
    ]
    found = sorted((f for a in answers for f in a.found), key=lambda f: -f.score)[: asked.limit]
    for said in (d for a in answers for d in a.degraded):
        if said not in degraded:
            degraded.append(said)
    parent_id, children = _around(seen, memory_id)
    around = [*([parent_id] if parent_id else []), *children]
    # The names and the counts at once: two reads that need nothing of each other.
    named, counts = await asyncio.gather(
        memories._rows(sorted({f.version.memory_id for f in found} | set(around))),
        memories._counts(seen, around),
    )
    return RecallResult(
        results=[await _hit(memories, seen, f, named) for f in found],
        parent=_neighbour(parent_id, named, counts) if parent_id else None,
        children=[_neighbour(kid, named, counts) for kid in children],
        degraded=degraded,
        abstain=_abstains(answers, found),
    )


async def scope(seen: _Seen, memory_id: str, depth: int | None) -> tuple[list[str], bool]:
    """The memories a question asked of `memory_id` covers: the nearest `MAX_MEMORIES`
    (breadth first) that the caller may read, `depth` levels down, and whether some it may
    read were left out. Only memories the caller may read count: the subtree is read in
    growing chunks until that many are found, the whole of it is read, or `MAX_READ` memories
    were read (then what lies further is unknown, and said to be left out)."""
    most, estimated = MAX_MEMORIES, False
    while True:
        more = await seen.subtree(memory_id, depth, most=most)
        readable = seen.access.searched(memory_id, depth)
        if len(readable) > MAX_MEMORIES:
            return readable[:MAX_MEMORIES], True
        if not more:
            return readable, False
        if most >= MAX_READ:
            return readable, True
        grown = most * READ_GROWTH
        if not estimated:  # once: as many as the share readable so far says are needed
            estimated = True
            share = max(1, len(readable)) / most
            grown = min(
                grown, max(most + 1, math.ceil((MAX_MEMORIES + 1) * ESTIMATE_MARGIN / share))
            )
        most = min(grown, MAX_READ)


def subtree_capped() -> str:
    """What `degraded` says when a question met more memories than it covers."""
    return f"subtree:capped_at_{MAX_MEMORIES}_memories"


def _question(asked: RecallRequest, memory_ids: list[str]) -> Question:
    return Question(
        memory_ids=tuple(memory_ids),
        query=asked.query,
        text=asked.text,
        filters=asked.filters,
        types=asked.types,
        as_of=asked.as_of,
        include_forgotten=asked.include_forgotten,
        limit=asked.limit,
    )


def _by_provider(seen: _Seen, covered: list[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for node in covered:
        grouped.setdefault(seen.providers[node], []).append(node)
    return grouped


def _around(seen: _Seen, memory_id: str) -> tuple[str | None, list[str]]:
    """The parent the caller may read (None on a root, and equally when it may not), and
    the children it may read: where it can go from the memory asked (§6.3)."""
    access = seen.access
    parent = access.tree.nodes[memory_id].parent_id
    readable = parent if parent is not None and READ in access.on(parent) else None
    kids = [kid for kid in access.tree.children.get(memory_id, []) if READ in access.on(kid)]
    return readable, kids


def _abstains(answers: list[Answer], found: list[Found]) -> bool:
    """Every provider asked judged that nothing it found answers (no provider asked: nothing
    the caller may read was there to answer)."""
    return all(a.abstain for a in answers) if answers else True


async def _hit(memories: Memories, seen: _Seen, found: Found, named: dict[str, Any]) -> RecallHit:
    row = named.get(found.version.memory_id)
    return RecallHit(
        record=await memories._shown(seen, found.version),
        memory_id=found.version.memory_id,
        memory_name=row.name if row is not None else "",
        score=found.score,
        why=list(found.why),
    )


def _neighbour(memory_id: str, named: dict[str, Any], counts: dict[str, int]) -> Neighbour:
    row = named[memory_id]
    return Neighbour(memory_id, row.name, row.description, counts.get(memory_id, 0))


# -- the request ------------------------------------------------------------------------------
def parse_recall(body: dict[str, Any]) -> RecallRequest:
    unknown = sorted(set(body) - set(KNOWN))
    if unknown:  # never ignored in silence (§6.3)
        raise memory_invalid(
            f"A recall does not take {', '.join(unknown)}: it takes {', '.join(KNOWN)}.",
            unknown[0],
        )
    query = _question_text(body.get("query"), "query")
    text = _question_text(body.get("text"), "text")
    filters = parse_filters(body.get("filters"))
    if query is None and text is None and not filters:
        raise memory_invalid(
            "A recall asks by at least one of `query` (meaning), `text` (words) and "
            "`filters` (fields)."
        )
    include = body.get("include")
    if include not in (None, "active", "all"):
        raise memory_invalid("`include` is active or all.", "include")
    as_of = body.get("as_of")
    if as_of is not None and not isinstance(as_of, str):
        raise memory_invalid("`as_of` is a date and time, e.g. 2026-10-01T17:02:11Z.", "as_of")
    return RecallRequest(
        query=query,
        text=text,
        filters=filters,
        types=_types(body.get("types")),
        as_of=instant(as_of),
        include_forgotten=include == "all",
        depth=_whole(body.get("depth"), "depth", 0, None, None),
        limit=_whole(body.get("limit"), "limit", 1, MAX_LIMIT, DEFAULT_LIMIT) or DEFAULT_LIMIT,
    )


def _question_text(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_QUESTION:
        raise memory_invalid(f"`{name}` is text of 1 to {MAX_QUESTION} characters.", name)
    return value


def _types(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_TYPES
        or not all(isinstance(t, str) and 0 < len(t) <= 128 for t in value)
    ):
        raise memory_invalid(f"`types` is a list of at most {MAX_TYPES} record types.", "types")
    return tuple(value)


def _whole(
    value: object, name: str, least: int, most: int | None, default: int | None
) -> int | None:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < least
        or (most is not None and value > most)
    ):
        bound = f"from {least} to {most}" if most is not None else f"of at least {least}"
        raise memory_invalid(f"`{name}` is a whole number {bound}.", name)
    return value


def parse_filters(value: object) -> tuple[Filter, ...]:
    """`filters`: one condition `{field, op, value}`, `{and: [...]}`, `{or: [...]}`, or a
    list of them (all must hold)."""
    if value is None:
        return ()
    counted = [0]
    if isinstance(value, list):
        return tuple(_filter(item, counted, 1) for item in value)
    return (_filter(value, counted, 1),)


def _filter(value: object, counted: list[int], level: int) -> Filter:
    counted[0] += 1
    if counted[0] > MAX_CONDITIONS or level > MAX_NESTING:
        raise memory_invalid(
            f"`filters` holds at most {MAX_CONDITIONS} conditions, {MAX_NESTING} levels deep.",
            "filters",
        )
    if not isinstance(value, dict):
        raise memory_invalid(_FILTER_SHAPE, "filters")
    for joiner, kind in (("and", AllOf), ("or", AnyOf)):
        if joiner in value:
            if set(value) != {joiner} or not isinstance(value[joiner], list) or not value[joiner]:
                raise memory_invalid(_FILTER_SHAPE, "filters")
            return kind(tuple(_filter(item, counted, level + 1) for item in value[joiner]))
    if set(value) != {"field", "op", "value"}:
        raise memory_invalid(_FILTER_SHAPE, "filters")
    return _field_filter(value["field"], value["op"], value["value"])


_FILTER_SHAPE = (
    "A filter is {field, op, value}, {and: [filters]} or {or: [filters]}; "
    "`filters` is one filter or a list of them."
)
_ATTRIBUTE = r"^attributes(\.[A-Za-z0-9_-]{1,64}){1,8}$"


def _field_filter(field: object, op: object, value: object) -> FieldFilter:
    if not isinstance(field, str) or not (
        field == "type" or field in TIME_FIELDS or re.match(_ATTRIBUTE, field)
    ):
        raise memory_invalid(
            "A filter's `field` is type, attributes.<name> (letters, digits, _ and -; "
            f"nested with dots), or one of {', '.join(TIME_FIELDS)}.",
            "filters",
        )
    if op not in OPS:
        raise memory_invalid(f"A filter's `op` is one of {', '.join(OPS)}.", "filters")
    if op == "in" and (not isinstance(value, list) or not 0 < len(value) <= MAX_IN):
        raise memory_invalid(f"`in` takes a list of 1 to {MAX_IN} values.", "filters")
    values: list[Any] = value if isinstance(value, list) and op == "in" else [value]
    checked = []
    for item in values:
        if field in ("time.written_at", "time.invalidated_at"):
            if item is not None and not isinstance(item, str):
                raise memory_invalid(f"`{field}` is compared with a date and time.", "filters")
            item = instant(item, field, "filters") if item is not None else None
        elif field.startswith("attributes."):
            if isinstance(item, (dict, list)):
                raise memory_invalid(
                    "An attribute is compared with a string, number, true, false or null.",
                    "filters",
                )
            if op in ("gt", "gte", "lt", "lte") and (item is None or isinstance(item, bool)):
                raise memory_invalid(f"`{op}` compares with a string or a number.", "filters")
        elif item is not None and not isinstance(item, str):
            raise memory_invalid(f"`{field}` is compared with text.", "filters")
        elif item is None and (field == "type" or op not in ("eq", "ne")):
            raise memory_invalid(f"`{field}` with `{op}` needs a value.", "filters")
        checked.append(item)
    return FieldFilter(field, str(op), checked if op == "in" else checked[0])


def instant(value: str | None, name: str = "as_of", param: str | None = None) -> int | None:
    """`as_of` and the like: a date and time (ISO 8601; without a zone, UTC), in the
    milliseconds a version's times are kept in."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise memory_invalid(
            f"`{name}` is a date and time, e.g. 2026-10-01T17:02:11Z.", param or name
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
