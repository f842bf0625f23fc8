"""`/openapi.json` and `/docs`: the protocol's OpenAPI document extended with every route this
server adds, valid OpenAPI 3, and a page of it that renders offline in a real browser."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from openapi_spec_validator import validate as validate_openapi
from starlette.applications import Starlette

from tests.support.server import ServerProcess
from uhp_server.api_docs.document import SPEC_PATH
from uhp_server.app import create_app
from uhp_server.doors.uhp.chapters import NOT_SERVED_YET, chapters_off
from uhp_server.doors.uhp.wire import BUILTIN_SKILLS_FIELD
from uhp_server.harnesses.config import BASE_CONFIG_FIELD, KEEP_WARM_FIELD
from uhp_server.http.route_table import mounted_routes, served_routes
from uhp_server.settings import Settings

KEY = "uhp_sk_docs_test"
# Routes deliberately left out of the document: the sandbox's model and MCP gateway (reached
# only by agents, with per-turn tokens), the documentation's own routes, and the owner's
# console (pages for a person in a browser, signed in with a cookie: docs/console.md).
UNDOCUMENTED = ("/gateway/", "/openapi.json", "/docs", "/console")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("docs"), api_key=KEY), bases={})
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def document(http: TestClient) -> dict[str, Any]:
    answer = http.get("/openapi.json")  # no credential
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    return answer.json()


def test_the_document_is_valid_openapi_3(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    validate_openapi(document)


def test_every_protocol_operation_is_served_as_published(document: dict[str, Any]) -> None:
    spec = yaml.safe_load(SPEC_PATH.read_text())
    assert document["info"] == spec["info"]
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert document["paths"][path][method] == operation, f"{method} {path}"
    served = copy.deepcopy(document["components"]["schemas"])
    served["Harness"]["properties"].pop(BUILTIN_SKILLS_FIELD)  # the additions, below
    served["Harness"]["properties"].pop(BASE_CONFIG_FIELD)
    served["HarnessCreate"]["properties"].pop(BASE_CONFIG_FIELD)
    for schema in ("Harness", "HarnessCreate"):
        served[schema]["properties"].pop(KEEP_WARM_FIELD)
    for name, schema in spec["components"]["schemas"].items():
        assert served[name] == schema


def test_the_harness_schema_names_this_servers_one_field_as_an_extension(
    document: dict[str, Any],
) -> None:
    field = document["components"]["schemas"]["Harness"]["properties"][BUILTIN_SKILLS_FIELD]
    assert BUILTIN_SKILLS_FIELD.startswith("uhpserver_")  # the vendor prefix of its error codes
    assert field["x-uhp-server-extension"] is True and field["readOnly"] is True
    assert field["items"] == {"$ref": "#/components/schemas/Skill"}


def test_the_base_configuration_is_named_as_an_extension_where_it_is_read_and_written(
    document: dict[str, Any],
) -> None:
    assert BASE_CONFIG_FIELD.startswith("uhpserver_")
    schemas = document["components"]["schemas"]
    for schema in ("Harness", "HarnessCreate"):
        field = schemas[schema]["properties"][BASE_CONFIG_FIELD]
        assert field["x-uhp-server-extension"] is True and "acp" in field["description"]


def test_keeping_a_session_warm_is_named_as_an_extension_with_its_bounds(
    document: dict[str, Any],
) -> None:
    assert KEEP_WARM_FIELD == "uhpserver_keepWarmSeconds"
    schemas = document["components"]["schemas"]
    for schema in ("Harness", "HarnessCreate"):
        field = schemas[schema]["properties"][KEEP_WARM_FIELD]
        assert field["x-uhp-server-extension"] is True
        assert (field["minimum"], field["maximum"]) == (0, 3600)


def test_every_route_the_app_serves_is_in_the_document(
    http: TestClient, document: dict[str, Any]
) -> None:
    left_out = []
    assert isinstance(http.app, Starlette)
    for route in served_routes(http.app):
        # As the document writes it: a `{path:path}` converter is `{path}` there.
        path = getattr(route, "path_format", route.path)
        for method in route.methods - {"HEAD"}:
            if path.startswith(UNDOCUMENTED):
                left_out.append(path)
                continue
            assert method.lower() in document["paths"].get(path, {}), f"{method} {path}"
    assert any(p.startswith("/gateway/mcp") for p in left_out)
    # The server's own routes are there as extensions; the share page needs no credential.
    for path, method in [
        ("/v1/harnesses/{harness_id}/events", "get"),
        ("/v1/traces/{session_id}", "delete"),
        ("/s/{token}", "get"),
        ("/s/{token}/state", "get"),
    ]:
        operation = document["paths"][path][method]
        assert operation["x-uhp-server-extension"] is True
        assert operation["tags"] == ["UHP Server extensions"]
        assert "422" not in operation["responses"]
        assert (operation.get("security") == []) == path.startswith("/s/")
    # A skill's files is the protocol's operation since 2026-09-12: served as published.
    assert (
        document["paths"]["/v1/harnesses/{harness_id}/skills/{skill_name}/files"]["get"][
            "operationId"
        ]
        == "getSkillFiles"
    )
    # Sessions §6 names DELETE /v1/sessions/{id}, which the protocol's document leaves out:
    # under its chapter, not among this server's extensions.
    delete = document["paths"]["/v1/sessions/{session_id}"]["delete"]
    assert delete["tags"] == ["Sessions"] and "x-uhp-server-extension" not in delete
    assert "Sessions §6" in delete["description"] and "422" not in delete["responses"]


def _routes_of(app: Starlette) -> set[tuple[str, str]]:
    """(method, path) of every route the app answers, a mounted door's included, as the
    document writes paths (`{path:path}` is `{path}` there)."""
    found = set()
    for route in served_routes(app):
        path = getattr(route, "path_format", route.path)
        found |= {(method.lower(), path) for method in route.methods - {"HEAD"}}
    for mounted in mounted_routes(app):
        found |= {(method.lower(), mounted.path) for method in mounted.methods - {"HEAD"}}
    return found


def test_the_document_and_the_apps_routes_are_the_same_set(
    http: TestClient, document: dict[str, Any]
) -> None:
    """Issue 33 §5: the Chat Completions door (a mounted sub-application) was missing."""
    assert isinstance(http.app, Starlette)
    served = {(m, p) for m, p in _routes_of(http.app) if not p.startswith(UNDOCUMENTED)}
    documented = {
        (method, path)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "delete", "patch")
        # An optional chapter not served: listed as published, tagged as answering 404.
        and not set(operation.get("tags", [])) & {c.tag for c in chapters_off()}
        # An operation of a served chapter not built yet: marked, and answering 404.
        and (method, path) not in NOT_SERVED_YET
    }
    assert served - documented == set()
    assert documented - served == set()
    assert {
        ("get", "/openai/v1/models"),
        ("get", "/openai/v1/models/{model}"),
        ("post", "/openai/v1/chat/completions"),
    } <= documented


def test_the_chat_door_is_documented_with_its_own_error_shape(document: dict[str, Any]) -> None:
    chat = document["paths"]["/openai/v1/chat/completions"]["post"]
    assert chat["tags"] == ["Chat Completions door"] and chat["x-uhp-server-extension"] is True
    body = chat["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body.removeprefix("#/components/schemas/") in document["components"]["schemas"]
    for code in ("400", "401", "404", "422", "502"):
        schema = chat["responses"][code]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/OpenAIErrorEnvelope"}, code
    envelope = document["components"]["schemas"]["OpenAIErrorEnvelope"]
    assert envelope["properties"]["error"]["required"] == ["message", "type", "param", "code"]
    assert "Chat Completions door" in {tag["name"] for tag in document["tags"]}


def test_a_chapter_not_served_says_so_where_its_operations_are(
    http: TestClient, document: dict[str, Any]
) -> None:
    capabilities = http.get("/v1/uhp").json()["capabilities"]
    tags = {tag["name"]: tag["description"] for tag in document["tags"]}
    for tag, capability in (
        ("Plugins", "plugins"),
        ("Environments", "environments"),
        ("Memories", "memories"),
    ):
        said = tags[tag].startswith("**Not served by this server**")
        assert said != capabilities[capability], tag
        if said:
            assert f"`{capability}: false`" in tags[tag]
    for tag in ("Discovery", "Harnesses", "Tasks", "Sessions", "Files"):
        assert "Not served" not in tags[tag]


def test_the_spec_ships_with_the_package_not_the_tests() -> None:
    assert SPEC_PATH.is_relative_to(Path(__file__).resolve().parents[1] / "uhp_server")
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert '"api_docs/*.yaml"' in pyproject


# --- /docs in Chromium ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": KEY,
        "UHP_BASES": "",
    }
    running = ServerProcess(tmp_path_factory.mktemp("docs-live"), env).start()
    yield running
    running.stop()


@pytest.mark.slow
def test_the_docs_page_renders_offline_in_a_browser(
    live: ServerProcess, document: dict[str, Any], tmp_path: Path
) -> None:
    from tests.test_share_browser import CHROMIUM_FLAGS, chromium_path, screenshot_dir

    playwright_api = pytest.importorskip("playwright.sync_api")
    operations = sum(
        1 for item in document["paths"].values() for method in item if method != "parameters"
    )
    answer = httpx.get(f"{live.url}/docs")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requested: list[str] = []
        problems: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.on("console", lambda message: problems.append(message.text))
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        assert page.goto(f"{live.url}/docs").status == 200
        assert "API reference" in page.title()
        page.screenshot(path=str(screenshot_dir(tmp_path) / "docs-top.png"))
        assert page.locator("article.operation").count() == operations
        events = page.locator("#op-get-v1-harnesses-harness-id-events")
        assert "/v1/harnesses/{harness_id}/events" in events.locator("h3").inner_text()
        create = page.locator("#op-post-v1-responses")
        assert create.locator(".body a").inner_text() == "CreateResponseRequest"
        # The stylesheet applied (served by the page's own origin, allowed by its CSP).
        color = create.locator(".method").evaluate("e => getComputedStyle(e).backgroundColor")
        assert color == "rgb(47, 91, 211)"
        create.locator(".body a").click()
        assert page.locator("#schema-CreateResponseRequest").is_visible()
        page.locator("#schema-CreateResponseRequest summary").click()
        assert '"input"' in page.locator("#schema-CreateResponseRequest pre").inner_text()
        page.screenshot(path=str(screenshot_dir(tmp_path) / "docs.png"))
        browser.close()
    assert all(url.startswith(live.url) for url in requested), requested
    # No CSP violation; nothing failed to load but the favicon the browser asks for itself.
    assert [url for url in failed if not url.endswith("/favicon.ico")] == []
    assert [p for p in problems if "404" not in p] == []
