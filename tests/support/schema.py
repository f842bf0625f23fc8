"""Validate objects and streamed events against the protocol's JSON Schema, as a client would."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "spec" / "uhp-2026-10-04.schema.json"


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def validator(definition: str) -> jsonschema.Draft202012Validator:
    schema = _schema()
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", **schema})


def validate(definition: str, instance: Any) -> None:
    """Raise jsonschema.ValidationError when instance is not a valid `definition`."""
    validator(definition).validate(instance)


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Every rule of Streaming §1 and §3 a client can check; returns the terminal response."""
    assert events, "empty stream"
    for event in events:
        validate("Event", event)
    assert [e["sequence_number"] for e in events] == list(range(len(events))), "gap in sequence"
    assert events[0]["type"] == "response.created"
    terminal = {"response.completed", "response.incomplete", "response.failed"}
    assert events[-1]["type"] in terminal
    assert sum(e["type"] in terminal for e in events) == 1
    opened: dict[int | None, str] = {}
    closed: set[int | None] = set()
    for event in events:
        index = event.get("output_index")
        if event["type"] == "response.output_item.added":
            assert index not in opened, f"item {index} added twice"
            opened[index] = event["item"].get("id", "")
        elif index is not None:
            assert index in opened, f"{event['type']} before its item was added"
            assert index not in closed, f"{event['type']} after its item was done"
            if event["type"] == "response.output_item.done":
                closed.add(index)
    assert set(opened) == closed, "an item was added but never done"
    final = events[-1]["response"]
    validate("Response", final)
    return final
