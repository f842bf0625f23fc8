"""Every protocol version this server serves, from one code path (VERSIONING.md, Lifecycle §1),
and the optional chapters it does not implement answering 404 on every endpoint (Plugins §7,
Environments §7, Memories §11). In-process, no agent CLI."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.schema import validate
from uhp_server.api_docs.document import METHODS, protocol_document
from uhp_server.app import create_app
from uhp_server.doors.uhp.chapters import OPTIONAL_CHAPTERS, chapters_off
from uhp_server.settings import Settings

KEY = "uhp_sk_versions_test"
AUTH = {"Authorization": f"Bearer {KEY}"}
VERSIONS = ["2026-10-04", "2026-09-28", "2026-09-12", "2026-08-11"]
NEWEST = VERSIONS[0]


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("versions"), api_key=KEY)
    with TestClient(create_app(settings, bases={}), raise_server_exceptions=False) as client:
        yield client


def _served(response, version: str) -> None:
    assert response.headers["uhp-version"] == version, response.request.url


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_is_served_with_the_same_objects_and_echoed(
    http: TestClient, version: str
) -> None:
    pinned = {"UHP-Version": version}
    for path in ("/v1/uhp", "/v1/harnesses", "/v1/models", "/v1/sessions"):
        newest, asked = http.get(path, headers=AUTH), http.get(path, headers={**AUTH, **pinned})
        assert asked.status_code == newest.status_code == 200, asked.text
        _served(newest, NEWEST)
        _served(asked, version)
        assert asked.json() == newest.json(), path  # the header is the only difference
    # Errors carry it too (Lifecycle §1: "every response, including errors").
    for answer, status in (
        (http.get("/v1/harnesses", headers=pinned), 401),
        (http.get("/v1/responses/resp_missing", headers={**AUTH, **pinned}), 404),
        (http.get("/v1/nowhere", headers={**AUTH, **pinned}), 404),
        (http.put("/v1/uhp", headers=pinned), 405),
    ):
        assert answer.status_code == status
        validate("ErrorEnvelope", answer.json())
        _served(answer, version)
    # And what is not the protocol's own JSON: the API description, a HEAD.
    _served(http.get("/openapi.json", headers=pinned), version)
    _served(http.head("/v1/uhp", headers=pinned), version)


def test_discovery_lists_every_version_newest_first_and_defaults_to_the_newest(
    http: TestClient,
) -> None:
    document = http.get("/v1/uhp").json()
    validate("Discovery", document)
    assert document["versions"] == VERSIONS and document["default_version"] == NEWEST
    _served(http.get("/v1/uhp"), NEWEST)
    # Surrounding blanks are not part of a header's value.
    _served(http.get("/v1/uhp", headers={"UHP-Version": " 2026-08-11 "}), "2026-08-11")


@pytest.mark.parametrize(
    "asked", ["1999-01-01", "2026-10-05", "2026-10-4", "2026-8-11", "latest", "", "2026-08-11,"]
)
def test_a_version_not_served_is_refused_never_substituted(http: TestClient, asked: str) -> None:
    for path, headers in (("/v1/uhp", {}), ("/v1/harnesses", AUTH), ("/v1/harnesses", {})):
        answer = http.get(path, headers={**headers, "UHP-Version": asked})
        assert answer.status_code == 400, (path, asked)
        body = answer.json()
        validate("ErrorEnvelope", body)
        error = body["error"]
        assert error["code"] == "unsupported_protocol_version"
        assert error["param"] == "UHP-Version"
        assert error["detail"]["supported"] == VERSIONS
        _served(answer, NEWEST)  # the version the refusal itself is written in


def test_capabilities_name_every_optional_chapter_truthfully(http: TestClient) -> None:
    capabilities = http.get("/v1/uhp").json()["capabilities"]
    for chapter in OPTIONAL_CHAPTERS:
        assert capabilities[chapter.capability] is chapter.served  # false is said, not omitted
    # Plugins, Environments and Memories flipped when they landed (UHP_MEMORIES=off: false).
    assert capabilities["environments"] is True and capabilities["memories"] is True


def _operations_of_chapters_off() -> list[tuple[str, str, str]]:
    off = {chapter.tag: chapter.capability for chapter in chapters_off()}
    return [
        (off[operation["tags"][0]], method.upper(), path)
        for path, item in protocol_document()["paths"].items()
        for method, operation in item.items()
        if method in METHODS and operation.get("tags", [""])[0] in off
    ]


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x_1", path)


@pytest.mark.skipif(not chapters_off(), reason="every optional chapter is served")
@pytest.mark.parametrize(("capability", "method", "path"), _operations_of_chapters_off())
def test_every_endpoint_of_a_chapter_not_served_answers_404(
    http: TestClient, capability: str, method: str, path: str
) -> None:
    body: dict[str, Any] | None = {} if method in ("POST", "PUT", "PATCH") else None
    for version in (NEWEST, "2026-08-11"):
        answer = http.request(
            method, _concrete(path), json=body, headers={**AUTH, "UHP-Version": version}
        )
        # The ordinary 404 of a route this server does not have: never a partial chapter.
        assert answer.status_code == 404, (capability, method, path, answer.text)
        refusal = answer.json()
        validate("ErrorEnvelope", refusal)
        assert refusal["error"]["code"] == "uhpserver_route_not_found"
        _served(answer, version)


def test_the_chapters_not_served_are_the_ones_the_document_tags() -> None:
    # A chapter whose tag the document does not carry would have no endpoint tested above.
    tags = {tag["name"] for tag in protocol_document()["tags"]}
    assert {chapter.tag for chapter in OPTIONAL_CHAPTERS} <= tags
    counted = {capability for capability, _, _ in _operations_of_chapters_off()}
    assert counted == {chapter.capability for chapter in chapters_off()}
