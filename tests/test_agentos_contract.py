"""The AgentOS contract's shapes, without a server: answers, error codes, the invoke body as
read, the model choice, and the declared capability matching the result object's schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from uhp_server.doors.agentos.contract import (
    BadInvocation,
    chosen_model,
    decision_text,
    error_code,
    failed,
    read_invocation,
)
from uhp_server.doors.harness_result import RESULT_SCHEMA, TOOL_INPUT_SCHEMA

CODE = re.compile(r"[a-z][a-z0-9_]{0,62}")
DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "agentos" / "agentos.yaml"


@pytest.mark.parametrize(
    "raw", ["provider_error", "Harness-Error", "9lives", "", "___", "x" * 200, "ünïcode ok"]
)
def test_every_failed_answer_carries_a_code_of_the_contracts_form(raw: str) -> None:
    answer = failed(raw, "")
    assert CODE.fullmatch(answer["error"]["code"]), answer
    assert answer["error"]["message"]


def test_codes_already_in_form_are_kept() -> None:
    assert error_code("provider_error") == "provider_error"
    assert error_code("session_busy") == "session_busy"


def body(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "capability": "run",
        "run_id": "r_1",
        "session_id": None,
        "input": {"prompt": "hi"},
        "invocation": {"id": "r_1:1", "seq": 1, "attempt": 1, "kind": "start"},
        "resume": None,
        "context": {
            "token": "tok_secret_123",
            "api_url": "http://web:8000",
            "config": {"models": {"reader": "m1"}},
            "llm": {"base_url": "http://litellm:4000/v1", "api_key": "x"},
            "secrets": {"K": "secret-value"},
            "eval": None,
            "unknown": 1,
        },
        "brand_new_field": {"x": 1},
    }
    base.update(changes)
    return base


def test_unknown_fields_are_ignored_and_the_token_never_shows() -> None:
    invocation = read_invocation(body())
    assert invocation.kind == "start" and invocation.models == {"reader": "m1"}
    assert "tok_secret_123" not in repr(invocation) and "secret-value" not in repr(invocation)
    with pytest.raises(BadInvocation):
        read_invocation(body(run_id=""))
    with pytest.raises(BadInvocation):
        read_invocation(["not", "an", "object"])


def test_the_model_is_agent_else_the_first_entry_else_none() -> None:
    assert chosen_model({"reader": "a", "agent": "b"}) == "b"
    assert chosen_model({"reader": "a", "writer": "c"}) == "a"
    assert chosen_model({}) is None


def test_a_decision_reaches_the_agent_as_text() -> None:
    assert decision_text("yes") == "yes"
    assert decision_text({"action": "approve"}) == "approve"
    assert "expired" in decision_text(None)


def without_descriptions(schema: object) -> object:
    if isinstance(schema, dict):
        skip = ("$schema", "title", "description")
        return {k: without_descriptions(v) for k, v in schema.items() if k not in skip}
    return schema


def test_the_declared_capability_matches_the_published_schemas() -> None:
    declared = yaml.safe_load(DEPLOY.read_text())
    run = declared["capabilities"]["run"]
    assert without_descriptions(run["output"]) == without_descriptions(RESULT_SCHEMA)
    assert run["input"]["required"] == ["prompt"]
    assert set(run["input"]["properties"]) == {"prompt", "harness_id"}
    assert TOOL_INPUT_SCHEMA["properties"]["prompt"]["type"] == "string"
