"""AcpGenericBase: any agent that speaks the Agent Client Protocol on stdio, as its harness
names it (`uhpserver_baseConfig`, config.py), on the shared ACP driver.

The registered base has no agent: `for_harness` gives, per harness, a copy bound to that
harness's agent, whose wire and backend are the ones the harness named, so the gateway, the
model catalogue and the turn all see that agent's API. What the agent cannot be configured
for through ACP goes into the prompt: the standing instructions, the tools it must not use and
where the skills are come before the user's text, in a block the agent is told is the
server's; MCP servers go through `session/new` as ACP has them, each one the agent's
`mcpCapabilities` cannot take left out with a notice.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness_bases import events as ev
from harness_bases import node_runtime
from harness_bases.acp import AcpBase, AcpTurn
from harness_bases.acp_generic import config
from harness_bases.acp_generic import install as installer
from harness_bases.acp_generic.config import AgentSpec
from harness_bases.acp_generic.parser import GenericAcpParser
from harness_bases.base import (
    SYSTEM_PATH,
    BaseConfigError,
    CliPin,
    Enforcement,
    Invocation,
    Process,
    SecretSealer,
    TurnSpec,
)
from harness_bases.safe_files import real_dir
from harness_bases.skill_folders import write_skill_folders
from harness_bases.skill_notes import skills_note

STATE_DIR = ".uhp-acp"  # in the agent home: the skills, written every turn
SKILLS_DIR = "skills"
_MANAGED_SKILLS = "skills.json"
ACP_PROTOCOL_VERSION = "1"  # the version of ACP the shared driver speaks
NO_AGENT = (
    "This harness names no agent: the acp base runs the command line its "
    "uhpserver_baseConfig names (docs/acp.md)."
)


class AcpGenericBase(AcpBase):
    name = "acp"
    label = "ACP agent"
    # The registered base's: a harness's own agent replaces them (for_harness).
    backend = "openai"
    wire = "chat"
    cli_version = ACP_PROTOCOL_VERSION
    cli_pins = (
        *(CliPin("npm", a.package, a.version) for a in installer.TEST_AGENTS),
        CliPin("npm", node_runtime.package(), node_runtime.NODE_VERSION),
    )
    state_dirs = (STATE_DIR,)
    # An agent keeps its conversations where it likes: by default the whole agent home is
    # set aside and put back for a `store: false` task (a harness may name narrower paths).
    conversation_paths: tuple[str, ...] = ("*",)
    runtime_packages = ()  # agents live in the tools folder, node agents on its pinned node
    host_packages = ("nodejs", "npm")  # npm fetches the test agents
    # The agent is told (it has no standard way to withhold a tool); the engine counts steps.
    enforcement = Enforcement(disabled_tools="instruction", max_step="counted")
    stdio_mcp = True  # every ACP agent takes stdio MCP servers (ACP: session setup)
    harness_names_wire = True  # `model_access.wire`: the catalogue lists every provider
    # Any agent a user names: UHP_BASES names `acp` to let harnesses run one.
    enabled_by_default = False

    agent: AgentSpec | None = None  # set on a harness's copy only

    # -- the harness's agent ---------------------------------------------------------------
    def parse_base_config(
        self, raw: Any, seal: SecretSealer, wires: Mapping[str, str]
    ) -> dict[str, Any] | None:
        if raw is None:
            return None
        return config.parse(raw, seal, wires)

    def for_harness(
        self, stored: dict[str, Any] | None, wires: Mapping[str, str]
    ) -> AcpGenericBase:
        if stored is None:
            raise BaseConfigError("command", NO_AGENT)
        agent = AgentSpec.from_stored(stored)
        backend = wires.get(agent.model_access.wire)
        if backend is None:
            raise BaseConfigError(
                "model_access.wire",
                f"The wire {agent.model_access.wire!r} is not served by this server any more.",
            )
        bound = copy.copy(self)
        bound.agent = agent
        bound.wire = agent.model_access.wire
        bound.backend = backend
        if agent.conversation_paths is not None:
            bound.conversation_paths = agent.conversation_paths
        return bound

    # -- install -----------------------------------------------------------------------------
    def install(self, tools_dir: Path) -> None:
        installer.install(tools_dir)

    def installed_version(self, tools_dir: Path) -> str | None:
        return ACP_PROTOCOL_VERSION if installer.installed(tools_dir) else None

    # -- a turn --------------------------------------------------------------------------------
    def prepare(self, turn: TurnSpec) -> Invocation:
        if self.agent is None:
            raise RuntimeError(NO_AGENT)
        write_skill_folders(
            real_dir(turn.host_home, STATE_DIR), SKILLS_DIR, _MANAGED_SKILLS, turn.skills
        )
        fill = _placeholders(turn)
        access = self.agent.model_access
        env = {
            "PATH": f"{installer.agent_path(turn.paths.tools)}:{SYSTEM_PATH}",
            "HOME": turn.paths.home,
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            **{name: _filled(value, fill) for name, value in self.agent.env},
            access.base_url_env: turn.gateway_url,
            access.token_env: turn.gateway_token,
        }
        if access.model_env:
            env[access.model_env] = turn.model
        argv = [_filled(arg, fill) for arg in self.agent.command]
        return Invocation(argv=argv, env=env, cwd=turn.paths.workspace)

    def start_turn(self, proc: Process, turn: TurnSpec) -> AcpTurn:
        return AcpTurn(self, proc, dataclasses.replace(turn, prompt=prompt_with_preface(turn)))

    def acp_parser(self, turn: TurnSpec) -> GenericAcpParser:
        return GenericAcpParser(max_step=turn.max_step)

    def offered_mcp_servers(
        self, turn: TurnSpec, capabilities: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], list[ev.Notice]]:
        """Only the transports the agent's `mcpCapabilities` advertise (stdio: every agent)."""
        taken = capabilities.get("mcpCapabilities")
        taken = taken if isinstance(taken, dict) else {}
        offered: list[dict[str, Any]] = []
        notices: list[ev.Notice] = []
        for server in self.acp_mcp_servers(turn):
            transport = server.get("type", "stdio")
            if transport == "stdio" or taken.get(transport) is True:
                offered.append(server)
                continue
            notices.append(
                ev.Notice(
                    f"MCP server '{server['name']}' is left out: this agent does not take MCP "
                    f"servers over {transport.upper()} through ACP."
                )
            )
        return offered, notices


def _placeholders(turn: TurnSpec) -> dict[str, str]:
    return {
        "UHP_MODEL": turn.model,
        "UHP_GATEWAY_URL": turn.gateway_url,
        "UHP_TOOLS": turn.paths.tools,
        "UHP_HOME": turn.paths.home,
        "UHP_WORKSPACE": turn.paths.workspace,
    }


def _filled(text: str, fill: dict[str, str]) -> str:
    for name, value in fill.items():
        text = text.replace(f"${{{name}}}", value)
    return text


def prompt_with_preface(turn: TurnSpec) -> str:
    """The prompt, after what ACP has no field for: the standing instructions, the tools not
    to use, where the skills are."""
    parts = [turn.system_prompt.strip()] if turn.system_prompt.strip() else []
    if turn.disabled_tools:
        parts.append(
            "Do not use these tools, even if you have them: " + ", ".join(turn.disabled_tools) + "."
        )
    if turn.skills:
        folders = f"{turn.paths.home}/{STATE_DIR}/{SKILLS_DIR}"
        how = "read one's SKILL.md with your file tools"
        parts.append(skills_note(turn.skills, lambda name: f"{folders}/{name}", how))
    if not parts:
        return turn.prompt
    preface = "\n\n".join(parts)
    return f"<server-instructions>\n{preface}\n</server-instructions>\n\n{turn.prompt}"
