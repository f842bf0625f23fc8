"""Issue 33 §2: which base a task without `metadata.harness_id` runs on is explicit
(UHP_DEFAULT_BASE; unset: codex when enabled, else the first enabled base), said at start,
reported by discovery and by the harness listings, and the same at every door. Fast: two fake
bases under real names, in process."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROVIDER_KEY
from tests.scripted_provider import RunningProvider
from tests.support.agentos_platform import start_invocation
from tests.support.fakes import FakeBase, FakeSandbox, answer
from tests.support.in_process import InProcess, in_process
from uhp_server.app import create_app
from uhp_server.harnesses.default_base import (
    DefaultBase,
    DefaultBaseError,
    choose_default_base,
)
from uhp_server.settings import Settings

PROMPT = "which base"


def _bases() -> tuple[FakeBase, FakeBase]:
    """Claude Code first, as the registry's alphabetical order enables it before Codex."""
    claude = FakeBase(name="claude-code", label="Claude Code")
    codex = FakeBase(name="codex", label="Codex")
    for base in (claude, codex):
        base.script(PROMPT, answer(f"ran on {base.name}"))
    return claude, codex


@pytest.fixture
def started() -> Iterator[list[logging.LogRecord]]:
    """The records of the start log (logging may stop propagation: a handler of our own)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger = logging.getLogger("uhp_server.app")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@asynccontextmanager
async def _serve(
    tmp_path: Path, provider: RunningProvider, **settings: Any
) -> AsyncIterator[tuple[InProcess, dict[str, FakeBase]]]:
    claude, codex = _bases()
    async with in_process(
        tmp_path / "data",
        provider.base_url,
        PROVIDER_KEY,
        base=claude,
        more_bases=(codex,),
        agentos_principal="agentos",
        **settings,
    ) as running:
        yield running, {"claude-code": claude, "codex": codex}


async def _ran_on(server: InProcess, bases: dict[str, FakeBase]) -> list[str]:
    """The bases that ran a turn since the last call (and forget them)."""
    ran = [name for name, base in bases.items() if base.specs]
    for base in bases.values():
        base.specs.clear()
    return ran


async def _every_door_runs_on(server: InProcess, bases: dict[str, FakeBase], expected: str) -> None:
    client = server.client
    # Discovery says which, without a credential.
    discovery = (await client.get("/v1/uhp", headers={"Authorization": ""})).json()
    assert discovery["implementation"]["default_base"] == expected
    # UHP: the task reports the harness it ran on (Tasks §1.2), the default base's.
    done = (await server.submit(PROMPT)).json()
    assert done["status"] == "completed", done
    used = (await client.get(f"/v1/harnesses/{done['metadata']['harness_id']}")).json()
    assert used["base"] == expected
    assert await _ran_on(server, bases) == [expected]
    # GET /v1/harnesses lists that harness first.
    listed = (await client.get("/v1/harnesses")).json()["harnesses"]
    assert listed[0]["id"] == used["id"]
    assert {h["base"] for h in listed} == set(bases)
    # An unsupported base's refusal lists what is supported, the default first (a client,
    # the conformance suite among them, takes the first).
    refusal = await client.post("/v1/harnesses", json={"base": "no-such-base"})
    assert refusal.json()["error"]["detail"]["supported"][0] == expected
    # Chat Completions: the first model listed is that harness (docs/doors/openai-chat.md's
    # `client.models.list().data[0]`), and it runs on the default base.
    models = (await client.get("/openai/v1/models")).json()["data"]
    assert models[0]["id"].endswith("--" + used["id"])
    chat = await client.post(
        "/openai/v1/chat/completions",
        json={"model": models[0]["id"], "messages": [{"role": "user", "content": PROMPT}]},
    )
    assert chat.status_code == 200, chat.text
    assert await _ran_on(server, bases) == [expected]
    # The MCP tool door lists the same harness first.
    tools = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert tools.status_code == 200, tools.text
    assert used["id"] in json.dumps(tools.json()["result"]["tools"][0])
    # AgentOS: an invocation naming no harness runs on the default base too.
    invoked = await client.post(
        "/invoke",
        json=start_invocation(PROMPT, "https://example.com/v1"),
        headers={"Authorization": ""},
    )
    assert invoked.json()["status"] == "completed", invoked.text
    assert await _ran_on(server, bases) == [expected]


async def test_unset_the_default_is_codex_at_every_door_and_the_start_log_says_so(
    tmp_path: Path, provider: RunningProvider, started: list[logging.LogRecord]
) -> None:
    async with _serve(tmp_path, provider) as (server, bases):
        await _every_door_runs_on(server, bases, "codex")
    said = [r for r in started if r.getMessage() == "default_base"]
    assert [(r.base, "UHP_DEFAULT_BASE unset" in r.chosen_by) for r in said] == [  # type: ignore[attr-defined]
        ("codex", True)
    ]


async def test_uhp_default_base_picks_another_at_every_door(
    tmp_path: Path, provider: RunningProvider, started: list[logging.LogRecord]
) -> None:
    async with _serve(tmp_path, provider, default_base="claude-code") as (server, bases):
        await _every_door_runs_on(server, bases, "claude-code")
    said = [r for r in started if r.getMessage() == "default_base"]
    assert [(r.base, r.chosen_by) for r in said] == [("claude-code", "UHP_DEFAULT_BASE")]  # type: ignore[attr-defined]


def test_the_choice_without_codex_and_without_bases() -> None:
    assert choose_default_base(None, ["claude-code", "codex"]) == DefaultBase(
        "codex", "codex is installed (UHP_DEFAULT_BASE unset)"
    )
    first = choose_default_base(None, ["hermes", "pi"])
    assert first is not None and first.name == "hermes" and "first enabled" in first.chosen_by
    assert choose_default_base(None, []) is None
    assert choose_default_base(" pi ", ["hermes", "pi"]) == DefaultBase("pi", "UHP_DEFAULT_BASE")


def test_a_default_base_that_is_not_enabled_stops_start_up(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", default_base="hermes")
    with pytest.raises(DefaultBaseError, match=r"UHP_DEFAULT_BASE='hermes'.*bases install hermes"):
        create_app(settings, bases={"codex": FakeBase(name="codex")}, sandbox=FakeSandbox())


def test_a_default_base_nothing_knows_is_said_to_be_unknown(tmp_path: Path) -> None:
    """`UHP_DEFAULT_BASE=bogus` advised `uhp-server bases install bogus`, which answers
    "unknown bases: bogus": an unknown name is said to be one, with the known bases."""
    settings = Settings(data_dir=tmp_path / "data", default_base="bogus")
    with pytest.raises(DefaultBaseError) as caught:
        create_app(settings, bases={"codex": FakeBase(name="codex")}, sandbox=FakeSandbox())
    said = str(caught.value)
    assert said.startswith("UHP_DEFAULT_BASE='bogus' is not a known base (known: ")
    assert "claude-code" in said and "codex" in said and "bases install" not in said


def test_serve_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """`serve` with UHP_DEFAULT_BASE naming a base nothing installed: no traceback, exit 2."""
    env = {
        **os.environ,
        "UHP_DATA_DIR": str(tmp_path / "data"),
        "UHP_TOOLS_DIR": str(tmp_path / "no-tools"),  # nothing installed: nothing enabled
        "UHP_DEFAULT_BASE": "codex",
        "UHP_PORT": "1",  # never reached: start-up stops first
    }
    done = subprocess.run(
        [sys.executable, "-m", "uhp_server.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("uhp-server: UHP_DEFAULT_BASE='codex' is not an enabled, installed base")
    assert "Traceback" not in done.stderr


async def test_the_chat_docs_example_is_the_model_listed_first(
    tmp_path: Path, provider: RunningProvider
) -> None:
    """Issue 33 §8: docs/doors/openai-chat.md takes `models.list().data[0]` and says it is
    `codex-default--…`; the server listed the default harnesses in random order (and ran
    tasks on Claude Code's)."""
    page = (Path(__file__).resolve().parent.parent / "docs/doors/openai-chat.md").read_text()
    said = re.search(r'data\[0\]\.id\s+#[^\n]*e\.g\. "([a-z0-9-]+)--chrn_', page)
    assert said is not None, "the example's comment no longer names a model id"
    async with _serve(tmp_path, provider) as (server, _bases_by_name):
        first = (await server.client.get("/openai/v1/models")).json()["data"][0]["id"]
    assert first.startswith(said.group(1) + "--chrn_"), first
