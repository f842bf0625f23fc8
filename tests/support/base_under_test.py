"""The base the end-to-end files run on (UHP_TEST_BASE), and what it can do, in one place.

Every end-to-end file runs against one base at a time (scripts/test.sh runs them again per
base). A test that drives something a base cannot do (MCP, the server's question tool, a
plugin's stdio server) asks `BASE` which contract holds for it; the answers come from the
base's own declarations (harness_bases/base.py: `mcp_transports`, `stdio_mcp`,
`asks_natively`), never from a list of base names kept here.

The generic `acp` base runs the agent its harness names: UHP_TEST_ACP_AGENT (one of
tests/support/acp_agents.py's, as `scripts/conformance.sh --acp-agent` takes) picks it, and
every harness the tests make or use (a principal's default one too, tests/support/server.py)
names that agent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from harness_bases.base import HarnessBase
from tests.support import acp_agents
from uhp_server.engine.turns.questions import TEXT_MARKER

ACP = "acp"
# The models each ACP test agent knows by name (tests/test_acp_e2e.py: Codex puts a warning
# about an unknown model's metadata in its reply), served by the scripted provider.
ACP_AGENT_MODELS = {
    "claude-code-acp": ("claude-test", "claude-test-mini"),
    "codex-acp": ("gpt-5.4", "gpt-5.4-mini"),
}


# The bases that send an input image to the model: Codex (a `localImage` turn input), Claude
# Code (an image block in its stream-json user message), Pi (its RPC prompt's `images`),
# OpenCode, Kilo Code, Qwen Code and Kimi CLI (an ACP image block; Kimi's config names the
# turn's model `image_in` when the turn has images), Copilot CLI (`--attachment`),
# mini-swe-agent (a Chat image part), and the ACP test agents (an ACP image block: both say
# `image` in their `promptCapabilities`). Hermes 0.19.0 takes ACP image blocks too, yet none
# reached the provider (README, "Files and artifacts"). Every base gets the file in the
# workspace and its name in the prompt. (No base declares this: it is what each CLI does.)
IMAGE_BASES = {
    "codex",
    "claude-code",
    "pi",
    "opencode",
    "kilo",
    "qwen-code",
    "gemini-cli",
    "kimi",
    "copilot",
    "mini-swe-agent",
    ACP,
}


# The bases whose CLI refuses, to the model, a tool call carrying an argument the tool's
# schema does not name, though JSON Schema allows one: OpenHands CLI validates an MCP tool's
# arguments with extra ones forbidden. An argument the server must ignore (a forged writer)
# never reaches it through them. (No base declares this: it is what each CLI does.)
STRICT_ARGUMENT_BASES = {"openhands"}


class BaseUnderTestError(RuntimeError):
    """UHP_TEST_BASE / UHP_TEST_ACP_AGENT name nothing the tests can run."""


@dataclass(frozen=True)
class BaseUnderTest:
    name: str  # the `base` of its harnesses
    acp_agent: str | None = None  # with `acp`: the test agent its harnesses name

    @cached_property
    def base(self) -> HarnessBase:
        """The registered base, bound to the harness's agent for `acp` (as a turn sees it)."""
        from harness_bases import registry
        from uhp_server.harnesses.base_config import wire_backends

        registered = registry()[self.name]
        config = self.base_config
        if config is None:
            return registered
        stored = registered.parse_base_config(config, lambda value, _path: value, wire_backends())
        return registered.for_harness(stored, wire_backends())

    @property
    def base_config(self) -> dict[str, Any] | None:
        """The `uhpserver_baseConfig` every harness of this base carries (None: it takes none)."""
        return acp_agents.AGENTS[self.acp_agent] if self.acp_agent else None

    @property
    def gateway_url_variable(self) -> str | None:
        """The variable its harness names for the gateway's URL (`acp`'s `model_access`), which
        may then be a provider's usual name (OPENAI_BASE_URL) holding the gateway's URL."""
        config = self.base_config
        return str(config["model_access"]["base_url_env"]) if config is not None else None

    @property
    def label(self) -> str:
        """What the pass runs on, for messages: `acp (codex-acp)`, `kilo`."""
        return f"{self.name} ({self.acp_agent})" if self.acp_agent else self.name

    @property
    def backend(self) -> str:
        return self.base.backend

    # -- what it can do, as the base declares it ----------------------------------------------
    @property
    def speaks_mcp(self) -> bool:
        """Its CLI is an MCP client over HTTP: the harness's MCP servers, the server's own
        (`ask_user`, `uhp-memory`) reach it. A base without declares no transport, and a
        harness naming an MCP server for it is refused (400 `invalid_input`), a plugin's (422
        `unsupported_transport`)."""
        return "http" in self.base.mcp_transports

    @property
    def starts_stdio_servers(self) -> bool:
        """It starts a plugin's stdio MCP servers; else a plugin declaring one is refused."""
        return self.base.stdio_mcp

    @property
    def asks_in_text(self) -> bool:
        """No question tool reaches it (no MCP, none of its CLI's own): told to end its final
        text with the question instead (uhp_server/engine/turns/questions.py)."""
        return not self.speaks_mcp and not self.base.asks_natively

    def asking(self, tool_call: str, question: str, then: str = "") -> str:
        """The script in which the model asks `question`: `tool_call` (a TOOL directive to a
        question tool) followed by `then`, where a question tool reaches the agent; else the
        question alone on the last line of its final text (TEXT_MARKER), which the engine takes
        as the question. The answer then comes in a new turn's prompt, so the scripted model
        (which follows the first prompt's script) does not repeat it: a test checks that it
        reached the model (`answered_in_a_new_turn`)."""
        if self.asks_in_text:
            return f"SAY {TEXT_MARKER} {question}"
        return "\n".join(line for line in (tool_call, then) if line)

    @property
    def answered_in_a_new_turn(self) -> bool:
        """An answer reaches the agent as a new turn's prompt, never as a tool's result."""
        return self.asks_in_text

    @property
    def passes_unnamed_arguments(self) -> bool:
        """A tool call's arguments the tool's schema does not name reach the tool (else its
        CLI answers the call itself, refused: STRICT_ARGUMENT_BASES)."""
        return self.name not in STRICT_ARGUMENT_BASES

    @property
    def sends_images(self) -> bool:
        """The turn's input images reach the model (IMAGE_BASES), not only the workspace."""
        return self.name in IMAGE_BASES

    # -- its harnesses -------------------------------------------------------------------------
    def harness(self, **fields: Any) -> dict[str, Any]:
        """A `POST /v1/harnesses` body on this base (snake_case `fields`), naming its agent."""
        body: dict[str, Any] = {"base": self.name}
        if self.base_config is not None:
            body["uhpserver_baseConfig"] = self.base_config
        return {**body, **fields}

    def models(self, backend_defaults: dict[str, str]) -> dict[str, str]:
        """The default model per backend the test servers run (`backend_defaults` for a base
        whose CLI takes any model name)."""
        if self.acp_agent is None:
            return backend_defaults
        return {**backend_defaults, self.backend: ACP_AGENT_MODELS[self.acp_agent][0]}

    def other_models(self, backend_others: dict[str, str]) -> dict[str, str]:
        if self.acp_agent is None:
            return backend_others
        return {**backend_others, self.backend: ACP_AGENT_MODELS[self.acp_agent][1]}


def from_environment() -> BaseUnderTest:
    name = os.environ.get("UHP_TEST_BASE", "codex")
    agent = os.environ.get("UHP_TEST_ACP_AGENT") or None
    choices = "|".join(acp_agents.AGENTS)
    if name == ACP and agent not in acp_agents.AGENTS:
        raise BaseUnderTestError(f"UHP_TEST_BASE=acp needs UHP_TEST_ACP_AGENT={choices}")
    if name != ACP and agent is not None:
        raise BaseUnderTestError("UHP_TEST_ACP_AGENT goes with UHP_TEST_BASE=acp only")
    return BaseUnderTest(name, agent)


BASE = from_environment()
