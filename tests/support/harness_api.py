"""Calling the harness-management API in process (no agent CLI): a client with a configured
key, and the small readers and makers its tests share."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from harness_bases.codex import CodexBase
from storage import keys as key_store
from tests.support.app_context import app_context
from tests.support.schema import validate
from uhp_server.app import create_app
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


def ctx(http: TestClient) -> Any:
    return app_context(http)


def other_principal(http: TestClient) -> dict[str, str]:
    _, key = ctx(http).db.run(key_store.create_key, "other-principal")
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


def principal_id(http: TestClient) -> str:
    return ctx(http).db.run(key_store.ensure_principal, key_store.DEFAULT_PRINCIPAL).id
