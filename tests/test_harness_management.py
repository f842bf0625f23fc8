"""Harness management (class Full): create, replace, delete, scoped to the principal.
In-process, no agent CLI. Skills: test_harness_skills.py; MCP servers: test_harness_mcp.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from storage.tables import McpSecretRow, SkillBundleRow
from tests.support.harness_api import (
    AUTH,
    create,
    ctx,
    make_client,
    other_principal,
    own_skills,
    refused,
    skill,
)
from tests.support.schema import validate


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


# -- create, replace, delete ----------------------------------------------------------------


def test_discovery_reports_harness_management(http: TestClient) -> None:
    assert http.get("/v1/uhp").json()["capabilities"]["harness_management"] is True


def test_create_get_list_replace_delete(http: TestClient) -> None:
    created = create(
        http,
        {
            "name": "Research agent",
            "base": "codex",
            "default_model": "gpt-test",
            "system_prompt": "Be brief.",
            "disabled_tools": ["web_search", "web_search"],
            "max_step": 7,
            "timeout_seconds": 120,
        },
    )
    validate("Harness", created)
    assert created["id"].startswith("chrn_") and created["object"] == "harness"
    assert (created["name"], created["base"], created["baseLabel"]) == (
        "Research agent",
        "codex",
        "Codex",
    )
    assert created["defaultModel"] == "gpt-test"
    assert created["systemPrompt"] == "Be brief."
    assert created["disabledTools"] == ["web_search"]
    assert (created["maxStep"], created["timeoutSeconds"]) == (7, 120)
    assert created["enforcement"]["disabledTools"] == "instruction"
    assert http.get(f"/v1/harnesses/{created['id']}", headers=AUTH).json() == created
    listed = http.get("/v1/harnesses", headers=AUTH).json()["harnesses"]
    assert created in listed

    replaced = http.put(
        f"/v1/harnesses/{created['id']}", json={"system_prompt": "Be thorough."}, headers=AUTH
    ).json()
    validate("Harness", replaced)
    assert replaced["systemPrompt"] == "Be thorough."
    assert replaced["name"] == "Research agent"  # a label: kept when left out
    # Replace, not merge: what the body left out is back to its default.
    assert (replaced["maxStep"], replaced["timeoutSeconds"], replaced["disabledTools"]) == (
        None,
        None,
        [],
    )
    for key in ("id", "base", "createdAt"):
        assert replaced[key] == created[key]

    deleted = http.delete(f"/v1/harnesses/{created['id']}", headers=AUTH)
    assert deleted.status_code == 200
    assert deleted.json() == {"id": created["id"], "object": "harness.deleted", "deleted": True}
    refused(
        http.get(f"/v1/harnesses/{created['id']}", headers=AUTH),
        "harness_id",
        404,
        "harness_not_found",
    )
    assert created["id"] not in {
        h["id"] for h in http.get("/v1/harnesses", headers=AUTH).json()["harnesses"]
    }
    refused(
        http.delete(f"/v1/harnesses/{created['id']}", headers=AUTH),
        "harness_id",
        404,
        "harness_not_found",
    )
    put_gone = http.put(f"/v1/harnesses/{created['id']}", json={}, headers=AUTH)
    refused(put_gone, "harness_id", 404, "harness_not_found")


def test_name_defaults_to_the_base_label(http: TestClient) -> None:
    assert create(http, {"base": "codex"})["name"] == "Codex"


def test_id_base_and_created_at_never_change(http: TestClient) -> None:
    harness = create(http, {"name": "a", "base": "codex"})
    url = f"/v1/harnesses/{harness['id']}"
    for key, value in (("base", "claude-code"), ("id", "chrn_other"), ("createdAt", 1)):
        error = refused(http.put(url, json={**harness, key: value}, headers=AUTH), key)
        assert "create a new harness" in error["message"]
    same = http.put(url, json={**harness, "name": "b"}, headers=AUTH).json()
    assert (same["id"], same["base"], same["createdAt"]) == (
        harness["id"],
        harness["base"],
        harness["createdAt"],
    )


def test_an_immutable_of_the_wrong_type_says_so(http: TestClient) -> None:
    """`{"name": "x", "base": 5}` said "`base` of a harness cannot change": a number is not
    another base, it is not a base at all."""
    harness = create(http, {"name": "a", "base": "codex"})
    url = f"/v1/harnesses/{harness['id']}"
    for key, value, said in (
        ("base", 5, "`base` must be a string."),
        ("id", None, "`id` must be a string."),
        ("createdAt", "1", "`createdAt` must be an integer."),
        ("created_at", True, "`created_at` must be an integer."),
    ):
        error = refused(http.put(url, json={"name": "x", key: value}, headers=AUTH), key)
        assert error["message"] == said


def test_unsupported_or_missing_base(http: TestClient) -> None:
    code = "unsupported_base"
    error = refused(
        http.post("/v1/harnesses", json={"base": "gemini"}, headers=AUTH), "base", 422, code
    )
    assert error["detail"]["supported"] == ["codex"]
    # Absent or empty is not a base the server supports: 422 too (Harnesses §5.1, issue 33
    # §8: the OpenAPI document's only refusal of this operation); the wrong type is 400
    # invalid_input (Errors §3.1).
    for body in ({"name": "x"}, {"base": ""}, {"base": None}):
        error = refused(http.post("/v1/harnesses", json=body, headers=AUTH), "base", 422, code)
        assert error["detail"]["supported"] == ["codex"]
    refused(http.post("/v1/harnesses", json={"base": 5}, headers=AUTH), "base")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"name": 5}, "name"),
        ({"name": ""}, "name"),
        ({"system_prompt": ["x"]}, "system_prompt"),
        ({"systemPrompt": 1}, "systemPrompt"),
        ({"default_model": 3}, "default_model"),
        ({"disabled_tools": "web_search"}, "disabled_tools"),
        ({"disabled_tools": ["ok", ""]}, "disabled_tools[1]"),
        ({"max_step": 0}, "max_step"),
        ({"max_step": True}, "max_step"),
        ({"timeout_seconds": 99999999}, "timeout_seconds"),
        ({"skills": {"name": "x"}}, "skills"),
        ({"mcp_servers": "x"}, "mcp_servers"),
    ],
)
def test_invalid_fields_name_their_param(
    http: TestClient, body: dict[str, Any], param: str
) -> None:
    refused(http.post("/v1/harnesses", json={"base": "codex", **body}, headers=AUTH), param)


def test_a_body_that_is_not_an_object_is_refused(http: TestClient) -> None:
    for raw in (b"[1]", b"{nope", b'"x"'):
        response = http.post(
            "/v1/harnesses", content=raw, headers={**AUTH, "Content-Type": "application/json"}
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_input"


def test_every_operation_is_scoped_to_the_principal(http: TestClient) -> None:
    harness = create(http, {"base": "codex", "skills": [skill()]})
    other = other_principal(http)
    url = f"/v1/harnesses/{harness['id']}"
    for method, path in (
        ("GET", url),
        ("PUT", url),
        ("DELETE", url),
        ("GET", f"{url}/skills/vault-manual/files"),
        ("GET", f"{url}/models"),
    ):
        response = http.request(method, path, json={} if method == "PUT" else None, headers=other)
        assert response.status_code == 404, (method, path)
    assert harness["id"] not in json.dumps(http.get("/v1/harnesses", headers=other).json())
    # Another principal's blob handle is unknown to them: bytes never cross principals.
    stolen = {"name": "copy", "blob": own_skills(harness)[0]["blob"]}
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [stolen]}, headers=other),
        "skills[0].blob",
    )
    for method, path in (
        ("POST", "/v1/harnesses"),
        ("PUT", url),
        ("DELETE", url),
        ("GET", f"{url}/skills/vault-manual/files"),
    ):
        assert http.request(method, path, json={"base": "codex"}).status_code == 401


def test_a_refused_body_stores_nothing(http: TestClient) -> None:
    servers = [
        {"name": "a", "url": "https://e.com/mcp", "auth": "stored-too-early"},
        {"name": "b", "url": "file:///etc/passwd"},
    ]
    body = {"base": "codex", "skills": [skill()], "mcp_servers": servers}
    refused(http.post("/v1/harnesses", json=body, headers=AUTH), "mcp_servers[1].url")
    stored = ctx(http).db.run(
        lambda tx: (
            tx.orm.exec(select(SkillBundleRow)).all(),
            tx.orm.exec(select(McpSecretRow)).all(),
        )
    )
    assert stored == ([], [])


# -- what docs/harnesses.md says a refusal names ----------------------------------------------
DOCS = Path(__file__).resolve().parent.parent / "docs" / "harnesses.md"
DOCUMENTED_PARAMS = re.compile(
    r"a `POST` in\s+snake_case gets `([^`]+)`, a `PUT` of the camelCase object `([^`]+)`,\s+"
    r"and both `([^`]+)`"
)


def test_a_refusal_names_the_field_as_the_docs_say(http: TestClient) -> None:
    """Issue 33 §8: the docs showed the camelCase path while a snake_case POST is answered in
    its own casing; the examples the page gives are what the server answers."""
    found = DOCUMENTED_PARAMS.search(" ".join(DOCS.read_text().split()))
    assert found is not None, "docs/harnesses.md no longer gives the param examples"
    posted, put, skill_path = found.groups()
    servers = [
        {"name": "ok", "url": "https://mcp.example.com/mcp"},
        {"name": "b", "url": "ftp://x"},
    ]
    answer = http.post(
        "/v1/harnesses", json={"base": "codex", "mcp_servers": servers}, headers=AUTH
    )
    refused(answer, posted)
    harness = create(http, {"base": "codex"})
    camel = {**harness, "mcpServers": servers}
    refused(http.put(f"/v1/harnesses/{harness['id']}", json=camel, headers=AUTH), put)
    bad = skill({"path": "notes.md", "content": "x"}, {"path": "../escape.md", "content": "y"})
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [bad]}, headers=AUTH),
        skill_path,
    )
