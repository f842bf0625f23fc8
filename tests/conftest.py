"""Shared fixtures: the scripted model provider, the pinned CLIs, a real running server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.scripted_provider import RunningProvider, start_provider
from tests.support.server import ServerProcess

PROVIDER_KEY = "sk-scripted-provider-secret"
MODELS = ["gpt-test", "gpt-test-mini", "claude-test"]
API_KEY = "uhp_sk_test_default_principal_key"


def tools_dir() -> Path:
    configured = os.environ.get("UHP_TOOLS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "uhp-server" / "tools"


@pytest.fixture(scope="session")
def provider() -> Iterator[RunningProvider]:
    running = start_provider(PROVIDER_KEY, MODELS)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def codex_installed() -> Path:
    """The pinned Codex CLI, installed once (CI installs it before the tests run)."""
    from harness_bases.codex import CodexBase

    base = CodexBase()
    if base.installed_version(tools_dir()) != base.cli_version:
        base.install(tools_dir())
    return tools_dir()


def server_env(provider: RunningProvider, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "UHP_API_KEY": API_KEY,
        "UHP_TOOLS_DIR": str(tools_dir()),
        "UHP_BASES": "codex",
        "UHP_OPENAI_DEFAULT_MODEL": "gpt-test",
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OPENAI_BASE_URL": provider.base_url,
        "UHP_CANCEL_GRACE_SECONDS": "2",
        "UHP_KEEPALIVE_SECONDS": "1",
        # A variable the agent must never see (Security §1.1: env built from an allow-list).
        "UHP_SERVER_ONLY_SECRET": "server-secret-do-not-leak",
    }
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def server(
    tmp_path_factory: pytest.TempPathFactory, provider: RunningProvider, codex_installed: Path
) -> Iterator[ServerProcess]:
    running = ServerProcess(tmp_path_factory.mktemp("server"), server_env(provider)).start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def other_key(server: ServerProcess) -> str:
    return server.create_key("other")


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    ) as http:
        yield http
