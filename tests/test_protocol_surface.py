"""Discovery, versioning, authentication and the error envelope, on every route.

These run the real application in-process with no agent CLI: nothing here needs one.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from storage import keys
from storage.tables import Principal
from storage.unit import Tx
from tests.support.schema import validate
from uhp_server.app import create_app
from uhp_server.settings import Settings

KEY = "uhp_sk_surface_test"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Lifecycle §1: newest first; a request that names none is served the newest.
VERSIONS = ["2026-10-04", "2026-09-28", "2026-09-12", "2026-08-11"]
DEFAULT = "2026-10-04"

# Every route of the protocol this server serves, with a body where one is needed.
ROUTES = [
    ("GET", "/v1/harnesses"),
    ("GET", "/v1/harnesses/chrn_missing"),
    ("GET", "/v1/models"),
    ("GET", "/v1/harnesses/chrn_missing/models"),
    ("POST", "/v1/responses"),
    ("GET", "/v1/responses/resp_missing"),
    ("GET", "/v1/responses/resp_missing/input_items"),
    ("DELETE", "/v1/responses/resp_missing"),
    ("POST", "/v1/responses/resp_missing/cancel"),
    ("POST", "/v1/sessions/hsessmissing/cancel"),
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def http(data_dir: Path) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=data_dir, api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _is_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    validate("ErrorEnvelope", body)
    assert body["error"]["code"] == code
    assert body["error"]["detail"]["correlation_id"].startswith("corr_")
    assert response.headers["uhp-version"] == DEFAULT
    return body["error"]


def test_discovery_is_public_truthful_and_consistent(http: TestClient) -> None:
    response = http.get("/v1/uhp")
    assert response.status_code == 200
    assert response.headers["uhp-version"] == DEFAULT
    doc = response.json()
    validate("Discovery", doc)
    assert doc["protocol"] == "uhp" and doc["default_version"] in doc["versions"]
    assert doc["versions"] == VERSIONS and doc["default_version"] == DEFAULT
    caps = doc["capabilities"]
    expected = {
        "streaming",
        "sessions",
        "cancellation",
        "idempotency",
        "files_input",
        "files_output",
        "session_listing",
        "harness_management",
        "session_sharing",
        # The optional chapters of the later versions: reported even while false.
        "plugins",
        "environments",
        "memories",
    }
    assert expected <= set(caps)
    # Plugins §7: the manifest schemas, non-empty, exactly while plugins is served.
    assert bool(doc.get("plugin_schemas")) == caps["plugins"]
    extended = all(caps[c] for c in ("files_input", "files_output", "session_listing"))
    full = extended and caps["harness_management"] and caps["session_sharing"]
    assert doc["conformance_class"] == ("full" if full else "extended" if extended else "core")
    assert http.get("/v1/uhp", headers=AUTH).json() == doc  # nothing principal-specific


def test_supported_version_is_honoured_and_unsupported_refused(http: TestClient) -> None:
    for version in VERSIONS:
        answer = http.get("/v1/uhp", headers={"UHP-Version": version})
        assert answer.status_code == 200 and answer.headers["uhp-version"] == version
    for path in ("/v1/uhp", "/v1/harnesses", "/v1/nowhere"):
        error = _is_envelope(
            http.get(path, headers={**AUTH, "UHP-Version": "2025-01-01"}),
            400,
            "unsupported_protocol_version",
        )
        assert error["detail"]["supported"] == VERSIONS


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_needs_a_valid_bearer_token(http: TestClient, method: str, path: str) -> None:
    _is_envelope(http.request(method, path), 401, "missing_credential")
    for bad in ("Bearer wrong", "Basic abc", "Bearer", "bearer  "):
        error = _is_envelope(
            http.request(method, path, headers={"Authorization": bad}), 401, "invalid_credential"
        )
        assert "wrong" not in error["message"]


def test_unknown_routes_and_methods_get_the_envelope(http: TestClient) -> None:
    _is_envelope(http.get("/v1/nope", headers=AUTH), 404, "uhpserver_route_not_found")
    _is_envelope(http.get("/", headers=AUTH), 404, "uhpserver_route_not_found")
    _is_envelope(http.put("/v1/uhp"), 405, "uhpserver_method_not_allowed")
    _is_envelope(http.patch("/v1/responses", headers=AUTH), 405, "uhpserver_method_not_allowed")


MALFORMED = [
    (b"{not json", "application/json", None),
    (b"[1, 2]", "application/json", None),
    (b"", "application/json", None),
    (b"input=hi", "application/x-www-form-urlencoded", None),
    (b'{"stream": true}', "application/json", "input"),
    (b'{"input": 5}', "application/json", "input"),
    (b'{"input": [1]}', "application/json", "input"),
    (b'{"input": ""}', "application/json", "input"),
    (b'{"input": []}', "application/json", "input"),
    (b'{"input": "x", "stream": "yes"}', "application/json", "stream"),
    (b'{"input": "x", "store": 1}', "application/json", "store"),
    (b'{"input": "x", "max_step": -1}', "application/json", "max_step"),
    (b'{"input": "x", "max_step": 1.5}', "application/json", "max_step"),
    (b'{"input": "x", "timeout_seconds": 0}', "application/json", "timeout_seconds"),
    (b'{"input": "x", "timeout_seconds": 99999999}', "application/json", "timeout_seconds"),
    (b'{"input": "x", "metadata": "m"}', "application/json", "metadata"),
    (b'{"input": "x", "metadata": {"harness_id": 7}}', "application/json", "metadata"),
    (b'{"input": "x", "model": 3}', "application/json", "model"),
    (b'{"input": "x", "previous_response_id": 3}', "application/json", "previous_response_id"),
    (b'{"input": "x", "tools": "all"}', "application/json", "tools"),
    (b'{"input": [{"role": "robot", "content": "x"}]}', "application/json", "input[0]"),
    (b'{"input": [{"role": "user", "content": 5}]}', "application/json", "input[0].content"),
    (
        b'{"input": [{"role": "user", "content": [{"type": "input_text"}]}]}',
        "application/json",
        "input[0].content[0].text",
    ),
    (
        b'{"input": [{"role": "user", "content": [{"type": "video"}]}]}',
        "application/json",
        "input[0].content[0].type",
    ),
    (
        b'{"input": [{"type": "function_call_output", "call_id": "c", "output": "o"}]}',
        "application/json",
        "input[0].type",
    ),
    (b'{"input": [{"role": "assistant", "content": "only me"}]}', "application/json", "input"),
    (
        b'{"input": [{"role": "user", "content": [{"type": ["x"]}]}]}',
        "application/json",
        "input[0].content[0].type",
    ),
    # JSON that Python would decode but no client could get back faithfully.
    (b'{"input": "hi", "metadata": {"x": NaN}}', "application/json", None),
    (b'{"input": "hi", "metadata": {"x": -Infinity}}', "application/json", None),
    (b'{"input": "hi", "metadata": {"x": [1e999]}}', "application/json", None),  # overflows
    (rb'{"input": "\ud800"}', "application/json", None),  # a lone surrogate escape
    (rb'{"input": "hi", "metadata": {"\udfff": 1}}', "application/json", None),
    (
        b'{"input": "hi", "metadata": {"x": ' + b"[" * 200 + b"]" * 200 + b"}}",
        "application/json",
        None,
    ),
    (b'{"input": "\xff\xfe"}', "application/json", None),
]


@pytest.mark.parametrize(("body", "content_type", "param"), MALFORMED)
def test_malformed_task_bodies_are_400_invalid_input(
    http: TestClient, body: bytes, content_type: str, param: str | None
) -> None:
    response = http.post(
        "/v1/responses", content=body, headers={**AUTH, "Content-Type": content_type}
    )
    error = _is_envelope(response, 400, "invalid_input")
    assert error["param"] == param
    assert "Traceback" not in error["message"] and "/" not in error["message"].replace("a/b", "")


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("GET", "/v1/harnesses/chrn_missing", "harness_not_found"),
        ("GET", "/v1/harnesses/../../etc/passwd", "uhpserver_route_not_found"),
        ("GET", "/v1/harnesses/chrn_missing/models", "harness_not_found"),
        ("GET", "/v1/responses/resp_missing", "response_not_found"),
        ("GET", "/v1/responses/resp_missing?stream=true", "response_not_found"),
        ("GET", "/v1/responses/resp_missing/input_items", "response_not_found"),
        ("DELETE", "/v1/responses/resp_missing", "response_not_found"),
        ("POST", "/v1/responses/resp_missing/cancel", "response_not_found"),
        ("POST", "/v1/sessions/hsessmissing/cancel", "session_not_found"),
    ],
)
def test_unknown_objects_are_404_with_their_code(
    http: TestClient, method: str, path: str, code: str
) -> None:
    _is_envelope(http.request(method, path, headers=AUTH), 404, code)


def test_bad_query_parameters_are_400(http: TestClient) -> None:
    response = http.get("/v1/responses/resp_x?stream=maybe", headers=AUTH)
    assert _is_envelope(response, 400, "invalid_input")["param"] == "stream"
    response = http.get("/v1/responses/resp_x?stream=true&starting_after=-5", headers=AUTH)
    assert _is_envelope(response, 400, "invalid_input")["param"] == "starting_after"


def test_unknown_harness_on_a_task_is_404_harness_not_found(http: TestClient) -> None:
    response = http.post(
        "/v1/responses", headers=AUTH, json={"input": "x", "metadata": {"harness_id": "chrn_x"}}
    )
    assert _is_envelope(response, 404, "harness_not_found")["param"] == "metadata.harness_id"
    response = http.post(
        "/v1/responses", headers=AUTH, json={"input": "x", "previous_response_id": "resp_x"}
    )
    assert _is_envelope(response, 404, "response_not_found")["param"] == "previous_response_id"


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.heavy
def test_keys_created_by_the_cli_work_and_revocation_is_immediate(
    http: TestClient, data_dir: Path
) -> None:
    created = _cli(data_dir, "keys", "create", "--principal", "alice")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    key_id = created.stderr.split()[1]
    assert key.startswith("uhp_sk_") and key_id.startswith("key_")
    headers = {"Authorization": f"Bearer {key}"}
    assert http.get("/v1/harnesses", headers=headers).status_code == 200
    listed = _cli(data_dir, "keys", "list").stdout
    assert key_id in listed and key not in listed  # keys are stored hashed, shown once
    assert key.encode() not in (data_dir / "uhp.sqlite3").read_bytes()
    assert _cli(data_dir, "keys", "revoke", key_id).returncode == 0
    _is_envelope(http.get("/v1/harnesses", headers=headers), 401, "invalid_credential")
    assert _cli(data_dir, "keys", "revoke", key_id).returncode == 1


def test_bodies_past_the_size_limit_are_refused_before_anything_runs(data_dir: Path) -> None:
    app = create_app(Settings(data_dir=data_dir, api_key=KEY, max_request_bytes=2000), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/v1/responses", headers=AUTH, json={"input": "x" * 5000})
        error = _is_envelope(response, 413, "uhpserver_request_too_large")
        assert error["detail"]["max_bytes"] == 2000


def test_an_unexpected_failure_is_a_versioned_envelope_and_the_connection_survives(
    data_dir: Path,
) -> None:
    app = create_app(Settings(data_dir=data_dir, api_key=KEY), bases={})

    @app.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("internal detail /etc/secret")

    with TestClient(app, raise_server_exceptions=False) as client:
        error = _is_envelope(client.get("/v1/boom"), 500, "uhpserver_internal_error")
        assert error["type"] == "server_error"
        assert "secret" not in error["message"] and "/etc" not in error["message"]
        assert client.get("/v1/uhp").status_code == 200


def test_405_names_the_allowed_methods_and_trailing_slashes_are_not_redirected(
    http: TestClient,
) -> None:
    response = http.put("/v1/uhp")
    _is_envelope(response, 405, "uhpserver_method_not_allowed")
    assert "GET" in response.headers["allow"]
    response = http.get("/v1/harnesses/", headers={**AUTH, "Host": "evil.example"})
    _is_envelope(response, 404, "uhpserver_route_not_found")
    assert "location" not in response.headers


def test_starting_after_must_be_a_sequence_number(http: TestClient) -> None:
    for value in (10**20, -2, "x"):
        response = http.get(
            f"/v1/responses/resp_x?stream=true&starting_after={value}", headers=AUTH
        )
        assert _is_envelope(response, 400, "invalid_input")["param"] == "starting_after"


def test_wrong_keys_cost_at_most_one_database_lookup_each(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of wrong keys must not queue database lookups in front of the good keys'."""
    lookups: list[str] = []
    real_lookup = keys.principal_for_key

    def counted(tx: Tx, key: str) -> Principal | None:
        lookups.append(key)
        return real_lookup(tx, key)

    monkeypatch.setattr(keys, "principal_for_key", counted)
    app = create_app(Settings(data_dir=data_dir, api_key="uhp_sk_configured"), bases={})
    with TestClient(app, raise_server_exceptions=False) as http:
        _, issued = app.state.ctx.db.run(keys.create_key, "alice")
        guess = keys.KEY_PREFIX + "x" * 43
        for token in ("not-a-key", "Bearer-ish", guess, guess, guess):
            answer = http.get("/v1/harnesses", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 401
        assert lookups == [guess]  # no prefix: refused on the loop; a guess: looked up once
        for _ in range(2):  # a real key is looked up every time, so revoking it is immediate
            answer = http.get("/v1/harnesses", headers={"Authorization": f"Bearer {issued}"})
            assert answer.status_code == 200
        assert lookups == [guess, issued, issued]
        app.state.ctx.db.run(keys.revoke_key, issued)
        answer = http.get("/v1/harnesses", headers={"Authorization": f"Bearer {issued}"})
        assert answer.status_code == 401
