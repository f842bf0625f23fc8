"""Named queries (Memories §6.4) and free queries (§6.5).

A named query is written once by someone who may `write` the memory, in its provider's
language, with a JSON Schema for its parameters, and run by whoever holds the privilege it
`requires`. The embedded provider's language is `uhp.recall`: the body is a recall request
(§6.2) as JSON, in which `{"$param": "<name>"}` stands anywhere for a parameter's value:

    {"text": {"$param": "topic"},
     "filters": {"field": "attributes.account", "op": "eq", "value": {"$param": "account"}}}

Parameters are checked against `params` (memory_invalid when they do not match), put in
their places, and the request runs as a recall of the memory named in the path alone
(§6.1: finding is wide, reading is exact), within what the caller may read.

Free queries: no provider here can confine a statement it did not write (§6.5), so none
declares `queries.free`, and `POST …/query` answers memory_unsupported.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from storage import memories as store
from storage.db import Order
from storage.tables import MemoryQueryRow
from uhp_server.engine.facade.memory_recall import RecallRequest, answer, parse_recall
from uhp_server.errors import ApiError
from uhp_server.memories.access import READ, WRITE, Caller
from uhp_server.memories.errors import (
    memory_forbidden,
    memory_invalid,
    memory_not_found,
    memory_unsupported,
)
from uhp_server.memories.records import NamedQuery, RecallResult

if TYPE_CHECKING:
    from uhp_server.engine.facade.memories import Memories

NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # offered to an agent as a tool's name
MAX_DESCRIPTION = 2000
MAX_BODY = 16 * 1024
MAX_SCHEMA = 16 * 1024
MAX_SCHEMA_DEPTH = 32
MAX_PARAMS = 64 * 1024  # a run's `params`, as JSON
PLACEHOLDER = "$param"


async def listing(memories: Memories, caller: Caller, memory_id: str) -> list[NamedQuery]:
    await memories._requiring(caller, memory_id, READ)
    return [_query(row) for row in await memories.db.read(store.queries_of, memory_id)]


async def define(
    memories: Memories, caller: Caller, memory_id: str, name: str, body: dict[str, Any]
) -> NamedQuery:
    """Defines or replaces it; needs `write`."""
    if not NAME.match(name):
        raise memory_invalid(
            "A query's name is 1 to 64 lower-case letters, digits and _, starting with a letter.",
            "name",
        )
    if body.get("name", name) != name:
        raise memory_invalid("`name` differs from the name in the path.", "name")
    seen = await memories._requiring(caller, memory_id, WRITE)
    languages = memories._provider_of(seen, memory_id).capabilities().queries.languages
    language = body.get("language", languages[0] if languages else None)
    if language not in languages:
        raise memory_unsupported(
            "This memory's provider runs named queries in "
            f"{', '.join(languages) or 'no language'}.",
            "language",
        )
    row = MemoryQueryRow(
        memory_id=memory_id,
        name=name,
        description=_description(body.get("description")),
        params=_schema(body.get("params")),
        requires=_requires(body.get("requires")),
        language=str(language),
        body=_template(body.get("body"), body.get("params")),
        written_by={"kind": "member", "id": caller.member_id, "type": caller.type},
        updated_at_ms=store.now_ms(),
    )
    unknown = sorted(set(body) - {"name", "description", "params", "requires", "language", "body"})
    if unknown:
        raise memory_invalid(f"A named query does not take {', '.join(unknown)}.", unknown[0])
    stored = await memories.db.write(store.put_query, row, order=Order.ANY)
    if stored is None:
        raise memory_not_found()
    return _query(stored)


async def run(
    memories: Memories, caller: Caller, memory_id: str, name: str, body: dict[str, Any]
) -> RecallResult:
    """Runs it with `params`, as a recall of this memory alone, as the caller."""
    seen = await memories._requiring(caller, memory_id, READ)
    row = await memories.db.read(store.query_named, memory_id, name)
    if row is None:
        raise ApiError(404, "not_found", f"This memory has no query named {name}.")
    if row.requires not in seen.access.on(memory_id):
        raise memory_forbidden(row.requires)
    unknown = sorted(set(body) - {"params"})
    if unknown:
        raise memory_invalid(f"Running a query takes `params` alone, not {unknown[0]}.", unknown[0])
    params = body.get("params", {})
    if len(json.dumps(params)) > MAX_PARAMS:
        raise memory_invalid(f"`params` is at most {MAX_PARAMS} bytes as JSON.", "params")
    try:
        problems = sorted(
            Draft202012Validator(row.params or {}).iter_errors(params), key=lambda e: list(e.path)
        )
    except (Unresolvable, RecursionError):  # a schema stored before these were refused
        raise memory_invalid("The query's `params` schema cannot be applied.", "params") from None
    if problems:
        where = ".".join(str(p) for p in problems[0].absolute_path) or "params"
        raise memory_invalid(
            f"`params` do not match the query's: {where}: {problems[0].message}", "params"
        )
    asked = parse_recall(_filled(json.loads(row.body), params))
    return await answer(memories, seen, memory_id, _alone(asked))


async def free(memories: Memories, caller: Caller, memory_id: str) -> NoReturn:
    """Refused: after the memory is checked as any read is (unknown is not found)."""
    await memories._requiring(caller, memory_id, READ)
    raise memory_unsupported(
        "No provider here can confine a query it did not write (§6.5), so none offers free "
        "queries: ask with recall, or run a named query."
    )


# -- checks -----------------------------------------------------------------------------------
def _alone(asked: RecallRequest) -> RecallRequest:
    return replace(asked, depth=0)  # a named query reads the memory named, and nothing else


def _description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        raise memory_invalid(
            f"`description` is text of at most {MAX_DESCRIPTION} characters.", "description"
        )
    return value


def _requires(value: object) -> str:
    if value is None:
        return READ
    if value not in (READ, WRITE):
        raise memory_invalid("`requires` is read or write.", "requires")
    return str(value)


def _schema(value: object) -> dict[str, Any]:
    if value is None:
        return {"type": "object"}
    if not isinstance(value, dict) or value.get("type") != "object":
        raise memory_invalid("`params` is a JSON Schema of an object.", "params")
    if len(json.dumps(value)) > MAX_SCHEMA:
        raise memory_invalid(f"`params` is at most {MAX_SCHEMA} bytes as JSON.", "params")
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        raise memory_invalid(f"`params` is not a JSON Schema: {exc.message}", "params") from None
    _confined(value, value)
    return value


# Keywords whose cost a schema's writer would choose and every request pays: a regular
# expression runs on the server's loop, and one like ^(a+)+$ takes hours on a short string.
UNSAFE_KEYWORDS = frozenset({"pattern", "patternProperties", "$dynamicRef", "$recursiveRef"})
LOCAL_REFS = ("#/$defs/", "#/definitions/")


def _confined(node: object, root: dict[str, Any], depth: int = 0) -> None:
    """No regular expression, and no `$ref` but to a definition of this schema that is there
    (nothing fetched, nothing left to fail when the query runs)."""
    if depth > MAX_SCHEMA_DEPTH:
        raise memory_invalid(f"`params` nests deeper than {MAX_SCHEMA_DEPTH}.", "params")
    if isinstance(node, list):
        for item in node:
            _confined(item, root, depth + 1)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in UNSAFE_KEYWORDS:
            raise memory_invalid(f"`params` may not use `{key}`.", "params")
        if key == "$ref" and not _defined(value, root):
            raise memory_invalid(
                "`$ref` in `params` names a definition of the schema itself "
                "(`#/$defs/<name>`) that is there.",
                "params",
            )
        _confined(value, root, depth + 1)


def _defined(ref: object, root: dict[str, Any]) -> bool:
    if not isinstance(ref, str) or not ref.startswith(LOCAL_REFS):
        return False
    node: object = root
    for step in ref[2:].split("/"):
        if not isinstance(node, dict) or step not in node:
            return False
        node = node[step]
    return True


def _template(value: object, schema: object) -> str:
    """The body: a recall request as JSON, its placeholders naming declared parameters."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_BODY:
        raise memory_invalid(
            f"`body` is a recall request as JSON text, at most {MAX_BODY} characters.", "body"
        )
    try:
        template = json.loads(value)
    except ValueError:
        raise memory_invalid(
            "`body` is not JSON: it is a recall request as JSON.", "body"
        ) from None
    if not isinstance(template, dict):
        raise memory_invalid("`body` is a recall request: a JSON object.", "body")
    if "depth" in template:
        raise memory_invalid(
            "A named query reads the memory it belongs to alone: its body takes no `depth`.",
            "body",
        )
    declared = set(((schema or {}) if isinstance(schema, dict) else {}).get("properties", {}))
    missing = sorted(_placeholders(template) - declared)
    if missing:
        raise memory_invalid(
            f"`body` names parameters `params` does not declare: {', '.join(missing)}.", "body"
        )
    return json.dumps(template)


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, dict):
        if set(value) == {PLACEHOLDER} and isinstance(value[PLACEHOLDER], str):
            return {value[PLACEHOLDER]}
        return {name for item in value.values() for name in _placeholders(item)}
    if isinstance(value, list):
        return {name for item in value for name in _placeholders(item)}
    return set()


def _filled(value: Any, params: dict[str, Any]) -> Any:
    """The template with each placeholder replaced by its parameter's value (a parameter not
    given leaves its key out: an optional one)."""
    if isinstance(value, dict):
        if set(value) == {PLACEHOLDER} and isinstance(value[PLACEHOLDER], str):
            return params.get(value[PLACEHOLDER])
        return {
            key: _filled(item, params)
            for key, item in value.items()
            if not (_is_placeholder(item) and item[PLACEHOLDER] not in params)
        }
    if isinstance(value, list):
        return [_filled(item, params) for item in value]
    return value


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {PLACEHOLDER}


def _query(row: MemoryQueryRow) -> NamedQuery:
    return NamedQuery(
        memory_id=row.memory_id,
        name=row.name,
        description=row.description,
        params=dict(row.params or {}),
        requires=row.requires,
        language=row.language,
        body=row.body,
    )
