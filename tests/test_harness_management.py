"""Harness management (class Full): create, replace, delete; skills as whole folders; MCP
servers with server-side credentials and a URL policy. In-process, no agent CLI."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlmodel import select

from harness_bases.codex import CodexBase
from storage import keys as key_store
from storage.harnesses import get_harness
from storage.mcp_secrets import McpSecretRow
from storage.models import HarnessRow
from storage.skills import SkillBundleRow
from tests.support.schema import validate
from uhp_server.app import create_app
from uhp_server.harness_config import skills as skill_rules
from uhp_server.harness_config.builtin_skills import builtin_skills
from uhp_server.harness_config.runtime import turn_mcp_targets, turn_skills
from uhp_server.settings import Settings

KEY = "uhp_sk_harness_management_test"
AUTH = {"Authorization": f"Bearer {KEY}"}
SKILL_MD = "---\nname: vault-manual\ndescription: How to use the vault.\n---\nRead references.\n"
BUILTINS = ("uhp-artifacts", "workspace-hygiene")


def make_client(data_dir: Path, **settings: Any) -> TestClient:
    app = create_app(
        Settings(data_dir=data_dir, api_key=KEY, **settings), bases={"codex": CodexBase()}
    )
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


def ctx(http: TestClient) -> Any:
    return http.app.state.ctx  # type: ignore[attr-defined]


def other_principal(http: TestClient) -> dict[str, str]:
    _, key = key_store.create_key(ctx(http).db, "other-principal")
    return {"Authorization": f"Bearer {key}"}


def create(http: TestClient, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = http.post("/v1/harnesses", json=body, headers=AUTH)
    assert response.status_code == status, response.text
    return response.json()


def refused(response: Any, param: str, status: int = 400, code: str = "invalid_input") -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    validate("ErrorEnvelope", body)
    assert body["error"]["code"] == code
    assert body["error"]["param"] == param, body["error"]
    return body["error"]


def skill(*files: dict[str, Any], name: str = "vault-manual", **extra: Any) -> dict[str, Any]:
    return {"name": name, "files": [{"path": "SKILL.md", "content": SKILL_MD}, *files], **extra}


def own_skills(harness: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in harness["skills"] if not s.get("builtin")]


def folder(http: TestClient, harness_id: str, name: str) -> dict[str, bytes]:
    response = http.get(f"/v1/harnesses/{harness_id}/skills/{name}/files", headers=AUTH)
    assert response.status_code == 200, response.text
    return {f["path"]: decode(f) for f in response.json()["files"]}


def decode(file: dict[str, Any]) -> bytes:
    if "content_b64" in file:
        return base64.b64decode(file["content_b64"])
    return file["content"].encode()


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


def test_unsupported_or_missing_base(http: TestClient) -> None:
    error = refused(
        http.post("/v1/harnesses", json={"base": "gemini"}, headers=AUTH),
        "base",
        422,
        "unsupported_base",
    )
    assert error["detail"]["supported"] == ["codex"]
    refused(http.post("/v1/harnesses", json={"name": "x"}, headers=AUTH), "base")
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
    with ctx(http).db.session() as session:
        assert session.exec(select(SkillBundleRow)).all() == []
        assert session.exec(select(McpSecretRow)).all() == []


# -- skills ---------------------------------------------------------------------------------

BAD_SKILLS = [
    ({"name": "s", "files": [{"path": "README.md", "content": "x"}]}, "skills[0].files"),
    (skill({"path": "../escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a/../../escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "/etc/passwd", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "..\\escape.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a\\..\\..\\x", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "C:/x.md", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "a\u0000b", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": "", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": ".", "content": "x"}), "skills[0].files[1].path"),
    (skill({"path": 7, "content": "x"}), "skills[0].files[1].path"),
    (
        skill({"path": "a.md", "content": "x"}, {"path": "./a.md", "content": "y"}),
        "skills[0].files[2].path",
    ),
    (
        skill({"path": "Notes.md", "content": "x"}, {"path": "notes.md", "content": "y"}),
        "skills[0].files[2].path",
    ),
    (skill({"path": "SKILL.md", "content": "again"}), "skills[0].files[1].path"),
    (
        skill({"path": "ref", "content": "x"}, {"path": "ref/x.md", "content": "y"}),
        "skills[0].files[1].path",
    ),
    (skill({"path": "a.bin", "content": "x", "content_b64": "eA=="}), "skills[0].files[1]"),
    (skill({"path": "a.bin", "content_b64": "not base64!"}), "skills[0].files[1].content_b64"),
    (skill({"path": "a.txt", "content": 5}), "skills[0].files[1].content"),
    (skill({"path": "a.txt"}), "skills[0].files[1].content"),
    (skill("nope"), "skills[0].files[1]"),  # type: ignore[arg-type]
    ({"name": "s", "files": "SKILL.md"}, "skills[0].files"),
    ({"name": "s"}, "skills[0].files"),
    ({"name": "s", "content": "x", "files": []}, "skills[0].content"),
    ({"name": "s", "content": 3}, "skills[0].content"),
    ({"name": "s", "blob": "skb_unknown"}, "skills[0].blob"),
    ({"name": "s", "builtin": True}, "skills[0].builtin"),
    ({"name": "../evil", "content": "x"}, "skills[0].name"),
    ({"name": "", "content": "x"}, "skills[0].name"),
    ({"name": "a b", "content": "x"}, "skills[0].name"),
    ({"name": "s", "content": "x", "enabled": "yes"}, "skills[0].enabled"),
    ("SKILL.md", "skills[0]"),
]


@pytest.mark.parametrize(("entry", "param"), BAD_SKILLS)
def test_bad_skills_are_refused_at_configuration_time(
    http: TestClient, entry: Any, param: str
) -> None:
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [entry]}, headers=AUTH), param
    )


def test_repeated_skill_names_and_builtin_edits_are_refused(http: TestClient) -> None:
    twice = [skill(), skill(name="Vault-Manual")]
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": twice}, headers=AUTH),
        "skills[1].name",
    )
    edit = {
        "name": "uhp-artifacts",
        "builtin": True,
        "files": [{"path": "SKILL.md", "content": "x"}],
    }
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [edit]}, headers=AUTH),
        "skills[0].files",
    )


def test_size_limits_are_documented_and_enforced(http: TestClient) -> None:
    big = "x" * (skill_rules.MAX_FILE_BYTES + 1)
    error = refused(
        http.post(
            "/v1/harnesses",
            json={"base": "codex", "skills": [skill({"path": "big.txt", "content": big})]},
            headers=AUTH,
        ),
        "skills[0].files[1]",
    )
    assert error["detail"]["max_file_bytes"] == skill_rules.MAX_FILE_BYTES
    chunk = base64.b64encode(b"\0" * skill_rules.MAX_FILE_BYTES).decode()
    parts = [{"path": f"p{i}.bin", "content_b64": chunk} for i in range(3)]
    error = refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [skill(*parts)]}, headers=AUTH),
        "skills[0].files",
    )
    assert error["detail"]["max_bundle_bytes"] == skill_rules.MAX_BUNDLE_BYTES
    many = [{"path": f"f{i}.md", "content": "x"} for i in range(skill_rules.MAX_FILES)]
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "skills": [skill(*many)]}, headers=AUTH),
        "skills[0].files",
    )


def binary_bundle() -> tuple[dict[str, Any], dict[str, bytes]]:
    noise = os.urandom(4096) + b"\x00\xff\xfe\x80 not utf-8 \xc3\x28"
    text = "Grüße, ☃ — line\r\nendings\tkept\n\x00nul in text\n"
    script = "#!/bin/sh\necho helper\n"
    entry = skill(
        {"path": "references/codes.md", "content": text},
        {"path": "scripts/helper.sh", "content": script},
        {"path": "assets/deep/nested/logo.bin", "content_b64": base64.b64encode(noise).decode()},
        {"path": "assets/empty.bin", "content_b64": ""},
    )
    expected = {
        "SKILL.md": SKILL_MD.encode(),
        "references/codes.md": text.encode(),
        "scripts/helper.sh": script.encode(),
        "assets/deep/nested/logo.bin": noise,
        "assets/empty.bin": b"",
    }
    return entry, expected


def test_skill_bytes_survive_post_get_files_and_a_rename_round_trip(http: TestClient) -> None:
    entry, expected = binary_bundle()
    harness = create(http, {"name": "before", "base": "codex", "skills": [entry]})
    validate("Harness", harness)
    (own,) = own_skills(harness)
    assert own["blob"].startswith("skb_") and own["enabled"] is True
    # Small bundles come back inline, each file in the form it was sent.
    assert {f["path"]: decode(f) for f in own["files"]} == expected
    by_path = {f["path"]: f for f in own["files"]}
    assert "content_b64" in by_path["assets/deep/nested/logo.bin"]
    assert "content" in by_path["references/codes.md"]
    assert folder(http, harness["id"], "vault-manual") == expected

    fetched = http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json()
    renamed = http.put(
        f"/v1/harnesses/{harness['id']}", json={**fetched, "name": "after"}, headers=AUTH
    ).json()
    assert renamed["name"] == "after"
    assert own_skills(renamed) == own_skills(fetched)
    assert folder(http, harness["id"], "vault-manual") == expected


def test_a_large_bundle_is_out_of_line_and_still_round_trips(http: TestClient) -> None:
    payload = os.urandom(skill_rules.INLINE_BYTES)
    entry = skill({"path": "data/blob.bin", "content_b64": base64.b64encode(payload).decode()})
    harness = create(http, {"base": "codex", "skills": [entry]})
    (own,) = own_skills(harness)
    assert all("content" not in f and "content_b64" not in f for f in own["files"])
    assert {f["path"]: f["size"] for f in own["files"]} == {
        "SKILL.md": len(SKILL_MD.encode()),
        "data/blob.bin": len(payload),
    }
    url = f"/v1/harnesses/{harness['id']}"
    # GET → PUT with a rename: the blob handle carries every byte.
    put = http.put(url, json={**harness, "name": "renamed"}, headers=AUTH)
    assert put.status_code == 200, put.text
    assert folder(http, harness["id"], "vault-manual")["data/blob.bin"] == payload
    # Add a file: listed files without content come from the blob, new ones are sent.
    edited = {**own, "files": [*own["files"], {"path": "notes.md", "content": "new"}]}
    put = http.put(url, json={**harness, "skills": [edited]}, headers=AUTH)
    assert put.status_code == 200, put.text
    files = folder(http, harness["id"], "vault-manual")
    assert files["data/blob.bin"] == payload and files["notes.md"] == b"new"
    # Dropping the handle but keeping content-less files is refused, never silently emptied.
    no_blob = {k: v for k, v in own.items() if k != "blob"}
    refused(
        http.put(url, json={**harness, "skills": [no_blob]}, headers=AUTH),
        "skills[0].files[0].content",
    )
    assert folder(http, harness["id"], "vault-manual")["data/blob.bin"] == payload


def test_content_is_shorthand_for_a_lone_skill_md(http: TestClient) -> None:
    harness = create(http, {"base": "codex", "skills": [{"name": "tiny", "content": SKILL_MD}]})
    assert folder(http, harness["id"], "tiny") == {"SKILL.md": SKILL_MD.encode()}
    missing = http.get(f"/v1/harnesses/{harness['id']}/skills/nope/files", headers=AUTH)
    refused(missing, "skill", 404, "uhpserver_skill_not_found")


def test_every_harness_inherits_the_builtin_skills_and_can_suppress_one(
    http: TestClient,
) -> None:
    assert set(BUILTINS) <= set(builtin_skills())
    plain = create(http, {"base": "codex"})
    inherited = {s["name"]: s for s in plain["skills"]}
    for name in BUILTINS:
        assert inherited[name]["builtin"] is True and inherited[name]["enabled"] is True
        files = folder(http, plain["id"], name)
        assert files["SKILL.md"].startswith(b"---\nname: " + name.encode())
    assert "references/checklist.md" in folder(http, plain["id"], "uhp-artifacts")

    suppressed = create(
        http, {"base": "codex", "skills": [{"name": "uhp-artifacts", "enabled": False}]}
    )
    states = {s["name"]: s["enabled"] for s in suppressed["skills"]}
    assert states == {"uhp-artifacts": False, "workspace-hygiene": True}
    # A GET → PUT round trip keeps the suppression and stores nothing for the inherited one.
    again = http.put(f"/v1/harnesses/{suppressed['id']}", json=suppressed, headers=AUTH).json()
    assert again["skills"] == suppressed["skills"]

    db, row = ctx(http).db, get_harness(ctx(http).db, principal_id(http), suppressed["id"])
    assert row is not None
    assert row.config["skills"] == [{"name": "uhp-artifacts", "enabled": False, "builtin": True}]
    names = [b.name for b in turn_skills(db, row.principal_id, row.config["skills"])]
    assert names == ["workspace-hygiene"]

    # A skill of the harness's own under a built-in's name replaces it for its turns.
    own = create(
        http, {"base": "codex", "skills": [{"name": "workspace-hygiene", "content": SKILL_MD}]}
    )
    row = get_harness(db, principal_id(http), own["id"])
    assert row is not None
    bundles = {b.name: b for b in turn_skills(db, row.principal_id, row.config["skills"])}
    assert set(bundles) == set(BUILTINS)
    assert [f.data for f in bundles["workspace-hygiene"].files] == [SKILL_MD.encode()]
    assert len(bundles["uhp-artifacts"].files) == 2  # the whole folder, references included


def principal_id(http: TestClient) -> str:
    return key_store.ensure_principal(ctx(http).db, key_store.DEFAULT_PRINCIPAL).id


# -- MCP servers ----------------------------------------------------------------------------


def test_mcp_names_are_sanitised_and_credentials_never_returned(http: TestClient) -> None:
    servers = [
        {
            "name": "my vault!",
            "url": "https://mcp.example.com/mcp",
            "auth": "Bearer tok-secret-1",
            "headers": {"X-Api-Key": "key-secret-2", "X-Team": "blue"},
        },
        {"name": "my vault?", "url": "https://mcp.example.com/other", "enabled": False},
        {"name": "../../..", "url": "https://mcp.example.com/x", "transport": "streamable-http"},
    ]
    harness = create(http, {"base": "codex", "mcp_servers": servers})
    validate("Harness", harness)
    text = json.dumps(harness)
    assert "tok-secret-1" not in text and "key-secret-2" not in text
    first, second, third = harness["mcpServers"]
    assert [first["name"], second["name"], third["name"]] == ["my_vault", "my_vault_2", "mcp"]
    assert first["auth"].startswith("uhp-secret:mcps_")
    assert first["headers"]["X-Api-Key"].startswith("uhp-secret:mcps_")
    assert first["headers"]["X-Team"] == "blue"
    assert (first["transport"], third["transport"]) == ("http", "http")
    assert second["enabled"] is False and "auth" not in second

    # GET → PUT keeps the references, and the gateway still gets the real values.
    url = f"/v1/harnesses/{harness['id']}"
    again = http.put(url, json={**harness, "name": "renamed"}, headers=AUTH).json()
    assert again["mcpServers"] == harness["mcpServers"]
    row = get_harness(ctx(http).db, principal_id(http), harness["id"])
    assert row is not None
    targets = turn_mcp_targets(ctx(http).db, row.principal_id, row.config["mcpServers"], False)
    assert [t.name for t in targets] == ["my_vault", "mcp"]  # the disabled one is not there
    assert targets[0].headers == {
        "X-Api-Key": "key-secret-2",
        "X-Team": "blue",
        "Authorization": "Bearer tok-secret-1",
    }
    assert "tok-secret-1" not in repr(targets[0])

    # A reference is only good for the principal it belongs to.
    forged = {**servers[0], "auth": first["auth"], "headers": {}}
    other = other_principal(http)
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "mcp_servers": [forged]}, headers=other),
        "mcp_servers[0].auth",
    )
    unknown = {**forged, "auth": "uhp-secret:mcps_nope"}
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "mcp_servers": [unknown]}, headers=AUTH),
        "mcp_servers[0].auth",
    )


@pytest.mark.parametrize(
    ("server", "param"),
    [
        ({"name": "x", "url": "file:///etc/passwd"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "ftp://example.com/"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://169.254.169.254/latest/meta-data/"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://10.0.0.1/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://192.168.1.5:8000/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://127.0.0.1:9/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://localhost:8080/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://[::1]/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://[::ffff:10.0.0.1]/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "http://0.0.0.0/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "https://user:pw@example.com/mcp"}, "mcp_servers[0].url"),
        ({"name": "x", "url": "https:///nohost"}, "mcp_servers[0].url"),
        ({"name": "x", "url": 5}, "mcp_servers[0].url"),
        ({"name": "x"}, "mcp_servers[0].url"),
        ({"url": "https://example.com/mcp"}, "mcp_servers[0].name"),
        ({"name": "x", "url": "https://e.com/", "transport": "ws"}, "mcp_servers[0].transport"),
        ({"name": "x", "url": "https://e.com/", "enabled": 1}, "mcp_servers[0].enabled"),
        ({"name": "x", "url": "https://e.com/", "headers": []}, "mcp_servers[0].headers"),
        (
            {"name": "x", "url": "https://e.com/", "headers": {"Host": "a"}},
            "mcp_servers[0].headers.Host",
        ),
        (
            {"name": "x", "url": "https://e.com/", "headers": {"X-A": "a\r\nb"}},
            "mcp_servers[0].headers.X-A",
        ),
        ({"name": "x", "url": "https://e.com/", "auth": 5}, "mcp_servers[0].auth"),
        (
            {
                "name": "x",
                "url": "https://e.com/",
                "auth": "t",
                "headers": {"Authorization": "Basic x"},
            },
            "mcp_servers[0].auth",
        ),
    ],
)
def test_mcp_entries_and_the_url_policy_are_checked_at_configuration_time(
    http: TestClient, server: dict[str, Any], param: str
) -> None:
    response = http.post(
        "/v1/harnesses", json={"base": "codex", "mcp_servers": [server]}, headers=AUTH
    )
    error = refused(response, param)
    for secret_part in ("10.0.0.1", "169.254", "pw@"):
        assert secret_part not in error["message"]


def test_camel_case_bodies_name_camel_case_params(http: TestClient) -> None:
    bad = {"name": "x", "url": "http://10.0.0.1/"}
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "mcpServers": [bad]}, headers=AUTH),
        "mcpServers[0].url",
    )


def targets_of(http: TestClient, harness_id: str) -> dict[str, dict[str, str]]:
    """What the gateway would send to each enabled MCP server of the harness."""
    row = get_harness(ctx(http).db, principal_id(http), harness_id)
    assert row is not None
    found = turn_mcp_targets(ctx(http).db, row.principal_id, row.config["mcpServers"], False)
    return {target.url: target.headers for target in found}


VAULT = {
    "name": "vault",
    "url": "https://mcp.example.com/mcp",
    "auth": "tok-secret-1",
    "headers": {"X-Api-Key": "key-secret-2", "X-Team": "blue"},
}


@pytest.mark.parametrize(
    "url",
    [
        "https://other.example/mcp",
        "http://mcp.example.com/mcp",  # another scheme
        "https://mcp.example.com:8443/mcp",  # another port
        "https://mcp.example.com.evil.example/mcp",
    ],
)
def test_a_stored_secret_never_goes_to_another_origin(http: TestClient, url: str) -> None:
    harness = create(http, {"base": "codex", "mcp_servers": [VAULT]})
    stored = harness["mcpServers"][0]
    auth, api_key = stored["auth"], stored["headers"]["X-Api-Key"]
    before = {row.id for row in secret_rows(http)}

    def post(server: dict[str, Any]) -> Any:
        return http.post(
            "/v1/harnesses", json={"base": "codex", "mcp_servers": [server]}, headers=AUTH
        )

    # Re-pointing either reference, in a new harness, is refused ...
    error = refused(post({"name": "x", "url": url, "auth": auth}), "mcp_servers[0].auth")
    assert "tok-secret-1" not in json.dumps(error)
    refused(
        post({"name": "x", "url": url, "headers": {"X-Api-Key": api_key}}),
        "mcp_servers[0].headers.X-Api-Key",
    )
    # ... and so is moving the harness's own server elsewhere with its references.
    moved = {**harness, "mcpServers": [{**stored, "url": url, "headers": {"X-Team": "blue"}}]}
    put = http.put(f"/v1/harnesses/{harness['id']}", json=moved, headers=AUTH)
    refused(put, "mcpServers[0].auth")
    moved_header = {**harness, "mcpServers": [{**stored, "url": url, "auth": "tok-new"}]}
    put = http.put(f"/v1/harnesses/{harness['id']}", json=moved_header, headers=AUTH)
    refused(put, "mcpServers[0].headers.X-Api-Key")
    assert {row.id for row in secret_rows(http)} == before  # a refused body stores nothing
    assert http.get(f"/v1/harnesses/{harness['id']}", headers=AUTH).json() == harness
    assert targets_of(http, harness["id"]) == {
        VAULT["url"]: {
            "X-Api-Key": "key-secret-2",
            "X-Team": "blue",
            "Authorization": "Bearer tok-secret-1",
        }
    }

    # Sending the credentials themselves again is how a server moves: new secrets, new origin.
    resent = {**stored, "url": url, "auth": "tok-secret-1", "headers": VAULT["headers"]}
    again = http.put(
        f"/v1/harnesses/{harness['id']}", json={**harness, "mcpServers": [resent]}, headers=AUTH
    )
    assert again.status_code == 200, again.text
    now = again.json()["mcpServers"][0]
    assert now["auth"] != auth and now["headers"]["X-Api-Key"] != api_key
    assert targets_of(http, harness["id"])[url]["Authorization"] == "Bearer tok-secret-1"


def test_a_reference_stays_good_for_its_own_origin(http: TestClient) -> None:
    harness = create(http, {"base": "codex", "mcp_servers": [VAULT]})
    stored = harness["mcpServers"][0]
    # Another path, the host in capitals, the default port spelled out: the same origin.
    same = {**stored, "name": "vault2", "url": "https://MCP.Example.com:443/other"}
    other = create(http, {"base": "codex", "mcp_servers": [same]})
    assert other["mcpServers"][0]["auth"] == stored["auth"]
    assert targets_of(http, other["id"])[same["url"]]["Authorization"] == "Bearer tok-secret-1"


def secret_rows(http: TestClient) -> list[McpSecretRow]:
    with ctx(http).db.session() as s:
        return list(s.exec(select(McpSecretRow)).all())


def test_secrets_of_an_older_database_are_bound_to_the_server_that_used_them(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with make_client(data) as http:
        first = create(http, {"base": "codex", "mcp_servers": [VAULT]})
        stolen = first["mcpServers"][0]["auth"]
        # A harness that re-pointed the secret before references were bound to an origin.
        second = create(
            http, {"base": "codex", "mcp_servers": [{"name": "x", "url": "https://e.com/"}]}
        )
        with ctx(http).db.session() as s:
            row = s.get(HarnessRow, second["id"])
            assert row is not None
            row.config = {
                **row.config,
                "mcpServers": [{**row.config["mcpServers"][0], "auth": stolen}],
            }
            s.add(row)
            s.commit()
            # ... and a database from before the `origin` column.
            s.exec(text("ALTER TABLE mcp_secret DROP COLUMN origin"))  # type: ignore[call-overload]
            s.exec(text("DROP TABLE alembic_version"))  # type: ignore[call-overload]
            s.commit()
    with make_client(data) as http:  # the restarted server upgrades the table
        assert {row.origin for row in secret_rows(http)} == {"https://mcp.example.com:443"}
        assert targets_of(http, first["id"])[VAULT["url"]]["Authorization"] == (
            "Bearer tok-secret-1"
        )
        assert "Authorization" not in targets_of(http, second["id"])["https://e.com/"]
        again = http.put(f"/v1/harnesses/{first['id']}", json=first, headers=AUTH)
        assert again.status_code == 200, again.text
        # Its owner sees the reference; it is good only where the secret was first used.
        kept = http.get(f"/v1/harnesses/{second['id']}", headers=AUTH).json()
        assert kept["mcpServers"][0]["auth"] == stolen
        refused(
            http.put(f"/v1/harnesses/{second['id']}", json=kept, headers=AUTH),
            "mcpServers[0].auth",
        )


def test_private_hosts_are_allowed_only_by_the_setting(tmp_path: Path) -> None:
    with make_client(tmp_path / "allow", mcp_allow_private_hosts=True) as http:
        ok = {"name": "lan", "url": "http://10.0.0.1:8000/mcp"}
        assert create(http, {"base": "codex", "mcp_servers": [ok]})["mcpServers"][0]["url"]
        local = {"name": "lo", "url": "http://localhost:8000/mcp"}
        assert create(http, {"base": "codex", "mcp_servers": [local]})
        metadata = {"name": "md", "url": "http://169.254.169.254/"}  # link-local: always refused
        refused(
            http.post(
                "/v1/harnesses", json={"base": "codex", "mcp_servers": [metadata]}, headers=AUTH
            ),
            "mcp_servers[0].url",
        )


def test_a_transport_the_base_cannot_speak_is_refused_unless_disabled(http: TestClient) -> None:
    sse = {"name": "legacy", "url": "https://e.com/sse", "transport": "sse"}
    error = refused(
        http.post("/v1/harnesses", json={"base": "codex", "mcp_servers": [sse]}, headers=AUTH),
        "mcp_servers[0].transport",
    )
    assert error["detail"]["supported"] == ["http"]
    kept = create(http, {"base": "codex", "mcp_servers": [{**sse, "enabled": False}]})
    assert kept["mcpServers"][0]["transport"] == "sse"
