"""Harness MCP servers: names, credentials kept server-side and bound to their origin, the
URL policy, transports a base cannot speak. In-process, no agent CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from storage.harnesses import get_harness
from storage.tables import HarnessRow, McpSecretRow
from storage.unit import Tx
from tests.support.harness_api import (
    AUTH,
    create,
    ctx,
    make_client,
    other_principal,
    principal_id,
    refused,
)
from tests.support.schema import validate
from uhp_server.harnesses.runtime import turn_mcp_targets


@pytest.fixture
def http(tmp_path: Path) -> Iterator[TestClient]:
    with make_client(tmp_path / "data") as client:
        yield client


# -- MCP servers ----------------------------------------------------------------------------


def test_mcp_names_are_sanitised_and_credentials_never_returned(http: TestClient) -> None:
    servers: list[dict[str, Any]] = [
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
    row = ctx(http).db.run(get_harness, principal_id(http), harness["id"])
    assert row is not None
    targets = ctx(http).db.run(turn_mcp_targets, row.principal_id, row.config["mcpServers"], False)
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


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # The setting that would allow it is named (issue 33's review: the refusal did not
        # say what to do); never for link-local, which no setting allows.
        (
            "http://127.0.0.1:18556/mcp",
            "private or loopback address. The server allows such addresses only with "
            "UHP_MCP_ALLOW_PRIVATE_HOSTS=true.",
        ),
        ("http://localhost:8080/mcp", "UHP_MCP_ALLOW_PRIVATE_HOSTS=true"),
        ("http://169.254.169.254/", "link-local"),
        # A wrong type says so (it was "The URL is empty.").
        (5, "`url` must be a string."),
        ({"href": "https://e.com/"}, "`url` must be a string."),
    ],
    ids=["loopback", "localhost", "link-local", "number", "object"],
)
def test_a_refused_url_says_why_and_what_allows_it(http: TestClient, url: Any, said: str) -> None:
    server = {"name": "a", "url": url}
    response = http.post(
        "/v1/harnesses", json={"base": "codex", "mcp_servers": [server]}, headers=AUTH
    )
    message = refused(response, "mcp_servers[0].url")["message"]
    assert said in message
    if said == "link-local":
        assert "ALLOW_PRIVATE" not in message


def test_camel_case_bodies_name_camel_case_params(http: TestClient) -> None:
    bad = {"name": "x", "url": "http://10.0.0.1/"}
    refused(
        http.post("/v1/harnesses", json={"base": "codex", "mcpServers": [bad]}, headers=AUTH),
        "mcpServers[0].url",
    )


def targets_of(http: TestClient, harness_id: str) -> dict[str, dict[str, str]]:
    """What the gateway would send to each enabled MCP server of the harness."""
    row = ctx(http).db.run(get_harness, principal_id(http), harness_id)
    assert row is not None
    found = ctx(http).db.run(turn_mcp_targets, row.principal_id, row.config["mcpServers"], False)
    return {target.url: target.headers for target in found}


VAULT: dict[str, Any] = {
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
    return ctx(http).db.run(lambda tx: list(tx.orm.exec(select(McpSecretRow)).all()))


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

        def repointed(tx: Tx) -> None:
            row = tx.orm.get(HarnessRow, second["id"])
            assert row is not None
            row.config = {
                **row.config,
                "mcpServers": [{**row.config["mcpServers"][0], "auth": stolen}],
            }
            tx.orm.add(row)

        def older(tx: Tx) -> None:  # ... and a database from before the `origin` column
            tx.execute("ALTER TABLE mcp_secret DROP COLUMN origin")
            tx.execute("DROP TABLE alembic_version")

        ctx(http).db.run(repointed)
        ctx(http).db.run(older)
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
