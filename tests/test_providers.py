"""Providers: the conventional variables, UHP_PROVIDERS_FILE, model routing and `available`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness_bases import registry
from tests.scripted_provider import RunningProvider, start_provider
from tests.support.server import ServerProcess
from uhp_server import cli
from uhp_server.app import create_app
from uhp_server.catalog import ModelCatalog
from uhp_server.errors import ApiError
from uhp_server.gateway.providers_file import ProvidersFileError, read_providers_file
from uhp_server.gateway.upstreams import Upstreams
from uhp_server.settings import Settings

KEY = "sk-providers-test-key"
GOOD_YAML = """
providers:
  local:
    api: chat
    base_url: http://127.0.0.1:8000/v1/
    models: [llama-a, llama-b]
    headers: {X-Title: uhp}
  claude:
    api: anthropic
    base_url: https://anthropic.example
    api_key_env: PROVIDERS_TEST_KEY
"""
GOOD_TOML = """
[providers.groq]
api = "chat"
base_url = "https://api.groq.example/openai/v1"
api_key_env = "PROVIDERS_TEST_KEY"
default_model = "llama-b"
"""


@pytest.fixture(autouse=True)
def provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVIDERS_TEST_KEY", KEY)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_yaml_file_defines_named_providers(tmp_path: Path) -> None:
    local, claude = read_providers_file(write(tmp_path, "p.yaml", GOOD_YAML), set())
    assert (local.name, local.api, local.base_url) == ("local", "chat", "http://127.0.0.1:8000/v1")
    assert local.models == ("llama-a", "llama-b") and local.api_key == ""
    assert local.headers == {"x-title": "uhp"} and local.auth_headers() == {}
    assert (claude.api, claude.base_url) == ("anthropic", "https://anthropic.example/v1")
    assert claude.auth_headers() == {"x-api-key": KEY}
    assert KEY not in repr(claude)


def test_a_toml_file_defines_named_providers(tmp_path: Path) -> None:
    (groq,) = read_providers_file(write(tmp_path, "p.toml", GOOD_TOML), set())
    assert groq.default_model == "llama-b"
    assert groq.auth_headers() == {"authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("api: gemini\n    base_url: https://x.example", "providers.bad.api"),
        ("api: chat", "providers.bad.base_url"),
        ("api: chat\n    base_url: ftp://x.example", "providers.bad.base_url"),
        ("api: chat\n    base_url: https://u:p@x.example", "providers.bad.base_url"),
        (
            "api: chat\n    base_url: https://x.example\n    api_key_env: UNSET_VAR_XYZ",
            "providers.bad.api_key_env",
        ),
        (
            "api: chat\n    base_url: https://x.example\n    api_key_env: 'a b'",
            "providers.bad.api_key_env",
        ),
        ("api: chat\n    base_url: https://x.example\n    models: []", "providers.bad.models"),
        (
            "api: chat\n    base_url: https://x.example\n    models: [a, 3]",
            "providers.bad.models[1]",
        ),
        (
            "api: chat\n    base_url: https://x.example\n    default_model: ''",
            "providers.bad.default_model",
        ),
        (
            "api: chat\n    base_url: https://x.example\n    headers: {Authorization: x}",
            "providers.bad.headers.Authorization",
        ),
        ("api: chat\n    base_url: https://x.example\n    headers: [a]", "providers.bad.headers"),
        (
            "api: chat\n    base_url: https://x.example\n    models: [a]\n    default_model: b",
            "providers.bad.default_model",
        ),
        ("api: chat\n    base_url: https://x.example\n    key: sk-inline", "providers.bad.key"),
    ],
)
def test_each_bad_field_is_named_with_the_file(tmp_path: Path, entry: str, field: str) -> None:
    path = write(tmp_path, "p.yaml", f"providers:\n  bad:\n    {entry}\n")
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(path, set())
    assert str(caught.value).startswith(f"{path}: {field}:")


def test_credentials_in_the_url_name_the_files_own_fields(tmp_path: Path) -> None:
    """Issue 33's review: the refusal said "use `auth` or `headers`", and `auth` is no field
    of the file (the next start said "providers.groq.auth: unknown field")."""
    entry = "api: chat\n    base_url: https://u:p@x.example"
    path = write(tmp_path, "p.yaml", f"providers:\n  groq:\n    {entry}\n")
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(path, set())
    said = str(caught.value)
    assert "`api_key_env`" in said and "`headers`" in said and "`auth`" not in said
    assert "u:p" not in said


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("providers: {}\n", "providers"),
        ("other: 1\n", "providers"),
        ("providers:\n  'a b': {api: chat, base_url: 'https://x.example'}\n", "providers.a b"),
        ("providers:\n  openai: {api: chat, base_url: 'https://x.example'}\n", "providers.openai"),
    ],
)
def test_bad_tables_are_named(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path, "p.yaml", text)
    with pytest.raises(ProvidersFileError) as caught:
        read_providers_file(path, {"openai"})
    assert str(caught.value).startswith(f"{path}: {field}:")


def test_unparseable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ProvidersFileError, match="not valid TOML"):
        read_providers_file(write(tmp_path, "p.toml", "[providers\n"), set())
    with pytest.raises(ProvidersFileError, match="cannot be read"):
        read_providers_file(tmp_path / "missing.yaml", set())
    not_utf8 = tmp_path / "p.yaml"
    not_utf8.write_bytes(b"\xff\xfe garbage: [")
    with pytest.raises(ProvidersFileError, match=f"^{not_utf8}: not UTF-8"):
        read_providers_file(not_utf8, set())


def test_a_bad_setting_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("UHP_OPENAI_API", "bogus")
    assert cli.main(["serve", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "uhp-server: bad setting UHP_OPENAI_API (got 'bogus'): "
        "Input should be 'responses' or 'chat'\n"
    )


@pytest.mark.heavy
def test_a_bad_file_stops_start_up_naming_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "providers.yaml", "providers:\n  x:\n    api: grpc\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "UHP_PROVIDERS_FILE": str(path),
        "UHP_API_KEY": "uhp_sk_x",
    }
    server = ServerProcess(tmp_path / "data", env)
    with pytest.raises(RuntimeError, match="server exited early") as caught:
        server.start()
    assert f"{path}: providers.x.api: must be one of responses, chat, anthropic" in str(
        caught.value
    )
    assert server.proc is not None and server.proc.returncode == 2


# --- routing and availability, against real HTTP endpoints -----------------------------------


@pytest.fixture(scope="module")
def bare() -> Iterator[RunningProvider]:
    """A Chat-Completions-only endpoint: no models route."""
    with start_provider(KEY, ["llama-a", "shared"], chat_only=True) as running:
        yield running


@pytest.fixture(scope="module")
def full() -> Iterator[RunningProvider]:
    with start_provider(KEY, ["gpt-x", "shared"]) as running:
        yield running


def two_provider_settings(tmp_path: Path, full: RunningProvider, bare: RunningProvider) -> Settings:
    path = write(
        tmp_path,
        "p.yaml",
        f"providers:\n  local:\n    api: chat\n    base_url: {bare.base_url}\n"
        f"    api_key_env: PROVIDERS_TEST_KEY\n    models: [llama-a, shared]\n",
    )
    return Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=full.base_url,
        ANTHROPIC_API_KEY=None,
        openai_default_model=None,
        providers_file=path,
    )


async def test_models_route_to_their_provider(
    tmp_path: Path, full: RunningProvider, bare: RunningProvider
) -> None:
    upstreams = Upstreams(two_provider_settings(tmp_path, full, bare))
    catalog = ModelCatalog(upstreams)
    codex, hermes = registry()["codex"], registry()["hermes"]
    try:
        route, meta = await catalog.resolve(codex, None, "llama-a")
        assert (route.id, route.provider.name, route.model, meta) == (
            "llama-a",
            "local",
            "llama-a",
            {},
        )
        # Ambiguous: the base's own wire first (Codex: the Responses provider) ...
        route, _ = await catalog.resolve(codex, None, "shared")
        assert route.provider.name == "openai"
        # ... Hermes speaks Chat, which both serve: configuration order.
        route, _ = await catalog.resolve(hermes, None, "shared")
        assert route.provider.name == "openai"
        route, _ = await catalog.resolve(codex, None, "local/shared")
        assert (route.id, route.provider.name, route.model) == ("local/shared", "local", "shared")
        route, meta = await catalog.resolve(codex, None, "nope")
        assert route.id == "gpt-x" and meta["requested_model"] == "nope"

        listing = await catalog.harness_models("h", codex, None)
        ids = [(m["id"], m["backend"], m["available"]) for m in listing["models"]]
        assert ids == [
            ("gpt-x", "openai", True),
            ("shared", "openai", True),
            ("llama-a", "local", True),
            ("local/shared", "local", True),
        ]
        assert listing["default"] == listing["fallback"] == "gpt-x"
        entry = await catalog.provider_entry("local")
        assert entry == {
            "default": "llama-a",
            "models": [
                {
                    "id": "llama-a",
                    "label": "llama-a",
                    "backend": "local",
                    "available": True,
                    "default": True,
                },
                {
                    "id": "shared",
                    "label": "shared",
                    "backend": "local",
                    "available": True,
                    "default": False,
                },
            ],
        }
    finally:
        await upstreams.aclose()


async def test_a_static_list_is_available_only_while_the_provider_answers(
    bare: RunningProvider,
) -> None:
    settings = Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=bare.base_url,
        ANTHROPIC_API_KEY=None,
        openai_api="chat",
        openai_models="llama-a,shared",
        openai_default_model=None,
        models_cache_seconds=0,
    )
    upstreams = Upstreams(settings, failure_cache_seconds=0)
    try:
        assert await upstreams.list_models("openai") == ["llama-a", "shared"]
        # The probe reached the provider (its models route answers 404 here).
        assert any(r["path"] == "/v1/models" for r in bare.requests())
        wrong_key = Upstreams(settings.model_copy(update={"openai_api_key": "sk-wrong"}))
        dead = Upstreams(
            settings.model_copy(update={"openai_base_url": "http://127.0.0.1:9/v1"}),
            failure_cache_seconds=0,
        )
        assert await wrong_key.list_models("openai") is None  # 401: the key is refused
        assert await dead.list_models("openai") is None
        assert await ModelCatalog(dead).provider_entry("openai") == {
            "default": "llama-a",
            "models": [
                {
                    "id": "llama-a",
                    "label": "llama-a",
                    "backend": "openai",
                    "available": False,
                    "default": True,
                },
                {
                    "id": "shared",
                    "label": "shared",
                    "backend": "openai",
                    "available": False,
                    "default": False,
                },
            ],
        }
        await dead.aclose()
        await wrong_key.aclose()
    finally:
        await upstreams.aclose()


async def test_a_chat_only_provider_without_a_list_serves_nothing(bare: RunningProvider) -> None:
    settings = Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=bare.base_url,
        ANTHROPIC_API_KEY=None,
        openai_api="chat",
        openai_default_model=None,
    )
    upstreams = Upstreams(settings)
    try:
        assert await upstreams.list_models("openai") is None  # 404: nothing measured
    finally:
        await upstreams.aclose()


@pytest.mark.parametrize(
    ("base", "listed"),
    [
        ("codex", {"openai"}),
        ("claude-code", {"openai", "anthropic"}),
        ("acp", {"openai", "anthropic"}),  # its harnesses name any wire (claude-code-acp's)
    ],
)
async def test_the_catalogue_lists_the_providers_an_enabled_base_can_use(
    tmp_path: Path, full: RunningProvider, base: str, listed: set[str]
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        api_key="uhp_sk_catalogue",
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=full.base_url,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=full.url,
    )
    # Codex cannot use an Anthropic-only provider (no translation); Claude Code reaches the
    # OpenAI platform over Chat Completions.
    app = create_app(settings, {base: registry()[base]})
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": "Bearer uhp_sk_catalogue"}
    async with httpx.AsyncClient(transport=transport, base_url="http://uhp") as client:
        catalog = (await client.get("/v1/models", headers=headers)).json()
    assert set(catalog["backends"]) == listed
    assert KEY not in json.dumps(catalog) and full.url not in json.dumps(catalog)


async def test_the_default_model_comes_from_a_provider_that_serves_it(
    tmp_path: Path, bare: RunningProvider
) -> None:
    # The Anthropic provider (Claude Code's own wire, so first in its order) is down; the
    # Chat provider serves its default: Claude Code runs on that one.
    settings = Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=bare.base_url,
        openai_api="chat",
        openai_models="llama-a",
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        anthropic_default_model="claude-x",
    )
    upstreams = Upstreams(settings)
    try:
        route, meta = await ModelCatalog(upstreams).resolve(registry()["claude-code"], None, None)
        assert (route.provider.name, route.model, meta) == ("openai", "llama-a", {})
    finally:
        await upstreams.aclose()


async def test_a_model_of_a_provider_the_base_cannot_use_is_not_served(
    full: RunningProvider,
) -> None:
    # Codex cannot use an Anthropic-only provider: naming it does not route there.
    settings = Settings(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=full.base_url,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=full.url,
        openai_default_model=None,
    )
    upstreams = Upstreams(settings)
    only_anthropic = Upstreams(settings.model_copy(update={"openai_api_key": None}))
    codex = registry()["codex"]
    try:
        route, meta = await ModelCatalog(upstreams).resolve(codex, None, "anthropic/shared")
        assert route.provider.name == "openai"
        assert meta["requested_model"] == "anthropic/shared" and meta["model_fallback"]
        with pytest.raises(ApiError) as caught:
            await ModelCatalog(only_anthropic).resolve(codex, None, "anthropic/shared")
        assert (caught.value.status, caught.value.code) == (422, "model_unavailable")
    finally:
        await upstreams.aclose()
        await only_anthropic.aclose()


async def test_both_listings_show_an_unreachable_providers_models_unavailable(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path,
        "p.yaml",
        "providers:\n  local:\n    api: chat\n    base_url: http://127.0.0.1:9/v1\n"
        "    models: [llama-a, llama-b]\n",
    )
    settings = Settings(OPENAI_API_KEY=None, ANTHROPIC_API_KEY=None, providers_file=path)
    upstreams = Upstreams(settings, failure_cache_seconds=0)
    catalog = ModelCatalog(upstreams)
    try:
        listing = await catalog.harness_models("h", registry()["hermes"], None)
        entry = await catalog.provider_entry("local")
        assert entry is not None
        in_harness = [(m["id"], m["available"]) for m in listing["models"]]
        in_models = [(m["id"], m["available"]) for m in entry["models"]]
        assert in_harness == in_models == [("llama-a", False), ("llama-b", False)]
    finally:
        await upstreams.aclose()
