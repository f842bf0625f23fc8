"""What a write states about a record (Memories §4), checked: its type, title, content parts,
attributes, references and validity. Raises Invalid (memory_invalid) or Unsupported
(memory_unsupported), saying what is wrong; a caller's `written_by` and `written_at` are
never read (§13: provenance is stamped, not supplied)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CoreType:
    type: str
    description: str


# The core types every server understands (§4.1), as `GET /v1/memories/types` lists them.
CORE = (
    CoreType(
        "episode",
        "Raw experience as it arrived: a turn, a transcript, an action and "
        "its result, a document. Append-only.",
    ),
    CoreType("fact", "One thing worth remembering, as it was said."),
    CoreType("note", "A document an agent or a person wrote and maintains."),
    CoreType("procedure", "A how-to with the situation it applies to."),
    CoreType(
        "link",
        "A pointer to something kept elsewhere: an address and a description, "
        "no content of its own.",
    ),
    CoreType(
        "entity",
        "Something records are about: a person, a company, a product, a "
        "place. Its title is its name; its content is what is known of it.",
    ),
)
CORE_TYPES = tuple(core.type for core in CORE)
DEFAULT_TYPE = "fact"
ROLES = ("user", "assistant", "system", "tool")
TEXT_SOURCES = ("stated", "derived")
MAX_TITLE = 300
MAX_PARTS = 100
MAX_REFERENCES = 100
# One version's content, attributes and references, as JSON: a memory holds statements,
# documents enter as files (§4.3).
MAX_RECORD_BYTES = 256 * 1024
MAX_ID = 128
_EXTENSION = re.compile(r"^x\.[A-Za-z0-9_.-]+$")


class Invalid(ValueError):
    """memory_invalid: what the caller stated cannot be a record."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class Unsupported(ValueError):
    """memory_unsupported: a record could be this, but this server does not keep it yet."""


@dataclass(frozen=True)
class Statement:
    """A record as written, checked. On a revision, None is "as it was"."""

    type: str | None
    title: str | None
    content: list[dict[str, Any]] | None
    attributes: dict[str, Any] | None
    references: list[dict[str, Any]] | None
    valid_from: str | None
    valid_to: str | None


def stated(body: dict[str, Any], revising: bool = False) -> Statement:
    """The record a create (`revising` False) or a revision states."""
    said = {
        name: body[name]
        for name in ("title", "content", "attributes", "references")
        if name in body
    }
    if (where := nul_at(said)) is not None:
        raise Invalid(
            f"`{where}` holds a NUL character (U+0000), which a record cannot keep.", where
        )
    if revising and "type" in body:
        raise Invalid("A record's type is set when it is written; write a new record.", "type")
    title = _title(body.get("title"))
    if "content" in body:
        content: list[dict[str, Any]] | None = parts(body["content"])
    elif revising:
        content = None
    elif title is not None:
        content = []  # a fact is often its title alone
    else:
        raise Invalid("A record has `content`, or a `title` and no content.", "content")
    attributes = _attributes(body["attributes"]) if "attributes" in body else None
    references = _references(body["references"]) if "references" in body else None
    valid_from, valid_to = _validity(body.get("time"))
    statement = Statement(
        type=None if revising else _type(body.get("type")),
        title=title,
        content=content,
        attributes=attributes if attributes is not None or revising else {},
        references=references if references is not None or revising else [],
        valid_from=valid_from,
        valid_to=valid_to,
    )
    _within_size(statement)
    return statement


def parts(value: object) -> list[dict[str, Any]]:
    """Content as the ordered list of parts (§4.3); a string is one text part."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list):
        raise Invalid("`content` is a string or a list of parts.", "content")
    if len(value) > MAX_PARTS:
        raise Invalid(f"A record holds at most {MAX_PARTS} parts.", "content")
    return [_part(index, part) for index, part in enumerate(value)]


def _part(index: int, part: object) -> dict[str, Any]:
    where = f"content[{index}]"
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise Invalid(f"{where} is an object with a `type`.", where)
    kind = part["type"]
    if _EXTENSION.match(kind):
        return dict(part)  # a kind of part this server does not know is carried unchanged
    if kind == "file":
        return _file_part(where, part)
    if kind != "text":
        raise Invalid(f"{where}: a part is `text`, `file`, or an x.-prefixed kind.", where)
    if not isinstance(part.get("text"), str):
        raise Invalid(f"{where}: a text part carries its words in `text`.", where)
    if "role" in part and part["role"] not in ROLES:
        raise Invalid(f"{where}: `role` is one of {', '.join(ROLES)}.", where)
    if "text_source" in part and part["text_source"] not in TEXT_SOURCES:
        raise Invalid(f"{where}: `text_source` is stated or derived.", where)
    return dict(part)


def _file_part(where: str, part: dict[str, Any]) -> dict[str, Any]:
    """A file named by its id (§4.3). Only the id is read of `file`: its name, media type
    and size are completed from the server's file store (memory_files.py), never taken from
    the writer. Words the writer gives for it are its own statement: `text_source` is
    `stated` whatever the writer said (a provider's words would be `derived`)."""
    named = part.get("file")
    if not isinstance(named, dict) or not _an_id(named.get("id")):
        raise Invalid(f"{where}: a file part names a file by `file.id` (POST /v1/files).", where)
    kept: dict[str, Any] = {"type": "file", "file": {"id": named["id"]}}
    if part.get("text") is not None:
        if not isinstance(part["text"], str):
            raise Invalid(f"{where}: the words that stand for a file are text.", where)
        kept["text"] = part["text"]
        kept["text_source"] = "stated"
    if "role" in part:
        if part["role"] not in ROLES:
            raise Invalid(f"{where}: `role` is one of {', '.join(ROLES)}.", where)
        kept["role"] = part["role"]
    return kept


def _type(value: object) -> str:
    if value is None:
        return DEFAULT_TYPE
    if isinstance(value, str) and (value in CORE_TYPES or _EXTENSION.match(value)):
        return value
    raise Invalid(
        f"`type` is one of {', '.join(CORE_TYPES)}, or an x.-prefixed extension type.", "type"
    )


def _title(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or "\n" in value or len(value) > MAX_TITLE:
        raise Invalid(f"`title` is one line of at most {MAX_TITLE} characters.", "title")
    return value


def _attributes(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid("`attributes` is an object.", "attributes")
    if (where := _non_finite(value, "attributes")) is not None:
        # JSON has no NaN or Infinity (RFC 8259), though Python's parser accepts them: kept,
        # such a value would make the stored attributes unreadable to the filters of recall.
        raise Invalid(
            f"`{where}` is not a finite number: JSON has no NaN or Infinity.", "attributes"
        )
    return dict(value)


def _non_finite(value: object, path: str) -> str | None:
    """Where in `value` a NaN or an infinity sits (the first found), or None."""
    return _first_where(
        value, path, lambda item: isinstance(item, float) and not math.isfinite(item)
    )


def nul_at(value: object, path: str = "") -> str | None:
    """Where in `value` a NUL character (U+0000) sits, in a string or a key (the first
    found; "body" for the top), or None. JSON may carry one, but PostgreSQL keeps none in
    text, and in a `json` column its operators fail on one: kept, a single such value would
    break the filters of every recall covering it."""
    found = _first_where(value, path, lambda item: isinstance(item, str) and "\x00" in item)
    return None if found is None else found or "body"


def _first_where(value: object, path: str, bad: Callable[[object], bool]) -> str | None:
    """Where in `value` the first item `bad` holds for sits, a key counting as an item at its
    object's place; None when there is none. A walk with its own stack: a deeply nested body
    cannot exhaust Python's."""
    pending: list[tuple[object, str]] = [(value, path)]
    while pending:
        item, where = pending.pop()
        if bad(item):
            return where
        if isinstance(item, dict):
            for key, inner in item.items():
                if bad(key):
                    return where
                pending.append((inner, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, list):
            pending.extend((inner, f"{where}[{index}]") for index, inner in enumerate(item))
    return None


def _references(value: object) -> list[dict[str, Any]]:
    """Each names a record, and the memory it is in when the writer knows it; at most one
    `subject` and one `object` (§4.2)."""
    if not isinstance(value, list) or len(value) > MAX_REFERENCES:
        raise Invalid(f"`references` is a list of at most {MAX_REFERENCES}.", "references")
    checked: list[dict[str, Any]] = []
    for index, ref in enumerate(value):
        where = f"references[{index}]"
        if not isinstance(ref, dict) or not _an_id(ref.get("record_id")):
            raise Invalid(f"{where} names a record by `record_id`.", where)
        said: dict[str, Any] = {"record_id": ref["record_id"]}
        if ref.get("memory_id") is not None:
            if not _an_id(ref["memory_id"]):
                raise Invalid(f"{where}: `memory_id` is a memory's id.", where)
            said["memory_id"] = ref["memory_id"]
        if ref.get("rel") is not None:
            if not isinstance(ref["rel"], str) or not ref["rel"] or len(ref["rel"]) > MAX_ID:
                raise Invalid(f"{where}: `rel` is a word.", where)
            said["rel"] = ref["rel"]
        checked.append(said)
    for rel in ("subject", "object"):
        if sum(1 for ref in checked if ref.get("rel") == rel) > 1:
            raise Invalid(
                f"A record names at most one `{rel}`: a statement about two is two records.",
                "references",
            )
    return checked


def _validity(value: object) -> tuple[str | None, str | None]:
    """When it was true in the world; the memory's own times are the server's."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise Invalid("`time` is an object.", "time")
    found = []
    for name in ("valid_from", "valid_to"):
        moment = value.get(name)
        if moment is not None and (not isinstance(moment, str) or len(moment) > 64):
            raise Invalid(f"`time.{name}` is a date and time, as text.", f"time.{name}")
        found.append(moment)
    return found[0], found[1]


def _an_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID


def _within_size(statement: Statement) -> None:
    said = [statement.content, statement.attributes, statement.references]
    if (where := _non_finite(said, "record")) is not None:
        raise Invalid(f"A record holds no NaN or Infinity (at {where}): JSON has none.")
    size = len(json.dumps(said, default=str))
    if size > MAX_RECORD_BYTES:
        raise Invalid(
            f"A record's content, attributes and references together are at most "
            f"{MAX_RECORD_BYTES} bytes as JSON."
        )
