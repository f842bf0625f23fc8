"""Shared fixtures: the scripted model provider, the pinned CLIs, a real running server."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.scripted_provider import RunningProvider, start_provider
from tests.support import passes, postgres, shards
from tests.support.base_under_test import ACP_AGENT_MODELS, BASE
from tests.support.server import ServerProcess
from uhp_server.ops.logs import PACKAGES
from uhp_server.settings import Settings

PROVIDER_KEY = "sk-scripted-provider-secret"
MODELS = ["gpt-test", "gpt-test-mini", "claude-test", "claude-test-mini"]
# ... and, on an ACP test agent, those it knows by name (tests/support/base_under_test.py)
if BASE.acp_agent:
    MODELS += [m for m in ACP_AGENT_MODELS[BASE.acp_agent] if m not in MODELS]
API_KEY = "uhp_sk_test_default_principal_key"

# The end-to-end suite runs against one base at a time: UHP_TEST_BASE=claude-code bash
# scripts/test.sh ... runs the very same tests on another CLI (UHP_TEST_BASE=acp with
# UHP_TEST_ACP_AGENT=claude-code-acp|codex-acp: on that ACP agent). What the base can do, and
# the harness body naming it: tests/support/base_under_test.py.
TEST_BASE = BASE.name
# ... and against one sandbox backend at a time: UHP_TEST_SANDBOX=docker runs them in the
# docker sandbox (scripts/test.sh runs the end-to-end files a second time that way).
TEST_SANDBOX = os.environ.get("UHP_TEST_SANDBOX", "local")
# (UHP_TEST_DOCKER_RUNTIME=runsc: the docker sandbox's containers in gVisor; tests/support/
# docker.py skips them, loudly, on an engine without that runtime.)
# ... and against one kind of provider: UHP_TEST_PROVIDER=chat serves Chat Completions only
# (no models route, like a bare vLLM), so every base's wire is translated by the gateway.
TEST_PROVIDER = os.environ.get("UHP_TEST_PROVIDER", "native")
# ... and against one server or several: UHP_TEST_REPLICAS=2 makes the `server` fixture that
# many replicas on one PostgreSQL database behind haproxy (tests/support/replicas.py).
TEST_REPLICAS = int(os.environ.get("UHP_TEST_REPLICAS", "1"))
DEFAULT_MODELS = BASE.models({"openai": "gpt-test", "anthropic": "claude-test"})
OTHER_MODELS = BASE.other_models({"openai": "gpt-test-mini", "anthropic": "claude-test-mini"})


def backend_under_test() -> str:
    return BASE.backend


def provider_under_test() -> str:
    """The provider (a key of `GET /v1/models` backends) the base under test reaches."""
    return "openai" if TEST_PROVIDER == "chat" else backend_under_test()


DEFAULT_MODEL = DEFAULT_MODELS[backend_under_test()]
OTHER_MODEL = OTHER_MODELS[backend_under_test()]


def tools_dir() -> Path:
    configured = os.environ.get("UHP_TOOLS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "uhp-server" / "tools"


@pytest.fixture(autouse=True)
def server_logging_undone() -> Iterator[None]:
    """A test calling `uhp_server.cli.main` in process configures the packages' loggers as
    the CLI does (a handler of their own, no propagation): undone after it, so `caplog` sees
    the records of the tests that run after it in the same process."""
    yield
    for package in PACKAGES:
        logger = logging.getLogger(package)
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


@pytest.fixture(autouse=True)
def database_under_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """UHP_TEST_DATABASE=postgresql: every server a test starts (in process or not) stores
    in a fresh PostgreSQL database of its data directory's own, unless the test names one."""
    if postgres.TEST_DATABASE != "postgresql":
        yield
        return
    databases = postgres.Databases()

    def database(settings: Settings) -> Path | str:
        return settings.database_url or databases.url_for(settings.data_dir)

    monkeypatch.setattr(Settings, "database", property(database))
    monkeypatch.setattr(postgres, "current", databases)
    yield
    databases.drop_all()


@pytest.fixture(scope="session")
def provider() -> Iterator[RunningProvider]:
    running = start_provider(PROVIDER_KEY, MODELS, chat_only=TEST_PROVIDER == "chat")
    yield running
    running.stop()


def installed_tools(name: str) -> Path:
    """The tools folder, with the pinned CLI of base `name` installed (once per machine)."""
    from harness_bases import registry

    base = registry()[name]
    if base.installed_version(tools_dir()) != base.cli_version:
        base.install(tools_dir())
    return tools_dir()


@pytest.fixture(scope="session")
def codex_installed() -> Path:
    """The pinned Codex CLI, installed once (CI installs it before the tests run)."""
    return installed_tools("codex")


@pytest.fixture(scope="session")
def base_installed() -> Path:
    """The pinned CLI of the base under test (and, under UHP_TEST_SANDBOX=docker, a Docker
    engine with the runtime image: skipped, loudly, when no engine answers)."""
    if TEST_SANDBOX == "docker":
        from tests.support.docker import runtime_image_or_skip

        runtime_image_or_skip()
    return installed_tools(TEST_BASE)


def server_env(provider: RunningProvider, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": API_KEY,
        "UHP_TOOLS_DIR": str(tools_dir()),
        "UHP_BASES": TEST_BASE,
        "UHP_SANDBOX": TEST_SANDBOX,
        "UHP_OPENAI_DEFAULT_MODEL": DEFAULT_MODELS["openai"],
        "UHP_ANTHROPIC_DEFAULT_MODEL": DEFAULT_MODELS["anthropic"],
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OPENAI_BASE_URL": provider.base_url,
        "ANTHROPIC_API_KEY": PROVIDER_KEY,
        "ANTHROPIC_BASE_URL": provider.url,
        "UHP_CANCEL_GRACE_SECONDS": "2",
        "UHP_KEEPALIVE_SECONDS": "1",
        # A variable the agent must never see (Security §1.1: env built from an allow-list).
        "UHP_SERVER_ONLY_SECRET": "server-secret-do-not-leak",
    }
    if runtime := os.environ.get("UHP_TEST_DOCKER_RUNTIME"):
        # The docker sandbox in that engine runtime (runsc: gVisor), for every docker server.
        env["UHP_DOCKER_RUNTIME"] = runtime
    if TEST_PROVIDER == "chat":
        # One Chat-Completions-only provider for every wire, its models listed statically.
        del env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"]
        env["UHP_OPENAI_API"] = "chat"
        env["UHP_OPENAI_MODELS"] = ",".join(MODELS)
        env["UHP_OPENAI_DEFAULT_MODEL"] = DEFAULT_MODEL
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, provider: RunningProvider, base_installed: Path
) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("server")
    env = server_env(provider)
    # It outlives every test, so it cannot take the database of the test that first uses it
    # (`database_under_test`): on PostgreSQL, one of its own for the whole run.
    databases = postgres.Databases() if postgres.TEST_DATABASE == "postgresql" else None
    if databases is not None:
        env["UHP_DATABASE_URL"] = databases.url_for(data_dir)
    running: ServerProcess
    if TEST_REPLICAS > 1:
        from tests.support.replicas import Replicas

        # Quacks like a ServerProcess: the balancer's URL, the shared data dir, the keys.
        running = Replicas(data_dir, env, count=TEST_REPLICAS).start()  # type: ignore[assignment]  # (above)
    else:
        running = ServerProcess(data_dir, env).start()
    yield running
    running.stop()
    if databases is not None:
        databases.drop_all()


@pytest.fixture(scope="session")
def other_key(server: ServerProcess) -> str:
    return server.create_key("other")


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    ) as http:
        yield http


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A `heavy` test is slow too, so `-m "not slow"` is the fast, in-process tier (it runs
    before `-m` deselects). A pass on another base or sandbox leaves out what does not depend
    on it: it ran in the Codex, local-sandbox pass (tests/support/passes.py). UHP_TEST_SHARD=i/n
    keeps the i-th of n shards of whole files (tests/support/shards.py)."""
    for item in items:
        if item.get_closest_marker("heavy") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    kept, deselected = passes.split(items, base=TEST_BASE, sandbox=TEST_SANDBOX)
    if shard := os.environ.get("UHP_TEST_SHARD"):
        kept, other_shards = shards.split(kept, shards.Shard.parse(shard))
        deselected += other_shards
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
